"""`make conformance IMPL=mod`: the oracle's report for an implementation.

    python -m shmref.conformance --impl MODULE [--out DIR] [--quick]
    python -m shmref.conformance --impl MODULE --hazard MCDoubleRead
    python -m shmref.conformance --validate-trace recording.json

The implementation is judged by the written contract (shmref.contract) and
nothing else: a module lacking a required name is refused (exit 2, one line
naming the module and the missing names). Against MODULE ('seed' builds the
seed's own code) it runs the behavioural tests, the side-by-side tests with
the seed and refimpl (test_layout.py), the TLC trace replays and the
Hypothesis state machines (shmref.suite, run by pytest in this process);
the hazard counterexamples of the spec's hazard models replayed
on MODULE; and trace validation (a recorded run checked by TLC). It writes
DIR/conformance.md and DIR/conformance.json (DIR: --out), every
property in one of three levels:

- seed-compatible: what the seed's code does (values, exception types, ids,
  addresses, segment bytes); the seed passes all of it by construction, and
  where the seed's behaviour is a FINDINGS.md defect, refimpl's fix passes too.
- hardened (optional): refimpl's fixes, each property naming the findings
  it closes.
- protocol-safe: the spec's replays and state machines pass, a recorded run
  is a behaviour of the spec, and no hazard counterexample makes it return a
  wrong value or count a read on another chunk. Hazards that no
  seed-compatible implementation can close are reported as "assumption".

Every property carries the seed's own result beside the implementation's
(the seed baseline: one run, cached under DIR/seed-baseline). A property
that needs an optional capability the module lacks is `not run: missing X`.
Every failure comes with its shortest trace and one command that replays it
when pasted into a fresh shell. Exit status: 0 if seed-compatible and
protocol-safe pass (and hardened, unless it is left out with --level), 1
otherwise, 2 for a module that does not import or lacks required names, or
a program (exec:PROGRAM) that cannot start or sends no hello. Before any
test, the contract check (a ring, a storage, its handle, the ring closed)
runs in a process of its own: a program that breaks the protocol, crashes
or hangs there gets that property's ERROR, CRASH or TIMEOUT in the report.
"""

from __future__ import annotations

import argparse
import functools
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from shmref.core.levels import BAD, FAIL, LEVELS, PROTOCOL
from shmref.core.paths import checkout
from shmref.core.runconfig import RunConfig
from shmref.oracle import gating, limits, privateshm
from shmref.oracle.conformance_run import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_MAX_TIMEOUTS,
    DEFAULT_SHRINK_BUDGET,
    DEFAULT_TIMEOUT,
    QUICK_SHRINK_BUDGET,
    gate_report,
    property_level,
    property_problem,
    run,
)
from shmref.oracle.console import hazard_said, print_summary
from shmref.oracle.contractcheck import Checked, run_check
from shmref.oracle.expectations import Expectations
from shmref.oracle.hazardcheck import supplied_counterexample
from shmref.oracle.hazards import HAZARDS
from shmref.oracle.job import ImplRef
from shmref.oracle.report import Report, forget
from shmref.session.shrinkbudget import parse_budget
from shmref.traces.recording import Recording
from shmref.traces.shipped import Counterexample, ShippedError
from shmref.traces.tracecheck import validate_either

# The report's folder without --out, stated once: OUT_HELP says it, default_out makes it.
OUT_INSTALLED = "shmref-conformance"  # below the current folder
OUT_IN_CHECKOUT = "build/conformance"  # below a shmref checkout's root
OUT_HELP = (
    f"report folder (default ./{OUT_INSTALLED}/<module>; "
    f"{OUT_IN_CHECKOUT}/<module> in a shmref checkout)"
)


def default_out(module: str) -> Path:
    """The report's folder for `module` when --out is not given (see OUT_HELP)."""
    root = checkout()
    return (root / OUT_IN_CHECKOUT if root else Path.cwd() / OUT_INSTALLED) / module


class OneLineParser(argparse.ArgumentParser):
    """Bad options are one line (and exit 2), never a usage dump."""

    def error(self, message: str) -> NoReturn:
        """Print the message on one line and exit 2."""
        print(f"{self.prog}: {message}", file=sys.stderr)
        sys.exit(2)


