"""`make findings`: regenerate the generated sections of FINDINGS.md.

    python -m shmref findings                      rewrite FINDINGS.md
    python -m shmref findings --check              exit 1 with a diff if it is stale
    python -m shmref findings --conformance FILE   first refresh the oracle snapshot
                                                   from `python -m shmref.conformance
                                                   --impl seed`'s conformance.json
    python -m shmref findings --check --conformance FILE
                                                   also exit 1 if the snapshot is not
                                                   FILE's summary (writes nothing)

The findings are data (docs/findings.toml): one entry per finding with its
severity, reach in vLLM, vLLM code path, upstream status, the vLLM releases
that have it, the upstream incidents that match it, regression tests and
replay command; and the vLLM commits and releases those columns describe
([versions] and [[release_group]], shmref.docgen.versions). From it and from
the tests themselves (a refimpl test
marked `xfail(strict=True)` means refimpl does not close the finding yet)
this module writes the summary and replay tables between the markers
`<!-- BEGIN GENERATED: name -->` / `<!-- END GENERATED: name -->`. The
section "The oracle's report on the seed" comes from a snapshot of the
oracle's JSON (docs/seed-conformance.json), so the check needs no oracle run.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabulate import tabulate  # type: ignore[import-untyped]

from shmref.core.paths import checkout
from shmref.docgen import callpictures, coverage, pictures
from shmref.docgen.datafiles import load_entries
from shmref.docgen.oracle_snapshot import (
    FindingsError,
    load_summary,
    oracle_section,
    summarize_conformance,
)
from shmref.docgen.versions import (
    Versions,
    check_incidents,
    check_releases,
    header,
    incidents_section,
    load_versions,
    notes,
    parse_releases,
    release_headers,
)

REPO = checkout() or Path.cwd()  # FINDINGS.md and docs/ live in a shmref checkout
DATA = REPO / "docs" / "findings.toml"
DOC = REPO / "FINDINGS.md"
SNAPSHOT = REPO / "docs" / "seed-conformance.json"
COVERAGE = REPO / "docs" / "coverage.toml"

SEVERITIES = (
    "data returned to the wrong request",
    "crash or wedge",
    "resource leak",
    "wrong error type",
    "documentation only",
)
REACHES = (
    "normal operation",
    "a configuration",
    "an administrative call",
    "API misuse only",
    "none known",
)
UPSTREAM = ("still present", "fixed", "changed")
# reaches that a deployment triggers on its own need the vLLM code path that gets there
REQUIRED = (
    "id",
    "title",
    "severity",
    "reach",
    "vllm_path",
    "upstream",
    "releases",
    "seed_tests",
    "refimpl_tests",
    "replay",
)
OPTIONAL = ("upstream_note", "releases_note", "refimpl_note", "refimpl_kept", "incidents")


@dataclass(frozen=True)
class Finding:
    """One row of docs/findings.toml: a defect of the seed, where it reaches vLLM, its tests."""

    id: str
    title: str
    severity: str
    reach: str
    vllm_path: str
    upstream: str
    releases: str  # the vLLM releases that have it: "0.11.0-0.34.0", "0.32.0-0.34.0", "none"
    seed_tests: tuple[str, ...]
    refimpl_tests: tuple[str, ...]
    replay: str
    upstream_note: str = ""
    releases_note: str = ""  # where a release group has it differently, or not
    refimpl_note: str = ""
    refimpl_kept: str = ""  # why refimpl keeps the seed's behaviour on purpose
    incidents: tuple[str, ...] = ()  # upstream issues/PRs that match it: "#N: what it was"


# -- the data file ---------------------------------------------------------------------------


def _entry(raw: Any, index: int) -> Finding:
    where = f"finding #{index + 1}" + (f" (id {raw.get('id')!r})" if isinstance(raw, dict) else "")
    if not isinstance(raw, dict):
        raise FindingsError(f"{where}: expected a table, got {type(raw).__name__}")
    missing = [k for k in REQUIRED if k not in raw]
    unknown = sorted(set(raw) - set(REQUIRED) - set(OPTIONAL))
    if missing or unknown:
        raise FindingsError(f"{where}: missing {missing or 'nothing'}, unknown {unknown or 'none'}")
    for key, allowed in (("severity", SEVERITIES), ("reach", REACHES), ("upstream", UPSTREAM)):
        if raw[key] not in allowed:
            raise FindingsError(f"{where}: {key} {raw[key]!r} is not one of {list(allowed)}")
    for key in ("seed_tests", "refimpl_tests"):
        tests = raw[key]
        if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
            raise FindingsError(f"{where}: {key} must be a non-empty list of pytest node ids")
        bad = [t for t in tests if not re.fullmatch(r"tests/[\w/]+\.py::test_\w+", t)]
        if bad:
            raise FindingsError(
                f"{where}: {key} has ids that are not tests/FILE.py::test_NAME: {bad}"
            )
    for key in ("id", "title", "vllm_path", "replay", "releases", *OPTIONAL):
        if key == "incidents":
            continue
        if key in raw and (not isinstance(raw[key], str) or not raw[key].strip()):
            raise FindingsError(f"{where}: {key} must be a non-empty string")
    try:
        parse_releases(raw["releases"])
    except ValueError as exc:
        raise FindingsError(f"{where}: releases: {exc}") from exc
    incidents = raw.get("incidents", [])
    try:
        check_incidents(incidents, "incidents" in raw)
    except ValueError as exc:
        raise FindingsError(f"{where}: {exc}") from exc
    if not raw["replay"].startswith("python -m "):
        raise FindingsError(
            f"{where}: replay must be a 'python -m ...' command, got {raw['replay']!r}"
        )
    if raw["reach"] in REACHES[:3] and raw["vllm_path"] == "none known":
        raise FindingsError(f"{where}: reach {raw['reach']!r} needs a vLLM code path")
    return Finding(
        **{
            **raw,
            "seed_tests": tuple(raw["seed_tests"]),
            "refimpl_tests": tuple(raw["refimpl_tests"]),
            "incidents": tuple(incidents),
        }
    )


def load_findings(path: Path = DATA) -> list[Finding]:
    """Parse and validate the data file; raise FindingsError naming what is wrong."""
    raw = load_entries(path, "finding", FindingsError, "findings data")
    findings = [_entry(item, i) for i, item in enumerate(raw)]
    ids = [f.id for f in findings]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise FindingsError(f"{path}: duplicate ids {duplicates}")
    try:
        check_releases(findings, path)
    except ValueError as exc:
        raise FindingsError(str(exc)) from exc
    return findings


# -- the tests the data names ------------------------------------------------------------------


def _is_xfail(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr == "xfail"


def defined_tests(path: Path) -> dict[str, bool]:
    """Test functions defined at the top level of `path`, each with whether it is xfail."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError) as exc:
        raise FindingsError(f"cannot read tests in {path}: {exc}") from exc
    return {
        node.name: any(_is_xfail(d) for d in node.decorator_list)
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }


