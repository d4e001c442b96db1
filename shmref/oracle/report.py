"""The conformance report: every property's check in its level, written as
conformance.json and conformance.md (failures with their trace and a replay command)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from shmref.core import tables
from shmref.core.files import write_atomically
from shmref.core.levels import ASSUMPTION, BAD, LEVEL_MEANING, LEVELS, NOT_RUN, PASS, SHOWN_FAILURES
from shmref.core.paths import SUITE_DIR
from shmref.oracle.verdict import Check, level_status, shell_impl
from shmref.render.html import PAGE, write_report
from shmref.traces.shipped import TRACES_DIR

# conformance.json's JSON Schema, shipped in the wheel (shmref/oracle/report.schema.json)
SCHEMA_ID = "https://shmref.invalid/conformance/1/report.schema.json"
SCHEMA_PATH = Path(__file__).with_name("report.schema.json")
SHOWN_LINES = 80  # longer traces: head and tail in the report, all of it in a file


FILES = ("conformance.json", "conformance.md", PAGE)  # a report's files (Report.write)


def forget(out: Path) -> None:
    """An earlier run's report in `out` removed: it must not pass for this run's
    (one that cannot be removed is said when this run's report is written)."""
    for stale in FILES:
        try:
            (out / stale).unlink(missing_ok=True)
        except OSError:
            pass


@dataclass
class Report:
    impl: str
    quick: bool
    checks: list[Check]
    seconds: float
    not_run: list[str]
    levels: tuple[str, ...] = LEVELS
    seed_levels: dict[str, str] = field(default_factory=dict)  # the seed's level results
    # with --expect: the file, what it expects and the results it does not (oracle.expectations)
    expectations: dict[str, Any] | None = None
    # which /dev/shm the run's segments were on (shmref.oracle.privateshm.Segments)
    segments: dict[str, str] | None = None
    # a store program's: what the first pass said to it (shmref.process.lines.Traffic)
    traffic: dict[str, int] | None = None

    def level_status(self, level: str) -> str:
        return level_status(self.checks, level, self.levels)

    @property
    def gate(self) -> bool:
        """What the exit status says: with --expect every result as expected, else `ok`."""
        if self.expectations is not None:
            return not self.expectations["surprises"]
        return self.ok

    @property
    def ok(self) -> bool:
        return all(self.level_status(level) == PASS for level in self.levels)

    def write(self, out: Path, page: bool = True) -> None:
        """conformance.json and conformance.md in `out`, each written whole, then
        (`page`) conformance.html from them: the one writer of a report's files."""
        write_atomically(out / "conformance.json", json.dumps(self.to_json(), indent=1) + "\n")
        write_atomically(out / "conformance.md", self.markdown(out))
        if page:
            write_report(out)  # the failures drawn (shmref.render)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_ID,
            "suite": suite_version(),
            "impl": self.impl,
            "quick": self.quick,
            "seconds": round(self.seconds, 1),
            "ok": self.ok,
            "not_run": self.not_run,
            "levels": {
                level: {
                    "status": self.level_status(level),
                    "seed": self.seed_levels.get(level, ""),
                    "meaning": LEVEL_MEANING[level],
                    "checks": [asdict(c) for c in self.checks if c.level == level],
                }
                for level in LEVELS
            },
            **({"expectations": self.expectations} if self.expectations is not None else {}),
            **({"segments": self.segments} if self.segments is not None else {}),
            **({"traffic": self.traffic} if self.traffic is not None else {}),
        }

    def markdown(self, out: Path | None = None) -> str:
        """conformance.md: the run, each level's result, each level's
        properties, then the failures (a long trace in full under `out`)."""
        lines = [
            f"# Conformance of `{self.impl}`",
            "",
            f"{'Quick' if self.quick else 'Full'} run of `python -m shmref.conformance "
            f"--impl {shell_impl(self.impl)}{' --quick' if self.quick else ''}`, "
            f"{self.seconds:.0f} s. Reference: the seed's own code (column `seed`: its "
            "result on the same property), refimpl and spec/ShmObjectStorage.tla.",
            "",
        ]
        if self.segments is not None:
            lines += [f"Segments: {self.segments['way']}, {self.segments['detail']}.", ""]
        if self.traffic is not None:
            t = self.traffic
            lines += [
                f"The program was sent {t['requests']:,} requests in {t['round_trips']:,} "
                'round trips (the first pass\'s; docs/protocol.md, "Fewer round trips").',
                "",
            ]
        lines.append(self._levels_table())
        for level in self.levels:
            lines += ["", f"## {level}: {self.level_status(level)}", ""]
            rows = [
                (
                    c.status,
                    c.seed,
                    f"`{c.name}`",
                    c.cases,
                    "; ".join(t for t in (c.what, c.detail) if t),
                )
                for c in self.checks
                if c.level == level
            ]
            lines.append(
                tables.markdown(("result", "seed", "property", "cases", "what / detail"), rows)
            )
        lines += self._failures_markdown(out)
        if self.not_run:
            lines += ["", "Not run by the conformance run: " + "; ".join(self.not_run) + "."]
        return "\n".join(lines) + "\n"

    def _levels_table(self) -> str:
        """Each level's result (with its assumptions and properties not run),
        the seed's, and how many of its properties fail."""
        summary = []
        for level in self.levels:
            failing = sum(1 for c in self.checks if c.level == level and c.status in BAD)
            assumed = sum(1 for c in self.checks if c.level == level and c.status == ASSUMPTION)
            not_run = sum(1 for c in self.checks if c.level == level and c.status == NOT_RUN)
            notes = [f"{assumed} assumption{'s' if assumed > 1 else ''}"] * bool(assumed)
            notes += [f"{not_run} not run"] * bool(not_run)
            result = self.level_status(level) + (f" ({', '.join(notes)})" if notes else "")
            summary.append(
                (
                    level,
                    f"**{result}**",
                    self.seed_levels.get(level, ""),
                    failing,
                    LEVEL_MEANING[level],
                )
            )
        return tables.markdown(
            ("level", "result", "seed", "failing properties", "meaning"), summary
        )

    def _failures_markdown(self, out: Path | None) -> list[str]:
        """The failing properties' first SHOWN_FAILURES cases, numbered across
        the report (a trace over SHOWN_LINES: out/failures/<number>.txt)."""
        failures = [c for c in self.checks if c.failures]
        if not failures:
            return []
        lines = [
            "",
            "## Failures, each with its shortest trace and one replay command",
            "",
            "Each command works pasted into a fresh shell.",
        ]
        number = 0
        for c in failures:
            lines += ["", f"### {c.level}: `{c.name}` ({c.status}; the seed: {c.seed or '?'})", ""]
            for f in c.failures[:SHOWN_FAILURES]:
                number += 1
                full = None if out is None else out / "failures" / f"{number}.txt"
                lines += _failure_markdown(f, full)
            if len(c.failures) > SHOWN_FAILURES:
                lines.append(
                    f"... and {len(c.failures) - SHOWN_FAILURES} more failing case(s): "
                    + ", ".join(f"`{f['case']}`" for f in c.failures[SHOWN_FAILURES:])
                )
        return lines


