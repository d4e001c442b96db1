"""One conformance run: the implementation's checks in child processes
(shmref.oracle.isolation), then the protocol checks and the seed baseline; the report written."""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from shmref import tlc
from shmref.core.levels import ERROR, LEVELS, NO_SEED, NOT_RUN, PROTOCOL, TIMEOUT
from shmref.core.runconfig import RunConfig
from shmref.core.suitegroups import NOT_RUN_GROUPS, TEST_GROUPS, TestGroup, group_of, matches
from shmref.oracle import privateshm
from shmref.oracle.baseline import SeedBaseline, attach_baseline
from shmref.oracle.contractcheck import NAME as CONTRACT_CHECK
from shmref.oracle.events import Event, Recorded
from shmref.oracle.hazards import HAZARDS, Hazard
from shmref.oracle.isolation import Outcome, default_workers, run_isolated
from shmref.oracle.job import RECORDING_UNIT, ImplRef, Job, RecordingTask, Unit, hazard_unit
from shmref.oracle.progress import Progress
from shmref.oracle.report import Report, forget
from shmref.oracle.shmclean import remove_orphans
from shmref.oracle.shrinkpass import SHRINK_FOLDER, shrink_failures
from shmref.oracle.testgroups import pytest_checks
from shmref.oracle.validation import Verdicts, isolated_protocol_checks, validate_early
from shmref.oracle.verdict import RUN_CHECKS, Check, level_status
from shmref.render import sink
from shmref.seed.build import SeedError
from shmref.session import profiles

DEFAULT_TIMEOUT = 900.0  # seconds per property: a failing one may search, then shrink for up
# to 300 s (Hypothesis's own bound), on a core that CI shares; a hung call is caught
# sooner, by --call-timeout


DEFAULT_CALL_TIMEOUT = 10.0  # seconds one call into the implementation may take (1000x a slow one)
# Examples the whole run may try while shrinking counterexamples, split evenly among the
# tests that failed (shmref.session.shrinkbudget; a count, so every machine shrinks a
# counterexample as far): one example of a state machine costs about 0.1 s of CPU, so a
# store failing any number of state machines is judged within about 1.5x a passing
# run's time (bench/conformancebench.py), and a store failing one gets all of it.
DEFAULT_SHRINK_BUDGET = 120
# Properties that may end TIMEOUT before the run stops asking (0: never stops): a store that
# stopped answering would otherwise cost a call timeout per property (minutes, not seconds).
DEFAULT_MAX_TIMEOUTS = 3
QUICK_SHRINK_BUDGET = 40  # --quick: a passing run takes seconds


def fresh(out: Path) -> None:
    """No report of an earlier run may stand in `out` as if it were this one's."""
    out.mkdir(parents=True, exist_ok=True)
    forget(out)
    for folder in ("failures", "trace", "workers", "repeat", SHRINK_FOLDER, sink.FOLDER):
        shutil.rmtree(out / folder, ignore_errors=True)


def selected_groups(
    quick: bool, levels: Sequence[str], all_groups: bool, only: Collection[str] | None = None
) -> list[TestGroup]:
    """The pytest groups of the run; with `only`, those that own one of its
    properties (even when `quick` would leave them out: they were named)."""
    wanted = None if only is None else {owner(name) for name in only}
    return [
        g
        for g in TEST_GROUPS
        if g.level in levels
        and (g in wanted if wanted is not None else g.quick or not quick or all_groups)
    ]


def owner(name: str) -> TestGroup | None:
    """The pytest group whose property `name` is (None: no suite test's)."""
    named = [g for g in TEST_GROUPS if g.label == name and not g.split]
    return named[0] if named else group_of(name, TEST_GROUPS)


def property_level(name: str) -> str:
    """The level property `name` belongs to (a known property: property_problem)."""
    if name == RECORDING_UNIT[1] or name.startswith("hazard "):
        return RECORDING_UNIT[0]
    group = owner(name)
    assert group is not None, name
    return group.level


