"""An expectations file: what a store is known to get on properties it does
not pass (on purpose or not yet), each with its reason, so that its CI gates
on every result: a new failure and an unexpected pass both fail the run.

    version = 1
    [[expected]]
    property = "test_ring.py::TestBadInput::test_bad_addresses"
    status = "FAIL"
    reason = "keeps the seed's untyped addresses (FINDINGS.md finding 1)"

A property not listed is expected not to fail (pass, skip, not run or
assumption). A hazard property may be listed per counterexample (`case`,
as the report names it: "MCCopyFail sim-3"); `status` may be a list (a
known flake: ["pass", "FAIL"], or "FLAKY"). Read with the standard library's
tomllib (its errors carry the line), written with tomlkit.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import tomlkit

from shmref.core.levels import BAD, FLAKY, NOT_RUN, SKIP, STATUSES
from shmref.core.paths import SUITE_DIR
from shmref.core.suitegroups import TEST_GROUPS, group_of
from shmref.oracle.hazards import HAZARDS
from shmref.oracle.job import RECORDING_UNIT
from shmref.oracle.verdict import Check
from shmref.traces import shipped

VERSION = 1
KEYS = {"property", "case", "status", "reason"}
UNJUDGED = (NOT_RUN, SKIP)  # a property that was not judged neither passes nor fails


class ExpectationsError(ValueError):
    """One line: the file, the line and what is wrong."""


@dataclass(frozen=True)
class Expected:
    prop: str
    case: str  # "" for the whole property
    statuses: tuple[str, ...]
    reason: str = ""

    @property
    def label(self) -> str:
        return f"{self.prop} case {self.case}" if self.case else self.prop


@dataclass(frozen=True)
class Surprise:
    """A result the file does not expect: kind is 'new failure' (a failure
    not listed, or another status than the listed one), 'unexpected pass'
    (listed as failing, did not fail) or 'flaky' (differed between attempts)."""

    kind: str
    prop: str
    case: str
    expected: tuple[str, ...]
    got: str

    def line(self, source: str = "the expectations file") -> str:
        what = f"{self.prop} case {self.case}" if self.case else self.prop
        wanted = " or ".join(self.expected) if self.expected else "no failure"
        fix = f"; record it in {source}" if self.kind == "unexpected pass" else ""
        return f"{self.kind}: {what} (expected {wanted}, got {self.got}){fix}"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "property": self.prop,
            "case": self.case,
            "expected": list(self.expected),
            "got": self.got,
        }


@dataclass
class Expectations:
    source: str = ""
    entries: list[Expected] = field(default_factory=list)

    def of(self, prop: str) -> list[Expected]:
        return [e for e in self.entries if e.prop == prop]

    def judge(self, checks: Iterable[Check]) -> list[Surprise]:
        """Every result of `checks` the file does not expect (a listed
        property absent from the run, left out by --level or --quick, is not judged)."""
        found: list[Surprise] = []
        for check in checks:
            found += self._judge_one(check)
        return found

    def _judge_one(self, check: Check) -> list[Surprise]:
        entries = self.of(check.name)
        whole = [e for e in entries if not e.case]
        cases = {e.case: e for e in entries if e.case}
        wanted = tuple(dict.fromkeys(s for e in entries for s in e.statuses))
        got = check.status
        if not entries:
            bad = got in BAD
            return [Surprise(kind_of(got), check.name, "", (), label_of(check))] if bad else []
        if as_expected(check, wanted):
            if not cases:
                return []
        elif whole or got in BAD:
            return [Surprise(kind_of(got), check.name, "", wanted, label_of(check))]
        failing = {f.get("case", "") for f in check.failures} if got in BAD else set()
        found = [
            Surprise("new failure", check.name, case, (), got)
            for case in sorted(failing - set(cases))
        ]
        passed = got if got not in BAD else f"{got} on other cases, not on this one"
        if got not in UNJUDGED:
            found += [
                Surprise("unexpected pass", check.name, case, e.statuses, passed)
                for case, e in cases.items()
                if case not in failing
            ]
        return found

    def summary(self, checks: Sequence[Check]) -> dict[str, Any]:
        """What the report records: the file, the expected status of every
        listed property and case, and the surprises."""
        return {
            "file": self.source,
            "expected": [
                {"property": e.prop, "case": e.case, "status": list(e.statuses), "reason": e.reason}
                for e in self.entries
            ],
            "surprises": [s.to_json() for s in self.judge(checks)],
        }


def as_expected(check: Check, wanted: Sequence[str]) -> bool:
    if check.status in wanted:
        return True
    if check.status == FLAKY:  # a known flake may be listed by the statuses it takes
        return bool(check.attempts) and set(check.attempts) <= set(wanted)
    return False


def kind_of(got: str) -> str:
    return "flaky" if got == FLAKY else "new failure" if got in BAD else "unexpected pass"


def label_of(check: Check) -> str:
    if check.status == FLAKY and check.attempts:
        return f"FLAKY: {', '.join(check.attempts)}"
    return check.status


# -- reading --------------------------------------------------------------------------------


def load(path: Path) -> Expectations:
    """The file read and checked; ExpectationsError names the file, the line
    and what is wrong (it does not parse, a property the suite lacks, an
    unknown status, a key or case of no meaning)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ExpectationsError(f"{path}: cannot read it: {why}") from None
    return parse(text, str(path))