def xfail_map(findings: Sequence[Finding], repo: Path = REPO) -> dict[str, bool]:
    """Node id -> xfail for every test the findings name; FindingsError if one is missing."""
    by_file: dict[str, dict[str, bool]] = {}
    out: dict[str, bool] = {}
    missing = []
    for finding in findings:
        for node in (*finding.seed_tests, *finding.refimpl_tests):
            file, name = node.split("::")
            if file not in by_file:
                by_file[file] = defined_tests(repo / file) if (repo / file).is_file() else {}
            if name not in by_file[file]:
                missing.append(f"{finding.id}: {node}")
            else:
                out[node] = by_file[file][name]
    if missing:
        raise FindingsError(
            "regression tests named in the findings data do not exist: " + "; ".join(missing)
        )
    return out


def refimpl_closes(finding: Finding, xfail: Mapping[str, bool]) -> str:
    """'yes' / 'no' / 'partly', from the xfail markers of the refimpl tests;
    'no, kept' where refimpl follows the seed on purpose (its tests pin that)."""
    if finding.refimpl_kept:
        return f"no, kept ({finding.refimpl_kept})"
    open_tests = sum(xfail[t] for t in finding.refimpl_tests)
    answer = (
        "yes" if open_tests == 0 else "no" if open_tests == len(finding.refimpl_tests) else "partly"
    )
    return f"{answer} ({finding.refimpl_note})" if finding.refimpl_note else answer