def property_problem(name: str) -> str:
    """Why `name` is no property a run can be limited to ("" if it is one)."""
    known = name == RECORDING_UNIT[1] or name in {f"hazard {h.model}" for h in HAZARDS}
    if known or owner(name) is not None:
        return ""
    return (
        f"{name!r} is no property (a name of the report's property column: "
        f"'{RECORDING_UNIT[1]}', 'hazard MODEL' or a suite test such as "
        f"'{TEST_GROUPS[0].select}::test_NAME')"
    )


def run(
    impl: ImplRef,
    out: Path,
    quick: bool,
    levels: Sequence[str] = LEVELS,
    *,
    baseline: bool = True,
    all_groups: bool = False,
    shrink: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    call_timeout: float = DEFAULT_CALL_TIMEOUT,
    impl_root: str | None = None,
    workers: int | None = None,
    shrink_budget: int = DEFAULT_SHRINK_BUDGET,
    progress: bool = True,
    only: Collection[str] | None = None,
    first: Sequence[Check] = (),
    counterexample: Path | None = None,
    repeat: int = 1,
    max_timeouts: int = DEFAULT_MAX_TIMEOUTS,
    config: RunConfig | None = None,
) -> Report:
    """One conformance run of `impl`, in child processes (shmref.oracle.isolation), never
    here. `all_groups`: every pytest group even when `quick` (every property name);
    `shrink` False: failing examples not shrunk; `workers` children share the work (default:
    one per core), then `shrink_budget` examples in all shrink the failures (`shrink_failures`);
    `progress`: what runs is said on stderr; `only`: just these properties (the report's
    names, or a suite test class's or file's), as the seed baseline re-runs an accident;
    `first`: checks already made (the contract check's, when it did not pass);
    `counterexample`: a user's TLC output the hazards are replayed on instead of the
    shipped ones; `repeat`: the seed baseline runs what did not pass up to that many times,
    so that a flake of the seed is FLAKY there too; `max_timeouts`: after that many
    TIMEOUTs every property is TIMEOUT (stopped_for_timeouts); `config`: what every child
    is told (shmref.core.runconfig: the limits)."""
    started = time.monotonic()
    fresh(out)
    groups = selected_groups(quick, levels, all_groups, only)
    hazards = [h for h in HAZARDS if only is None or f"hazard {h.model}" in only]
    not_run = [NOT_RUN_GROUPS] + [
        g.select for g in TEST_GROUPS if g not in groups and g.level in levels
    ]
    seed_run, seed_problem = None, ""
    if baseline and not impl.is_seed:  # beside this run, not after it
        seed = SeedBaseline(quick, levels, all_groups, timeout, call_timeout, workers, repeat)
        seed_run, seed_problem = start_seed_run(seed)
    no_tlc = tlc.unavailable()
    if no_tlc and baseline:  # said once (the seed baseline's run is quiet)
        print(f"shmref: {no_tlc}", file=sys.stderr)
    job = first_pass_job(
        impl, out, quick, levels, groups, hazards, only, shrink, counterexample, call_timeout
    )

    def shrunk(outcome: Outcome) -> None:
        if shrink:
            shrink_failures(job, outcome, shrink_budget, timeout, workers, config)

    verdicts: Verdicts = {}  # TLC's on the recordings, made beside the run
    try:
        outcome = run_children(
            job, timeout, workers, max_timeouts, config, progress, no_tlc, shrunk, verdicts
        )
    except BaseException:  # Ctrl-C, SIGTERM: the seed's run ends with this one
        if seed_run is not None:
            seed_run.stop()
        raise
    checks = [*first, *run_checks(levels, groups, outcome)]
    checks += property_checks(job, groups, outcome, no_tlc, impl_root, only, verdicts)
    if outcome.stopped:
        not_run.append(stopped_for_timeouts(checks, outcome.stopped, max_timeouts))
    run_levels = tuple(level for level in LEVELS if level in levels)
    seed_levels, seed_problem = seed_columns(impl, checks, run_levels, seed_run, seed_problem, out)
    if seed_problem:  # no seed text here, or its run failed: said beside every property
        not_run.append(f"the seed baseline ({seed_problem})")
    not_run += removed_note(outcome)
    seconds = time.monotonic() - started
    report = Report(impl.name, quick, checks, seconds, not_run, run_levels, seed_levels)
    report.segments = privateshm.current().to_json()
    report.traffic = outcome.traffic()
    report.write(out)
    return report