def _failure_markdown(failure: Mapping[str, str], full: Path | None) -> list[str]:
    """One failing case: its trace (cut, when long, with the whole of it
    written to `full`), its note and its replay command."""
    f = failure
    trace = f["trace"].strip().splitlines()
    if len(trace) > SHOWN_LINES and full is not None:
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text("\n".join(trace) + "\n")
        trace = [
            *trace[:15],
            f"... {len(trace) - 75} lines (all of them in {full}) ...",
            *trace[-60:],
        ]
    return [
        f"`{f['case']}`" + (f" (attempt {f['attempt']})" if f.get("attempt") else ""),
        "",
        "```",
        *trace,
        "```",
        "",
        *([f"Note: {f['note']}.", ""] if f.get("note") else []),
        "Replay:",
        "",
        "```sh",
        f["command"],
        "```",
        "",
    ]


@cache
def suite_version() -> str:
    """What a property's result depends on besides the store: shmref's
    version and a digest of the suite's tests and the shipped counterexamples.
    Two reports of the same suite version judged the same properties."""
    digest = hashlib.sha256()
    for path in sorted([*SUITE_DIR.glob("*.py"), TRACES_DIR / "manifest.json"]):
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    try:
        version = metadata.version("shmref")
    except metadata.PackageNotFoundError:
        version = "0"
    return f"{version}+{digest.hexdigest()[:12]}"