HAZARD_MODELS = {h.model: h for h in HAZARDS}
seconds = limits.positive_seconds  # argparse type: a number of seconds above 0


def unwritable(out: Path) -> str:
    """Why the report folder `out` cannot be written ("" if it can)."""
    probe = out / ".shmref-write-probe"
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        return exc.strerror or str(exc)
    return ""


def budget(text: str) -> int:
    """argparse type: a shrink budget, a number of examples (0 or more)."""
    try:
        found = parse_budget(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if found is None:  # 'all' is the plugin's alone: a run's budget is split, so finite
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of examples (0 or more)")
    return found


def count(text: str) -> int:
    """argparse type: a number of processes from 1 to 256."""
    if not text.isdigit() or not 1 <= int(text) <= 256:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of processes from 1 to 256")
    return int(text)


def limit(text: str) -> int:
    """--max-timeouts: a count, 0 meaning no limit."""
    if not text.isdigit() or int(text) > 10_000:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number from 0 to 10000")
    return int(text)


def stop_as_on_ctrl_c() -> None:
    """SIGTERM and SIGHUP end a run as Ctrl-C does: the run's own processes
    (workers in sessions of their own, the seed's run) are stopped, not orphaned."""

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        for number in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, interrupt)


def build_parser() -> OneLineParser:
    """The command line: what is judged, how long it may take, and the
    options of gating (expectations, repeats) and of the process protocol."""
    parser = OneLineParser(
        prog="python -m shmref.conformance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_selection_options(parser)
    add_limit_options(parser)
    gating.add_options(parser)
    limits.add_options(parser)
    return parser


def add_selection_options(parser: argparse.ArgumentParser) -> None:
    """What is judged: the implementation, the report folder, the levels and properties."""
    parser.add_argument(
        "--impl",
        help="module under test ('seed': the seed's own code; "
        "'port': a port of it with other private names)",
    )
    parser.add_argument(
        "--writer",
        metavar="IMPL",
        help="mixed run: the writer of IMPL (a module, seed, refimpl or exec:PROGRAM) ...",
    )
    parser.add_argument(
        "--readers",
        metavar="IMPL",
        help="... with the readers of IMPL, on one segment (judged with seed-layout claimed)",
    )
    parser.add_argument("--out", type=Path, help=OUT_HELP)
    parser.add_argument("--quick", action="store_true", help="fewer tests (well under 2 min)")
    parser.add_argument(
        "--all-groups",
        action="store_true",
        help="with --quick: still run every pytest group (every property)",
    )
    parser.add_argument(
        "--level",
        action="append",
        choices=LEVELS,
        help="run only the checks of this level (repeatable; default: all)",
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="PROPERTY",
        help="run only this property, named as in the report (repeatable; without --level its "
        "level is the one judged; the seed baseline "
        "re-runs a property that came out ERROR, CRASH or TIMEOUT this way)",
    )
    parser.add_argument(
        "--hazard",
        metavar="MODEL",
        help="only replay this hazard model's shipped counterexamples on --impl",
    )
    parser.add_argument(
        "--counterexample",
        type=Path,
        metavar="FILE",
        help="with --hazard: replay this TLC output (-tool) of the model instead",
    )
    parser.add_argument(
        "--validate-trace",
        type=Path,
        metavar="FILE",
        help="check a recording (JSON, shmref.traces.recording) with TLC",
    )


def add_limit_options(parser: argparse.ArgumentParser) -> None:
    """How a run goes: its time limits, shrinking, workers, what it says, its /dev/shm."""
    parser.add_argument(
        "--timeout",
        type=seconds,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"a property still running after this long is TIMEOUT (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--call-timeout",
        type=seconds,
        default=DEFAULT_CALL_TIMEOUT,
        metavar="SECONDS",
        help="one call into the implementation that has not returned after this long makes "
        f"its property TIMEOUT (default {DEFAULT_CALL_TIMEOUT:g})",
    )
    parser.add_argument(
        "--shrink-budget",
        type=budget,
        default=None,
        metavar="EXAMPLES",
        help="examples the run may try while shrinking failing examples, split evenly among "
        f"the tests that failed (default {DEFAULT_SHRINK_BUDGET}, with --quick "
        f"{QUICK_SHRINK_BUDGET}; 0: report them unshrunk); a count, so a counterexample is "
        "the same on every machine; one the budget cut short says so in the report",
    )
    parser.add_argument(
        "--max-timeouts",
        type=limit,
        default=DEFAULT_MAX_TIMEOUTS,
        metavar="N",
        help="after N properties end TIMEOUT the run stops and every property is TIMEOUT: a "
        f"store that stopped answering is not asked again (default {DEFAULT_MAX_TIMEOUTS}; "
        "0: never stop)",
    )
    parser.add_argument(
        "--workers",
        type=count,
        default=None,
        metavar="N",
        help="processes that share the work (default: one per core)",
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="say nothing on stderr while running (without it: a progress line on a terminal, "
        "one line per finished property elsewhere)",
    )
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="leave out the seed's own result beside each property (used for the seed's own run)",
    )
    parser.add_argument(
        "--no-shrink",
        action="store_true",
        help="do not shrink failing examples (verdicts only; used for the seed's own run)",
    )
    parser.add_argument(
        "--shm",
        choices=(privateshm.PRIVATE, privateshm.SHARED),
        default=privateshm.PRIVATE,
        help="the run's segments on a /dev/shm of its own where the machine allows, "
        "so no other run's segments are seen or swept (default private), or on the "
        "machine's (shared: to watch them from outside); the report says which",
    )