def first_pass_job(
    impl: ImplRef,
    out: Path,
    quick: bool,
    levels: Sequence[str],
    groups: Sequence[TestGroup],
    hazards: Sequence[Hazard],
    only: Collection[str] | None,
    shrink: bool,
    counterexample: Path | None = None,
    call_timeout: float = DEFAULT_CALL_TIMEOUT,
) -> Job:
    """What the run's children are told first: the groups, recordings and
    hazards to run (on a user's TLC output: `counterexample`), failing
    examples saved unshrunk (`shrink_failures` shrinks them after)."""
    protocol = PROTOCOL in levels
    record = protocol and (only is None or RECORDING_UNIT[1] in only)
    return Job(
        impl=impl,
        out=out,
        profile=profiles.for_run(quick, shrink),
        levels=tuple(levels),
        groups=tuple(g.label for g in groups),
        recordings=recording_tasks(out, quick, record),
        hazards=tuple(h.model for h in hazards) if protocol else (),
        counterexample=counterexample.resolve() if counterexample else None,
        shrink_budget=0,
        call_timeout=call_timeout,
        save_examples=out / SHRINK_FOLDER / "examples" if shrink else None,
    )


def start_seed_run(seed_run: SeedBaseline) -> tuple[SeedBaseline | None, str]:
    """The seed's own run started beside this one, or why there is none."""
    try:
        seed_run.start()
    except SeedError as exc:
        return None, str(exc)
    return seed_run, ""


def recording_tasks(out: Path, quick: bool, record: bool) -> tuple[RecordingTask, ...]:
    """The recordings trace validation judges (none unless `record`), their
    files of an earlier run gone."""
    tasks = tuple(
        RecordingTask(out / f"recording-{seed}.json", 150 if quick else 300, seed)
        for seed in (((1,) if quick else (1, 2)) if record else ())
    )
    for task in tasks:
        task.path.unlink(missing_ok=True)
    return tasks


def run_children(
    job: Job,
    timeout: float,
    workers: int | None,
    max_timeouts: int,
    config: RunConfig | None,
    progress: bool,
    no_tlc: str,
    then: Callable[[Outcome], None] | None,
    verdicts: Verdicts,
) -> Outcome:
    """`job` run in children (shmref.oracle.isolation), its progress said
    (`progress`), each recording validated by TLC as soon as it is made
    (into `verdicts`); `then` (the shrinking pass) runs before those
    validations are waited for."""
    others = {RECORDING_UNIT: len(job.recordings)} if job.recordings else {}
    others.update({hazard_unit(model): 1 for model in job.hazards})
    bar = Progress(sys.stderr, others) if progress else None
    early: list[threading.Thread] = []

    def hear(event: Event) -> None:
        if bar:
            bar.event(event)
        if isinstance(event, Recorded) and event.error is None and not no_tlc:
            early.append(
                threading.Thread(
                    target=validate_early, args=(event.path, job.out, verdicts), daemon=True
                )
            )
            early[-1].start()

    outcome = run_isolated(job, timeout, workers or default_workers(), hear, max_timeouts, config)
    if then is not None:  # (beside the recordings' validation, still running)
        then(outcome)
    for thread in early:
        thread.join()
    if bar:
        bar.close()
    return outcome


def property_checks(
    job: Job,
    groups: Sequence[TestGroup],
    outcome: Outcome,
    no_tlc: str,
    impl_root: str | None,
    only: Collection[str] | None,
    verdicts: Verdicts | None = None,
) -> list[Check]:
    """Each property's check from what the children reported: the suite's
    tests by property, the recordings (TLC's `verdicts` made beside the run
    read) and the hazards (only those of `only`)."""
    root = impl_root or None
    name = job.impl.name
    cases = list(outcome.cases.values())
    checks = pytest_checks(name, groups, cases, root, job.profile, outcome.incidents)
    protocol = PROTOCOL in job.levels
    checks += isolated_protocol_checks(name, job.out, outcome, protocol, no_tlc, root, verdicts)
    if only is not None:  # the others' checks were not run (what went wrong in the run stays)
        checks = [
            c for c in checks if c.name in RUN_CHECKS or any(matches(n, c.name) for n in only)
        ]
    return checks


