"""Where CI's time goes: `python -m bench.citime` (`make ci-time`).

    python -m bench.citime                 read build/ci/ (what `make ci` leaves there),
                                           write docs/ci-time.json and docs/ci-time.md's tables
    python -m bench.citime --print         the same tables as plain text, nothing written
                                           (the end of `make ci` prints them)
    python -m bench.citime --check         exit 1 if docs/ci-time.md is not what
                                           docs/ci-time.json renders to

`make test` and `make test-slow` write a junit XML report each
(build/ci/test.xml, build/ci/test-slow.xml; the plugin bench.citime_plugin
adds every test's CPU seconds to it), `make ci` the seconds of each step
(build/ci/steps.tsv) and .ci/wheel-check those of its own steps
(build/ci/wheel-check.tsv). From them this writes the measurement, reduced
(tiers, files, tests of a second or more), to docs/ci-time.json, and from
that the tables between the markers of docs/ci-time.md, so the document's
check needs no CI run (tests/tools/test_citime.py).
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shmref.core import tables

REPO = Path(__file__).resolve().parents[1]
BUILD = REPO / "build" / "ci"
DATA = REPO / "docs" / "ci-time.json"
DOC = REPO / "docs" / "ci-time.md"
TIERS = ("test", "test-slow")  # make targets; each leaves build/ci/<tier>.xml
BEGIN = "<!-- BEGIN GENERATED: ci-time (python -m bench.citime; data: docs/ci-time.json) -->"
END = "<!-- END GENERATED: ci-time -->"
KEEP_S = 1.0  # tests at least this long (wall or CPU) are kept one by one
TOP = 25  # the slowest tests listed
LONG_S = 10.0


class CiTimeError(Exception):
    """A bad input: one line for the user."""


@dataclass(frozen=True)
class TestTime:
    tier: str
    test: str  # tests/test_x.py::TestClass::test_name[param]
    wall_s: float
    cpu_s: float | None


def node_of(case: ET.Element) -> str:
    """The pytest node id of a junit testcase (classname `tests.test_x.TestC`, name)."""
    parts = case.get("classname", "").split(".")
    name = case.get("name", "")
    for i in range(len(parts), 0, -1):  # the module is the longest prefix that is a file
        path = "/".join(parts[:i]) + ".py"
        if (REPO / path).is_file():
            return "::".join([path, *parts[i:], name])
    return "::".join([p for p in ("/".join(parts[:-1]) + ".py", parts[-1], name) if p])


def read_junit(tier: str, path: Path) -> list[TestTime]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise CiTimeError(f"{path}: not a junit XML report ({exc})") from None
    found = []
    for case in root.iter("testcase"):
        if case.find("skipped") is not None and float(case.get("time", "0")) < KEEP_S:
            continue  # deselected by a skip: no time to account for
        cpu = next(
            (p.get("value") for p in case.iter("property") if p.get("name") == "cpu_s"), None
        )
        try:
            wall = float(case.get("time", "0"))
            cpu_s = float(cpu) if cpu is not None else None
        except ValueError:
            raise CiTimeError(f"{path}: a testcase's time is not a number") from None
        found.append(TestTime(tier, node_of(case), wall, cpu_s))
    if not found:
        raise CiTimeError(f"{path}: no testcase in this junit XML report")
    return found


def read_steps(path: Path) -> list[dict[str, Any]]:
    """`step<TAB>seconds<TAB>exit` lines (what .ci/steps and .ci/wheel-check write);
    .ci/steps adds a fourth field, the seconds since its start at which the step
    ended (`ended`), and names a step it ran in the background `STEP&`."""
    steps = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CiTimeError(f"{path}: {exc.strerror}") from None
    for number, line in enumerate(lines, 1):
        fields = line.split("\t")
        try:
            step, seconds, code = fields[0], float(fields[1]), int(fields[2])
        except (IndexError, ValueError):
            raise CiTimeError(f"{path}:{number}: not `step<TAB>seconds<TAB>exit`") from None
        entry: dict[str, Any] = {"step": step, "seconds": round(seconds, 1), "exit": code}
        if len(fields) > 3:
            try:
                entry["ended"] = round(float(fields[3]), 1)
            except ValueError:
                raise CiTimeError(f"{path}:{number}: the fourth field is no number") from None
        steps.append(entry)
    return steps


def steps_total(steps: Sequence[dict[str, Any]]) -> float:
    """make ci's wall seconds: when its last step ended, where the steps say
    (a step in the background ran beside others), else their sum."""
    if steps and all("ended" in s for s in steps):
        return float(max(s["ended"] for s in steps))
    return float(sum(s["seconds"] for s in steps))


def reduce(times: Sequence[TestTime], keep_s: float = KEEP_S) -> dict[str, Any]:
    """Per tier: its count and sums, per file; the tests of `keep_s` or more one by one."""
    tiers: dict[str, Any] = {}
    for t in times:
        tier = tiers.setdefault(t.tier, {"tests": 0, "wall_s": 0.0, "cpu_s": 0.0, "files": {}})
        path = t.test.split("::", 1)[0]
        file = tier["files"].setdefault(path, {"tests": 0, "wall_s": 0.0, "cpu_s": 0.0})
        for row in (tier, file):
            row["tests"] += 1
            row["wall_s"] += t.wall_s
            row["cpu_s"] += t.cpu_s or 0.0
    for tier in tiers.values():
        for row in (tier, *tier["files"].values()):
            row["wall_s"], row["cpu_s"] = round(row["wall_s"], 1), round(row["cpu_s"], 1)
    kept = [t for t in times if max(t.wall_s, t.cpu_s or 0.0) >= keep_s]
    kept.sort(key=lambda t: (-t.wall_s, t.tier, t.test))
    tests = [
        {
            "tier": t.tier,
            "test": t.test,
            "wall_s": round(t.wall_s, 1),
            "cpu_s": None if t.cpu_s is None else round(t.cpu_s, 1),
        }
        for t in kept
    ]
    return {"tiers": tiers, "tests": tests}


def gather(build: Path, note: str) -> dict[str, Any]:
    """What a `make ci` left in `build`, reduced."""
    times: list[TestTime] = []
    for tier in TIERS:
        if (build / f"{tier}.xml").is_file():
            times += read_junit(tier, build / f"{tier}.xml")
    if not times:
        raise CiTimeError(f"{build}: no test.xml or test-slow.xml (run `make ci` first)")
    data = {"measured": note, **reduce(times)}
    for name in ("steps", "wheel-check"):
        if (build / f"{name}.tsv").is_file():
            data[name] = read_steps(build / f"{name}.tsv")
    return data


def short(test: str, width: int = 40) -> str:
    """A test id with a long parameter cut (a TLA+ expression is no name)."""
    head, bracket, param = test.partition("[")
    if bracket and len(param) > width:
        return f"{head}[{param[: width - 4]}…]"
    return test


def _s(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def render(data: dict[str, Any], markdown: bool = True, top: int = TOP) -> str:
    """The tables: CI's steps, wheel-check's steps, the tiers, their costliest
    files, the slowest tests."""
    table = tables.markdown if markdown else tables.text
    parts = [f"Measured: {data.get('measured') or 'not said'}."]
    if data.get("steps"):
        total = steps_total(data["steps"])
        rows = [
            [
                f"`make {s['step'].removesuffix('&')}`"
                + (
                    " (in the background, beside the next steps)" if s["step"].endswith("&") else ""
                ),
                _s(s["seconds"]),
                s["exit"],
            ]
            for s in data["steps"]
        ]
        rows.append(["**all of `make ci`**", _s(total), ""])
        parts += ["CI's steps (wall seconds):", table(["step", "seconds", "exit"], rows)]
    if data.get("wheel-check"):
        rows = [[s["step"], _s(s["seconds"]), s["exit"]] for s in data["wheel-check"]]
        parts += ["`.ci/wheel-check`'s steps (wall seconds):", table(["step", "s", "exit"], rows)]
    tiers = data["tiers"]
    tests = data["tests"]
    rows = [
        [
            f"`make {name}`",
            tier["tests"],
            _s(tier["wall_s"]),
            _s(tier["cpu_s"]),
            sum(1 for t in tests if t["tier"] == name and t["wall_s"] >= LONG_S),
        ]
        for name, tier in tiers.items()
    ]
    parts += [
        "Per tier (sums over the tests; with `-n 2` a tier's wall time is about half its sum):",
        table(["tier", "tests", "test s", "CPU s", f"tests ≥ {LONG_S:.0f} s"], rows),
    ]
    files = [
        (name, path, row) for name, tier in tiers.items() for path, row in tier["files"].items()
    ]
    files.sort(key=lambda f: (-f[2]["wall_s"], f[0], f[1]))
    rows = [
        [f"`make {name}`", f"`{path}`", row["tests"], _s(row["wall_s"]), _s(row["cpu_s"])]
        for name, path, row in files[:15]
    ]
    parts += ["The 15 costliest files:", table(["tier", "file", "tests", "s", "CPU s"], rows)]
    rows = [
        [i, f"`make {t['tier']}`", f"`{short(t['test'])}`", _s(t["wall_s"]), _s(t["cpu_s"])]
        for i, t in enumerate(tests[:top], 1)
    ]
    parts += [f"The {top} slowest tests:", table(["#", "tier", "test", "s", "CPU s"], rows)]
    return "\n\n".join(parts) + "\n"


def generate(doc_text: str, data: dict[str, Any]) -> str:
    if BEGIN not in doc_text or END not in doc_text:
        raise CiTimeError(f"{DOC.name}: lacks the markers {BEGIN} ... {END}")
    head, rest = doc_text.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    return head + BEGIN + "\n" + render(data) + END + tail


def load_data(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CiTimeError(f"{path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise CiTimeError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict) or "tiers" not in data or "tests" not in data:
        raise CiTimeError(f"{path}: lacks `tiers` or `tests`")
    return data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.citime", description=__doc__)
    parser.add_argument("--build", type=Path, default=BUILD, help="what `make ci` left")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--doc", type=Path, default=DOC)
    parser.add_argument("--note", default="", help="how and where it was measured")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if the document is stale")
    mode.add_argument("--print", action="store_true", help="print the tables, write nothing")
    args = parser.parse_args(argv)
    try:
        if args.print:
            print(render(gather(args.build, args.note or str(args.build)), markdown=False, top=15))
            return 0
        if args.check:
            current = args.doc.read_text(encoding="utf-8")
            expected = generate(current, load_data(args.data))
            if current == expected:
                return 0
            diff = difflib.unified_diff(
                current.splitlines(), expected.splitlines(), "current", "generated", lineterm=""
            )
            print(f"{args.doc} is stale (python -m bench.citime):\n" + "\n".join(diff))
            return 1
        data = gather(args.build, args.note)
        args.doc.write_text(generate(args.doc.read_text(encoding="utf-8"), data), "utf-8")
        args.data.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.data} and {args.doc}")
        return 0
    except CiTimeError as exc:
        print(exc, file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
