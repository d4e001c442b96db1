"""`--compare OLD.json NEW.json`: what changed between two conformance
reports, as text for a CI log: regressions (a property that did not fail
and now does), fixes (the other way), other status changes, properties
new and removed, and changes against the seed (a property that now differs
from the seed's result, or now agrees with it). Two reports of different
suite versions (Report.suite_version) may judge different properties: a
property in one only is then listed as not compared, never a failure.
Exit status: 1 if there is a regression, else 0; 2 for a file that is no
conformance report."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shmref.core.levels import BAD, LEVELS, SEED_SILENT
from shmref.oracle.report import SCHEMA_PATH


class ReportError(ValueError):
    """One line: which file, and why it is no conformance report."""


def load_report(path: Path) -> dict[str, Any]:
    """A conformance.json read and checked against its published schema
    (with jsonschema, if installed; else only that it has levels)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReportError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path}: not JSON: {exc}") from None
    problem = schema_problem(data)
    if problem:
        raise ReportError(f"{path}: not a conformance report ({problem})")
    loaded: dict[str, Any] = data
    return loaded


def schema_problem(data: object) -> str:
    """Why `data` does not follow report.schema.json ("" if it does)."""
    try:
        import jsonschema  # type: ignore[import-untyped]
    except ImportError:  # a user's install without it: the shape the comparison reads
        levels = data.get("levels") if isinstance(data, dict) else None
        return "" if isinstance(levels, dict) else "no 'levels' object"
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(data)
    )
    if error is None:
        return ""
    where = "/".join(str(p) for p in error.absolute_path) or "the top"
    return f"at {where}: {error.message}"


def results(report: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each property's check by name (the level in it), in level order."""
    found: dict[str, dict[str, Any]] = {}
    for level in LEVELS:
        for check in report["levels"].get(level, {}).get("checks", []):
            found[check["name"]] = {**check, "level": level}
    return found


@dataclass
class Comparison:
    old: str
    new: str
    same_suite: bool
    regressions: list[tuple[str, str, str]] = field(default_factory=list)  # name, old, new
    fixes: list[tuple[str, str, str]] = field(default_factory=list)
    changed: list[tuple[str, str, str]] = field(default_factory=list)
    new_properties: list[tuple[str, str]] = field(default_factory=list)  # name, status
    removed: list[tuple[str, str]] = field(default_factory=list)
    not_compared: list[str] = field(default_factory=list)
    from_seed: list[tuple[str, str, str, str]] = field(default_factory=list)  # name, seed, old, new
    to_seed: list[tuple[str, str, str, str]] = field(default_factory=list)

    def text(self) -> str:
        lines = [f"compare {self.old} -> {self.new}"]
        if not self.same_suite:
            lines.append("the two reports are of different suite versions")

        def section(title: str, rows: list[str]) -> None:
            lines.append(f"{title}: {len(rows)}")
            lines.extend(f"  {row}" for row in rows)

        section("regressions", [f"{n}: {o} -> {w}" for n, o, w in self.regressions])
        section("fixes", [f"{n}: {o} -> {w}" for n, o, w in self.fixes])
        section("other status changes", [f"{n}: {o} -> {w}" for n, o, w in self.changed])
        section("new properties", [f"{n}: {s}" for n, s in self.new_properties])
        section("removed properties", [f"{n}: was {s}" for n, s in self.removed])
        if self.not_compared:
            section(
                "not compared (in one report only; different suite versions)", self.not_compared
            )
        section(
            "now differ from the seed",
            [f"{n}: seed {s}, was {o}, now {w}" for n, s, o, w in self.from_seed],
        )
        section(
            "now agree with the seed",
            [f"{n}: seed {s}, was {o}, now {w}" for n, s, o, w in self.to_seed],
        )
        return "\n".join(lines)


def compare(old: Mapping[str, Any], new: Mapping[str, Any], names: tuple[str, str]) -> Comparison:
    same = old.get("suite") == new.get("suite") and bool(new.get("suite"))
    found = Comparison(*names, same_suite=same)
    before, after = results(old), results(new)
    for name, check in after.items():
        if name not in before:
            if same:
                found.new_properties.append((name, check["status"]))
            else:
                found.not_compared.append(f"{name} (only in {names[1]})")
            continue
        was, now = before[name]["status"], check["status"]
        if was != now:
            if now in BAD and was not in BAD:
                found.regressions.append((name, was, now))
            elif was in BAD and now not in BAD:
                found.fixes.append((name, was, now))
            else:
                found.changed.append((name, was, now))
        seed = check.get("seed", "")
        if seed not in SEED_SILENT:
            if was == seed and now != seed:
                found.from_seed.append((name, seed, was, now))
            elif was != seed and now == seed:
                found.to_seed.append((name, seed, was, now))
    for name, check in before.items():
        if name not in after:
            if same:
                found.removed.append((name, check["status"]))
            else:
                found.not_compared.append(f"{name} (only in {names[0]})")
    return found


def main(old_path: Path, new_path: Path) -> int:
    """The comparison printed; 1 if there is a regression, 2 for a bad file."""
    try:
        old, new = load_report(old_path), load_report(new_path)
    except ReportError as exc:
        print(f"shmref: {exc}", file=sys.stderr)
        return 2
    found = compare(old, new, (str(old_path), str(new_path)))
    print(found.text())
    return 1 if found.regressions else 0