# -- the generated sections ----------------------------------------------------------------------


def ranked(findings: Sequence[Finding]) -> list[Finding]:
    """Worst first: by severity, then by how easily vLLM reaches it, then document order."""
    order = {f.id: i for i, f in enumerate(findings)}
    return sorted(
        findings, key=lambda f: (SEVERITIES.index(f.severity), REACHES.index(f.reach), order[f.id])
    )


def summary_table(
    findings: Sequence[Finding], xfail: Mapping[str, bool], versions: Versions
) -> str:
    """The table, under the lines that say which vLLM its columns describe."""
    rows = []
    for f in ranked(findings):
        upstream = f"{f.upstream}: {f.upstream_note}" if f.upstream_note else f.upstream
        releases = f"{f.releases} ({f.releases_note})" if f.releases_note else f.releases
        rows.append(
            [
                f.id,
                f.title,
                f.severity,
                f.reach,
                f"`{f.vllm_path}`" if f.vllm_path != "none known" else f.vllm_path,
                upstream,
                releases,
                refimpl_closes(f, xfail),
            ]
        )
    headers = [
        "#",
        "finding",
        "severity",
        "reach in vLLM",
        header("vLLM code path", versions.code_path, "`cache/shm.py`"),
        *release_headers(versions),
        "refimpl closes it",
    ]
    table = str(tabulate(rows, headers, tablefmt="github"))
    return notes(versions) + "\n\n" + table + incidents_section(ranked(findings))


def replay_table(findings: Sequence[Finding], xfail: Mapping[str, bool]) -> str:
    """FINDINGS.md's replay table: each finding's command and the tests that show it."""

    def names(tests: Sequence[str]) -> str:
        return "<br>".join(
            f"`{t.split('::')[1]}`" + (" (xfail)" if xfail[t] else "") for t in tests
        )

    rows = [[f.id, f"`{f.replay}`", names(f.seed_tests), names(f.refimpl_tests)] for f in findings]
    return str(tabulate(rows, ["#", "replay", "seed shows it", "refimpl"], tablefmt="github"))


def sections(
    findings: Sequence[Finding],
    summary: Mapping[str, Any],
    versions: Versions,
    repo: Path = REPO,
    coverage_data: Path = COVERAGE,
) -> dict[str, str]:
    """Every generated section of FINDINGS.md, by marker name, from the findings and the data."""
    xfail = xfail_map(findings, repo)
    try:
        covered = coverage.section(coverage_data, repo)
    except coverage.CoverageError as exc:
        raise FindingsError(str(exc)) from exc
    return {
        "summary": summary_table(findings, xfail, versions),
        "replay": replay_table(findings, xfail),
        "oracle": oracle_section(summary),
        "coverage": covered,
    }


def render(doc: str, generated: Mapping[str, str]) -> str:
    """Replace each marked section of `doc` with its generated text."""
    for name, text in generated.items():
        pattern = re.compile(
            rf"(<!-- BEGIN GENERATED: {name} [^\n]*-->\n).*?"
            rf"(<!-- END GENERATED: {name} -->)",
            re.S,
        )
        if len(pattern.findall(doc)) != 1:
            raise FindingsError(
                f"FINDINGS.md needs exactly one '<!-- BEGIN GENERATED: {name} "
                f"... -->' ... '<!-- END GENERATED: {name} -->' pair"
            )

        def fill(match: re.Match[str], text: str = text) -> str:
            return match.group(1) + text.rstrip() + "\n" + match.group(2)

        doc = pattern.sub(fill, doc)
    return doc