def parse(text: str, source: str) -> Expectations:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        where = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        message = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", str(exc))
        line = where.group(1) if where else str(text.count("\n") + 1)
        raise ExpectationsError(f"{source}:{line}: not TOML: {message}") from None
    lines = text.splitlines()

    def fail(needle: str, what: str, block: int = -1) -> ExpectationsError:
        """The error to raise, at the line where `needle` is (in entry `block`)."""
        return ExpectationsError(f"{source}:{line_of(lines, needle, block)}: {what}")

    for key in data:
        if key not in ("version", "expected"):
            raise fail(key, f"unknown key {key!r} (known: version, expected)")
    if data.get("version", VERSION) != VERSION:
        raise fail("version", f"version {data['version']!r}: this shmref reads version {VERSION}")
    raw = data.get("expected", [])
    if not isinstance(raw, list):
        raise fail("expected", "'expected' is a list of tables ([[expected]])")
    entries: list[Expected] = []
    seen: set[tuple[str, str]] = set()
    for number, item in enumerate(raw):
        entry = checked_entry(item, number, fail)
        if (entry.prop, entry.case) in seen:
            raise fail(entry.case or entry.prop, f"{entry.label!r} is listed twice", number)
        seen.add((entry.prop, entry.case))
        entries.append(entry)
    return Expectations(source, entries)


def checked_entry(
    item: object, number: int, fail: Callable[[str, str, int], ExpectationsError]
) -> Expected:
    if not isinstance(item, dict):
        raise fail("expected", "each entry of 'expected' is a table", number)
    for key in item:
        if key not in KEYS:
            raise fail(key, f"unknown key {key!r} (known: {', '.join(sorted(KEYS))})", number)
    prop, case, reason = item.get("property"), item.get("case", ""), item.get("reason", "")
    if not isinstance(prop, str) or not prop:
        raise fail("[[expected]]", "an entry without 'property' (a name of the report's)", number)
    if not isinstance(case, str) or not isinstance(reason, str):
        raise fail(prop, "'case' and 'reason' are strings", number)
    problem = unknown_property(prop)
    if problem:
        raise fail(prop, problem, number)
    if case and (problem := unknown_case(prop, case)):
        raise fail(case, problem, number)
    status = item.get("status")
    statuses = [status] if isinstance(status, str) else status
    if not isinstance(statuses, list) or not statuses:
        raise fail("status", f"{prop!r} has no 'status' (one of {', '.join(STATUSES)})", number)
    for one in statuses:
        if one not in STATUSES:
            raise fail("status", f"unknown status {one!r} (known: {', '.join(STATUSES)})", number)
    return Expected(prop, case, tuple(statuses), reason)