def main(argv: Sequence[str] | None = None, *, own_process: bool = False) -> int:
    """`python -m shmref.conformance`: the exit status is 0 when the gated levels pass,
    1 when not, 2 on bad input, 130 when interrupted.

    `own_process`: this call is the process's command, which may move the
    process onto a /dev/shm of its own (--shm). A call from inside a process
    (a test, a user's script) leaves that process where it is: moving it
    would hide from its children the locks and segments it already made."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if own_process:  # before any thread or child: all of them inherit it
        privateshm.enter(args.shm)
    config = limits.run_config(args)
    if (code := gating.compared(args)) is not None:
        return code
    if args.validate_trace:
        result = validate_either(Recording.load(args.validate_trace))
        print(result.explain())
        return 0 if result.accepted else 1
    if (args.writer or args.readers) and (code := mixed_impl(parser, args)) is not None:
        return code
    chosen = selection(parser, args)
    if isinstance(chosen, int):
        return chosen
    return judged(args, config, chosen)


def mixed_impl(parser: OneLineParser, args: argparse.Namespace) -> int | None:
    """--writer and --readers made the one implementation judged (None), or
    the exit status of a side that could not say its lock."""
    if args.impl or not (args.writer and args.readers):
        parser.error("a mixed run takes --writer IMPL and --readers IMPL, and no --impl")
    from shmref.core.levels import LAYOUT
    from shmref.process.mixed import mixed_name, pairs_line, spec_lock

    args.impl = mixed_name(args.writer, args.readers)
    if args.level and LAYOUT not in args.level:
        args.level.append(LAYOUT)  # a mixed run needs the seed's layout: it is claimed
    try:
        locks = spec_lock(args.writer), spec_lock(args.readers)
    except Exception as exc:  # the program's failure, said in one line
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(pairs_line(args.writer, args.readers, *locks))
    return None


@dataclass(frozen=True)
class Selection:
    """What the options select, checked before anything runs."""

    levels: tuple[str, ...]
    expect: Expectations | None
    supplied: Counterexample | None  # --counterexample, read


def selection(parser: OneLineParser, args: argparse.Namespace) -> Selection | int:
    """The options checked against each other (a wrong one: one line, exit 2)."""
    if not args.impl:
        parser.error("--impl MODULE is required")
    for problem in filter(None, map(property_problem, args.only or ())):
        parser.error(problem)
    if args.hazard and args.hazard not in HAZARD_MODELS:
        parser.error(f"unknown hazard model; known: {', '.join(HAZARD_MODELS)}")
    expect = gating.expected(args)
    if isinstance(expect, int):
        return expect
    if args.counterexample and not args.hazard:
        parser.error("--counterexample FILE goes with --hazard MODEL")
    supplied = None
    if args.counterexample:
        try:
            supplied = supplied_counterexample(args.hazard, args.counterexample)
        except ShippedError as exc:  # the user's file: one line naming it
            print(f"shmref: {exc}", file=sys.stderr)
            return 2
    if args.hazard:
        args.level, args.only = [PROTOCOL], [f"hazard {args.hazard}"]
    if args.only and not args.level:  # judged: the levels of the properties named
        named = {property_level(name) for name in args.only}
        args.level = [level for level in LEVELS if level in named]
    if args.out:  # no report of an earlier run stands there, whatever happens now
        forget(args.out)
    return Selection(tuple(args.level or LEVELS), expect, supplied)


def judged(args: argparse.Namespace, config: RunConfig, chosen: Selection) -> int:
    """The contract check, then the run (or the contract check's report
    alone, when it ended the run), its repeats and expectations, and what
    is printed at the end; the exit status."""
    stop_as_on_ctrl_c()
    started = time.monotonic()
    try:
        checked = run_check(args.impl, args.call_timeout, config)
    except KeyboardInterrupt:
        print(
            "shmref: interrupted during the contract check; its processes stopped", file=sys.stderr
        )
        return 130
    if checked.found is None:
        print(checked.problem, file=sys.stderr)
        return 2
    name = checked.found.name
    for note in filter(None, checked.found.notes):
        print(f"shmref: {note}", file=sys.stderr)  # judged as its version; one line each
    folder = re.sub(r"[^\w.:=+-]+", "_", name).strip("_")  # exec: and mixed: names
    out = (args.out or default_out(folder)).resolve()
    problem = unwritable(out)
    if problem:
        print(f"shmref: cannot write the report in {out}: {problem}", file=sys.stderr)
        return 2
    gate = checked.check
    if gate is not None and gate.status in BAD and gate.status != FAIL:
        report = gate_report(name, out, args.quick, chosen.levels, gate, time.monotonic() - started)
        first = (gate.detail.splitlines() or [""])[0]  # the rest is in the report
        print(f"{gate.name}: {gate.status}: {first}", file=sys.stderr)
        return print_summary(report, out)
    judge = judge_of(args, config, chosen, checked)
    try:
        report = gating.run_with_repeats(judge, out, args, chosen.expect)
    except KeyboardInterrupt:
        print(f"shmref: interrupted: no report in {out}; its processes stopped", file=sys.stderr)
        return 130
    if args.hazard:
        source = (
            chosen.supplied.source if chosen.supplied else "the model's shipped counterexamples"
        )
        return hazard_said(report, HAZARD_MODELS[args.hazard], source, out)
    print_summary(report, out)
    if verdict := gating.said(report, args):
        print(verdict)
    return 0 if report.gate else 1


def judge_of(
    args: argparse.Namespace, config: RunConfig, chosen: Selection, checked: Checked
) -> Callable[..., Report]:
    """One run with the options bound: what gating calls, again for repeats."""
    assert checked.found is not None
    gate = checked.check
    if args.shrink_budget is not None:
        shrink_budget = args.shrink_budget
    else:
        shrink_budget = QUICK_SHRINK_BUDGET if args.quick else DEFAULT_SHRINK_BUDGET
    return functools.partial(
        run,
        ImplRef.of(checked.found.name),  # resolved here, once: the children get it in their job
        quick=args.quick,
        levels=chosen.levels,
        baseline=not args.no_baseline and not args.hazard,
        shrink=not args.no_shrink,
        all_groups=args.all_groups,
        timeout=args.timeout,
        call_timeout=args.call_timeout,
        impl_root=checked.found.root,
        workers=args.workers,
        shrink_budget=shrink_budget,
        progress=not args.no_progress and not args.hazard,
        only=args.only,
        first=[gate] if gate is not None else [],
        counterexample=args.counterexample,
        repeat=args.repeat,
        max_timeouts=args.max_timeouts,
        config=config,
    )
