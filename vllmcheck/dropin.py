"""README.md's drop-in paragraph, generated from docs/vllm-check.json
(`python -m vllmcheck --write-docs`; a test fails when the README's block is
not the record's): per release, the release's own tests on it and on
refimpl, each test refimpl does not pass with its failure's first line, the
oracle on the release, the mixed deployments and the findings reproduced."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from vllmcheck import README, RECORD
from vllmcheck.ledger import load

NAME = "vllm-dropin"
SOURCE = "python -m vllmcheck --write-docs; data: docs/vllm-check.json"
BEGIN = f"<!-- BEGIN GENERATED: {NAME} ({SOURCE}) -->"
END = f"<!-- END GENERATED: {NAME} -->"


class DocError(Exception):
    """README.md cannot take the block (one line)."""


def _short(path: str) -> str:
    if path.startswith("the shm-cache tests"):
        return "the shm-cache tests of `test_cache.py` (a process each)"
    return f"`{Path(path).name}`"


def _quote(text: str, limit: int = 140) -> str:
    text = " ".join(text.replace("`", "'").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _counts(tests: dict[str, Any]) -> str:
    release, refimpl = tests["release"]["files"], tests["refimpl"]["files"]
    said = []
    for path, data in release.items():
        other = refimpl.get(path)
        there = f"{other['passed']}/{other['total']}" if other else "not run"
        said.append(f"{_short(path)} {data['passed']}/{data['total']} and {there}")
    return ", ".join(said)


def _failures(side: dict[str, Any]) -> list[str]:
    found = []
    for path, data in side["files"].items():
        for failure in data.get("failures", []):
            first = failure.get("first_line", "")
            said = f": `{_quote(first)}`" if first else ""
            named = " (named in FINDINGS.md)" if failure.get("named_in_findings") else ""
            found.append(f"`{Path(path.split(' of ')[-1]).name}::{failure['test']}`{said}{named}")
    return found


def _mixed(run: dict[str, Any]) -> str:
    head = f"{run['deployment']}, {run['serde']} serde"
    if "error" in run:
        return f"{head}: {_quote(run['error'])}"
    levels = run["levels"]
    said = ", ".join(
        f"{level} {levels.get(level, {}).get('status', 'not run')}"
        for level in ("seed-compatible", "seed-layout")
    )
    worse = "".join(f"; worse: {_quote(item)}" for item in run["worse"])
    return (
        f"{head}: {said}; {run['seed_status']} of {run['properties']} properties with the "
        f"seed's status, {len(run['better'])} better, {len(run['worse'])} worse{worse}"
    )


def release_text(release: str, entry: dict[str, Any]) -> list[str]:
    """The lines of one release's entry."""
    tests = entry["tests"]
    lines = [
        f"- **vLLM {release}**, checked on {entry['date']} (torch {entry.get('torch', '?')}, "
        f"on the CPU). Its own tests of the module, passing on the release and with refimpl "
        f"in the module's place: {_counts(tests)}."
    ]
    missing = sorted(set(tests["release"].get("missing", [])))
    if missing:
        lines.append(f"  The sdist has no {', '.join(f'`{m}`' for m in missing)}: not run.")
    failing = _failures(tests["refimpl"])
    if failing:
        lines.append("  Not passing on refimpl:")
        lines += [f"  - {line}" for line in failing]
    release_failing = _failures(tests["release"])
    if release_failing:
        lines.append("  Not passing on the release itself:")
        lines += [f"  - {line}" for line in release_failing]
    oracle = entry["oracle"]
    if "error" in oracle:
        lines.append(f"  The oracle on the release's module: {_quote(oracle['error'])}.")
    else:
        lines.append(
            f"  The oracle gives the release's module the seed's status on "
            f"{oracle['seed_status']} of {oracle['properties']} properties."
        )
    exchange = entry.get("exchange")
    if exchange is not None and "error" in exchange:
        lines.append(f"  Values exchanged with the release: {_quote(exchange['error'])}.")
    elif exchange is not None:
        problems = exchange["problems"]
        lines.append(
            f"  {exchange['values']} values (plain ones, tensors, `MultiModalKwargsItem`s) "
            "between the release's `MsgpackSerde` and refimpl's, each way through a writer "
            f"and a reader on one segment, and byte for byte: {exchange['checks']} checks, "
            + (
                f"{len(problems)} differ ({_quote('; '.join(problems))})."
                if problems
                else "all alike."
            )
        )
    lines.append("  Mixed deployments, on every property:")
    lines += [f"  - {_mixed(run)}" for run in entry["mixed"]]
    findings = entry["findings"]
    if "error" in findings:
        lines.append(f"  The seed-findings tests on the release: {_quote(findings['error'])}.")
    else:
        judged = len(findings["reproduced"]) + len(findings["not_reproduced"])
        reproduced = ", ".join(findings["reproduced"]) or "none"
        lines.append(
            f"  With the release's module as the seed, the seed-findings tests reproduce "
            f"{len(findings['reproduced'])} of the {judged} findings they judge "
            f"([FINDINGS.md](FINDINGS.md) {reproduced})"
            + (
                "; not: " + ", ".join(f["id"] for f in findings["not_reproduced"]) + "."
                if findings["not_reproduced"]
                else "."
            )
        )
    return lines


def block(data: dict[str, Any]) -> str:
    """The generated text between the markers."""
    releases = data.get("releases") or {}
    if not releases:
        return "No vLLM release has been checked yet: `make vllm-check` records one."
    lines = [
        "**The drop-in claim, checked against vLLM's releases** (`make vllm-check`, "
        "`VLLM=X` for another release; every figure from "
        "[docs/vllm-check.json](docs/vllm-check.json), which `make test` holds to "
        "refimpl's current files):",
        "",
    ]
    for release, entry in releases.items():
        lines += release_text(release, entry)
    return "\n".join(lines)


def render(doc: str, data: dict[str, Any]) -> str:
    """`doc` with its block replaced by the record's."""
    pattern = re.compile(rf"({re.escape(BEGIN)}\n).*?({re.escape(END)})", re.S)
    if len(pattern.findall(doc)) != 1:
        raise DocError(f"README.md needs exactly one '{BEGIN}' ... '{END}' pair")
    text = block(data)
    return pattern.sub(lambda match: match.group(1) + text + "\n" + match.group(2), doc)


def write(readme: Path = README, record: Path = RECORD) -> bool:
    """README.md's block made current; whether it changed."""
    doc = readme.read_text(encoding="utf-8")
    new = render(doc, load(record))
    if new != doc:
        readme.write_text(new, encoding="utf-8")
    return new != doc
