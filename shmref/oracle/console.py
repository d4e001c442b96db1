"""What `python -m shmref.conformance` prints when a run is over: the
levels' table and where the report is, or a hazard's replay (`--hazard`);
and the exit status that goes with it."""

from __future__ import annotations

from pathlib import Path

from shmref.core import tables
from shmref.core.levels import ASSUMPTION, BAD, NOT_RUN, PASS
from shmref.oracle.hazards import Hazard
from shmref.oracle.report import Report
from shmref.render.html import PAGE


def hazard_said(report: Report, hazard: Hazard, source: str, out: Path) -> int:
    """`--hazard`: the replay's table and status (the report has them too)."""
    print(f"{hazard.model}: {hazard.what}\ncounterexample: {source}")
    check = next((c for c in report.checks if c.name == f"hazard {hazard.model}"), None)
    if check is None:  # the run's own problem (a process that died outside the replay)
        check = next((c for c in report.checks if c.status in BAD), None)
    if check is None:
        print(f"{hazard.model}: not replayed (see {out / 'conformance.md'})")
        return 1
    if check.failures:
        print(check.failures[0]["trace"])
    print(f"{check.status.upper()}: {check.detail}")
    print(f"report: {out / 'conformance.md'}")
    return 0 if check.status in (PASS, ASSUMPTION) else 1


def print_summary(report: Report, out: Path) -> int:
    """The levels' table, where the report is, and the exit status."""
    rows = []
    for level in report.levels:
        not_run = sum(1 for c in report.checks if c.level == level and c.status == NOT_RUN)
        status = report.level_status(level) + (f" ({not_run} not run)" if not_run else "")
        rows.append((level, status, report.seed_levels.get(level, "")))
    print(tables.text(("level", "result", "seed"), rows))
    print(f"report: {out / 'conformance.md'} ({report.seconds:.0f} s)")
    if (out / PAGE).is_file():
        print(f"page: {out / PAGE} (the failures drawn; opens offline)")
    return 0 if report.ok else 1