def line_of(lines: Sequence[str], needle: str, block: int = -1) -> int:
    """The line (from 1) where `needle` first appears, in the `block`-th
    [[expected]] table if given (else anywhere); 1 if nowhere."""
    starts = [k for k, line in enumerate(lines) if re.match(r"\s*\[\[\s*expected\s*\]\]", line)]
    first = starts[block] if 0 <= block < len(starts) else 0
    for at in (first, 0):
        for k in range(at, len(lines)):
            if needle in lines[k]:
                return k + 1
    return first + 1


def unknown_property(name: str) -> str:
    """Why `name` is no property of the suite ("" if it is one)."""
    if name == RECORDING_UNIT[1] or name in {f"hazard {h.model}" for h in HAZARDS}:
        return ""
    if any(g.label == name and not g.split for g in TEST_GROUPS):
        return ""
    group = group_of(name, TEST_GROUPS)
    if group is not None and group.split and name in suite_tests():
        return ""
    return (
        f"unknown property {name!r} (a name of the report's property column: "
        f"'{RECORDING_UNIT[1]}', 'hazard MODEL' or a suite test such as "
        f"'{TEST_GROUPS[0].select}::test_NAME')"
    )


def unknown_case(prop: str, case: str) -> str:
    """Why `case` is no case of `prop` ("" if it is one): a hazard's cases
    are its shipped counterexamples, a test's its parametrized ids."""
    if prop.startswith("hazard "):
        model = prop.removeprefix("hazard ")
        traces = shipped.manifest().get("counterexamples", {}).get(model, {}).get("traces", [])
        names = [f"{model} {t['name']}" for t in traces]
        if case in names:
            return ""
        return f"unknown case {case!r} of {prop!r} (known: {', '.join(names)})"
    if case.startswith(prop + "["):
        return ""
    return f"unknown case {case!r} of {prop!r} (a case is '{prop}[ID]')"


@cache
def suite_tests() -> frozenset[str]:
    """Every test of the suite, as `file.py::test_x` and `file.py::Class::test_x`."""
    names: set[str] = set()
    for path in SUITE_DIR.glob("test_*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(f"{path.name}::{node.name}")
            elif isinstance(node, ast.ClassDef):
                names.update(
                    f"{path.name}::{node.name}::{sub.name}"
                    for sub in node.body
                    if isinstance(sub, ast.FunctionDef)
                )
    return frozenset(names)


# -- writing --------------------------------------------------------------------------------


def write(path: Path, checks: Iterable[Check], known: Expectations | None = None) -> int:
    """The file that expects exactly the results of `checks` (a hazard per
    failing counterexample); the reasons of `known` kept, the others left to
    fill in. Returns how many entries it has."""
    reasons = {(e.prop, e.case): e.reason for e in (known.entries if known else [])}
    doc = tomlkit.document()
    doc.add(tomlkit.comment("shmref expectations: the results this store is known to get"))
    doc.add(tomlkit.comment("(python -m shmref.conformance --expect FILE; docs/conformance.md)."))
    doc.add(tomlkit.comment("A property not listed is expected to pass. Fill in every reason:"))
    doc.add(tomlkit.comment("the finding, the seed's behaviour kept, or a link."))
    doc.add("version", VERSION)
    table = tomlkit.aot()
    for check in checks:
        if check.status not in BAD:
            continue
        status: str | list[str] = check.status
        cases = [""]
        if check.name.startswith("hazard ") and check.status != FLAKY:
            cases = list(dict.fromkeys(f.get("case", "") for f in check.failures)) or [""]
        for case in cases:
            item = tomlkit.table()
            item.add("property", check.name)
            if case:
                item.add("case", case)
            item.add("status", status)
            reason = reasons.get((check.name, case), "")
            if not reason and check.status == FLAKY:
                reason = f"attempts: {', '.join(check.attempts)}"
            item.add("reason", reason)
            table.append(item)
    doc.add("expected", table)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
    return len(table)


def report_lines(surprises: Sequence[Surprise], source: str) -> list[str]:
    """What a CI log shows: each surprise on a line, or that there is none."""
    if not surprises:
        return [f"expectations: every result as {source} expects"]
    return [
        f"expectations: {len(surprises)} result(s) {source} does not expect:",
        *(f"  {s.line(source)}" for s in surprises),
    ]