def run_checks(levels: Sequence[str], groups: Sequence[TestGroup], outcome: Outcome) -> list[Check]:
    """The run-wide checks: a child that died outside any property, a test
    run that collected nothing or failed to collect."""
    checks = [
        Check(levels[0], RUN_CHECKS[0], "the implementation's processes", ERROR, detail=problem)
        for problem in outcome.problems
    ]
    if groups and (outcome.collect_errors or not (outcome.cases or outcome.incidents)):
        detail = "\n".join(outcome.collect_errors) or "no test ran (see workers/*.log)"
        checks.append(
            Check(
                groups[0].level, RUN_CHECKS[1], "the test run", ERROR, detail=detail.strip()[-500:]
            )
        )
    return checks


def seed_columns(
    impl: ImplRef,
    checks: list[Check],
    run_levels: tuple[str, ...],
    seed_run: SeedBaseline | None,
    seed_problem: str,
    out: Path,
) -> tuple[dict[str, str], str]:
    """The seed's result beside each property (its own, for the seed's run)
    and per level; with the problem that left it out, if one did."""
    seed_levels: dict[str, str] = {}
    if impl.is_seed:
        for check in checks:
            check.seed = check.status
        seed_levels = {level: level_status(checks, level, run_levels) for level in LEVELS}
    elif seed_run is not None:
        try:
            seed_levels = attach_baseline(checks, seed_run.report(out))
        except SeedError as exc:
            seed_problem = str(exc)
    if seed_problem:
        for check in checks:
            check.seed = NO_SEED
    return seed_levels, seed_problem


def removed_note(outcome: Outcome) -> list[str]:
    """What dead processes left in /dev/shm and the run removed, as a note;
    on the run's own /dev/shm, what is still there at its end too."""
    if privateshm.current().way == privateshm.PRIVATE:  # every child is gone by now:
        outcome.removed += remove_orphans(set())  # what is left in the run's own /dev/shm
    if not outcome.removed:
        return []
    shown = ", ".join(outcome.removed[:5]) + (", ..." if len(outcome.removed) > 5 else "")
    return [
        f"{len(outcome.removed)} entries the implementation's dead processes left in "
        f"/dev/shm were removed ({shown})"
    ]


def stopped_for_timeouts(checks: list[Check], stopped: Sequence[Unit], limit: int) -> str:
    """Make every property of a run stopped after `limit` TIMEOUTs TIMEOUT,
    whichever had finished, and say why. Which properties finish before the
    limit depends on the scheduling; that the store times out in `limit` of
    them does not (for a store that hangs the same way each time), so this
    rule gives the same statuses on every run where keeping the finished
    ones would not. The contract check and the run-wide checks stay."""
    names = ", ".join(name for _, name in stopped)
    why = (
        f"the run stopped after {limit} properties ended TIMEOUT ({names}): a store that stops "
        f"answering is not asked again (--max-timeouts 0 runs every property)"
    )
    for check in checks:
        if check.name in RUN_CHECKS or check.name == CONTRACT_CHECK:
            continue
        if (check.level, check.name) in stopped:
            check.detail = f"{check.detail}\n\n{why}".strip()
            continue
        ran = f"before the stop it was {check.status}" if check.status != NOT_RUN else "not run"
        check.status, check.failures = TIMEOUT, []
        check.detail = f"{why}; {ran}"
    return why


def gate_report(
    name: str, out: Path, quick: bool, levels: Sequence[str], check: Check, seconds: float
) -> Report:
    """The report of a run that ended at the contract check (its status:
    ERROR, CRASH, TIMEOUT): that property, and nothing else run."""
    fresh(out)
    run_levels = tuple(level for level in LEVELS if level in levels)
    check.level = run_levels[0]
    why = f"{check.name} ended {check.status}"
    others = [
        Check(level, "every property", "the level's properties", NOT_RUN, detail=why)
        for level in run_levels[1:]
    ]
    report = Report(
        name,
        quick,
        [check, *others],
        0.0,
        [f"every other property: {why}"],
        run_levels,
        segments=privateshm.current().to_json(),
    )
    report.write(out)
    return report
