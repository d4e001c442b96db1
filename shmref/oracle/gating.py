"""The options a store's CI gates with (docs/conformance.md): `--expect FILE`,
`--write-expectations FILE`, `--repeat N` (`--repeat-all`) and `--compare
OLD NEW`; kept apart from cli.py, which calls the functions below at three
points (options, before the run, after it)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from shmref.oracle import compare, expectations
from shmref.oracle.expectations import Expectations, ExpectationsError
from shmref.oracle.repeat import repeat
from shmref.oracle.report import Report


def runs(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 20:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of runs from 1 to 20")
    return int(text)


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--expect",
        type=Path,
        metavar="FILE",
        help="exit 0 iff every result is what FILE (TOML) expects: a property not listed is "
        "expected to pass; every unexpected result (a new failure, an unexpected pass) is named",
    )
    parser.add_argument(
        "--write-expectations",
        type=Path,
        metavar="FILE",
        help="write FILE expecting this run's results (reasons of --expect's file kept, "
        "the others left to fill in)",
    )
    parser.add_argument(
        "--repeat",
        type=runs,
        default=1,
        metavar="N",
        help="run a property that did not pass up to N times in all; one whose runs differ "
        "is FLAKY, with each attempt's status (default 1: each property once)",
    )
    parser.add_argument(
        "--repeat-all",
        action="store_true",
        help="with --repeat: run every property again, passing ones too",
    )
    parser.add_argument(
        "--compare",
        nargs=2,
        type=Path,
        metavar=("OLD.json", "NEW.json"),
        help="what changed between two conformance.json: regressions, fixes, new and "
        "removed properties, changes against the seed (exit 1 if a regression)",
    )


def compared(args: argparse.Namespace) -> int | None:
    """`--compare`'s exit status, None without it."""
    if not args.compare:
        return None
    return compare.main(*args.compare)


def expected(args: argparse.Namespace) -> Expectations | int | None:
    """--expect's file read (None without it), or 2 after its one-line error."""
    if args.repeat_all and args.repeat < 2:
        print(
            "python -m shmref.conformance: --repeat-all goes with --repeat N (N > 1)",
            file=sys.stderr,
        )
        return 2
    if args.expect is None:
        return None
    try:
        return expectations.load(args.expect)
    except ExpectationsError as exc:
        print(f"shmref: {exc}", file=sys.stderr)
        return 2


def run_with_repeats(
    judge: Callable[..., Report],
    out: Path,
    args: argparse.Namespace,
    expect: Expectations | None,
) -> Report:
    """The run (`judge(out)`, cli.py's run with the options bound), then the
    repeats (`judge` again with --only, in out/repeat/K), the expectations
    judged and written, and the report's files written again if any of that
    changed it."""

    def rerun(names: list[str], attempt: int) -> Report:
        folder = out / "repeat" / str(attempt)
        return judge(folder, baseline=False, progress=False, only=names)

    report = judge(out)
    if args.repeat > 1:
        repeat(report, args.repeat, args.repeat_all, rerun)
        flaky = [c for c in report.checks if c.attempts and len(set(c.attempts)) > 1]
        for check in flaky:
            print(f"FLAKY: {check.name}: {', '.join(check.attempts)}")
    if expect is not None:
        report.expectations = expect.summary(report.checks)
    if args.repeat > 1 or expect is not None:
        report.write(out)
    if args.write_expectations is not None:
        count = expectations.write(args.write_expectations, report.checks, expect)
        print(f"expectations: {count} entries written to {args.write_expectations}")
    return report


def said(report: Report, args: argparse.Namespace) -> str:
    """The last lines of the run's output: what the expectations file did not expect."""
    if report.expectations is None:
        return ""
    surprises = [
        expectations.Surprise(s["kind"], s["property"], s["case"], tuple(s["expected"]), s["got"])
        for s in report.expectations["surprises"]
    ]
    return "\n".join(expectations.report_lines(surprises, str(args.expect)))