def generate(
    doc: Path = DOC,
    data: Path = DATA,
    snapshot: Path = SNAPSHOT,
    repo: Path = REPO,
    coverage_data: Path = COVERAGE,
) -> str:
    """FINDINGS.md as it should be."""
    try:
        text = doc.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise FindingsError(f"{doc} not found") from exc
    summary = load_summary(snapshot)
    drawn = pictures.for_doc(pictures.sections(""), text)
    homeless = sorted(set(callpictures.sections(pictures.FOLDER, "")) - set(drawn))
    if homeless:
        raise FindingsError(
            f"{', '.join(homeless)}: a finding's picture has no place in {doc.name} "
            "(add its BEGIN/END GENERATED markers under the finding)"
        )
    generated = sections(load_findings(data), summary, load_versions(data), repo, coverage_data)
    return render(text, {**generated, **drawn})


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m shmref findings`: FINDINGS.md's sections written, or (--check) checked."""
    parser = argparse.ArgumentParser(
        prog="python -m shmref findings",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 with a diff if FINDINGS.md is stale",
    )
    parser.add_argument(
        "--conformance",
        type=Path,
        metavar="FILE",
        help="the oracle's conformance.json: refresh the snapshot from it first",
    )
    parser.add_argument("--doc", type=Path, default=DOC, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, default=DATA, help=argparse.SUPPRESS)
    parser.add_argument("--snapshot", type=Path, default=SNAPSHOT, help=argparse.SUPPRESS)
    parser.add_argument("--coverage-data", type=Path, default=COVERAGE, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not DATA.is_file():
        print(f"shmref findings: {DATA} not found: run it in a shmref checkout", file=sys.stderr)
        return 2
    if not args.check and args.doc == DOC:  # the findings' calls, recorded on the seed
        tlc_drawn = {f for p in pictures.PICTURES for f in p.findings}
        try:
            wanted = callpictures.wanted(load_findings(args.data), tlc_drawn)
        except FindingsError as exc:
            print(f"findings: {exc}", file=sys.stderr)
            return 2
        for note in callpictures.refresh(wanted, pictures.FOLDER, REPO):
            print(f"pictures: {note}")
    try:
        if args.conformance:
            summary = summarize_conformance(json.loads(args.conformance.read_text("utf-8")))
            if args.check:  # CI's currency check: the snapshot must be this report's summary
                if load_summary(args.snapshot) != summary:
                    print(
                        f"{args.snapshot} is not the summary of {args.conformance}: run "
                        f"`make findings CONFORMANCE={args.conformance}` and commit it",
                        file=sys.stderr,
                    )
                    return 1
            else:
                args.snapshot.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
        expected = generate(args.doc, args.data, args.snapshot, coverage_data=args.coverage_data)
        current = args.doc.read_text(encoding="utf-8")
    except (FindingsError, OSError, json.JSONDecodeError) as exc:
        print(f"findings: {exc}", file=sys.stderr)
        return 2
    drawn = pictures.update(args.check, render_doc=render) if args.doc == DOC else 0
    if args.check:
        if current == expected:
            return drawn
        sys.stdout.writelines(
            difflib.unified_diff(
                current.splitlines(True),
                expected.splitlines(True),
                "FINDINGS.md (committed)",
                "FINDINGS.md (generated)",
            )
        )
        print("FINDINGS.md is stale: run `make findings` and commit it", file=sys.stderr)
        return 1
    if current != expected:
        args.doc.write_text(expected, encoding="utf-8")
        print("FINDINGS.md regenerated")
    return drawn
