"""`--repeat N`: a property whose result is not pass is run again (with
`--repeat-all`, every property), up to N runs in all, to tell a flake from a
real failure: one whose runs differ is FLAKY, with each attempt's status
(Check.attempts) and each failing attempt's trace; one that gives the same
status every time keeps it, its detail saying on how many runs.

The runs again are the oracle's own `--only` runs (as the seed baseline
re-runs an accident), each in DIR/repeat/K; a property found FLAKY is not
run again."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from shmref.core.levels import FLAKY, NOT_RUN, PASS, SKIP
from shmref.oracle.report import Report
from shmref.oracle.verdict import RUN_CHECKS, Check

# runs `names` again as attempt K (from 2); returns that run's report
Rerun = Callable[[list[str], int], Report]


def to_repeat(checks: Sequence[Check], every: bool) -> list[Check]:
    """The checks to run again: not pass (a property not judged, skip or
    not run, is left: that is the store's capability, not chance), or all."""
    return [
        c
        for c in checks
        if c.name not in RUN_CHECKS and (every or c.status not in (PASS, SKIP, NOT_RUN))
    ]


def repeat(report: Report, runs: int, every: bool, rerun: Rerun) -> Report:
    """`report` with every check to repeat run up to `runs` times in all;
    a check whose statuses differ becomes FLAKY. The checks are changed in place."""
    history: dict[tuple[str, str], list[Check]] = {
        (c.level, c.name): [c] for c in to_repeat(report.checks, every)
    }
    pending = list(history)
    for attempt in range(2, runs + 1):
        if not pending:
            break
        again = rerun(sorted({name for _level, name in pending}), attempt)
        report.seconds += again.seconds  # the report's time is the runs' together
        got = {(c.level, c.name): c for c in again.checks}
        for key in pending:
            if key in got:
                history[key].append(got[key])
        for problem in (c for c in again.checks if c.name in RUN_CHECKS):
            report.not_run.append(
                f"attempt {attempt}: {problem.name} {problem.status}: "
                f"{problem.detail.splitlines()[0] if problem.detail else ''}"
            )
        pending = [k for k in pending if len({c.status for c in history[k]}) == 1]
    for check in report.checks:
        seen = history.get((check.level, check.name), [])
        if len(seen) > 1:
            merge(check, seen)
    return report


def merge(check: Check, attempts: list[Check]) -> None:
    """`check` (the first attempt) told what every attempt gave."""
    statuses = [c.status for c in attempts]
    check.attempts = statuses
    if len(set(statuses)) == 1:
        note = f"{statuses[0]} on all {len(statuses)} runs"
        check.detail = "; ".join(t for t in (note, check.detail) if t)
        return
    first_detail = check.detail
    check.status = FLAKY
    check.detail = f"attempts: {', '.join(statuses)}" + (
        f"; first: {first_detail}" if first_detail else ""
    )
    check.failures = [
        {**failure, "attempt": str(number)}
        for number, attempt in enumerate(attempts, 1)
        for failure in attempt.failures
    ]
