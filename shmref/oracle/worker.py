"""The child process of a conformance run: everything that calls the
implementation runs here, never in the oracle's own process.

    python -m shmref.oracle.worker JOB.json EVENTS.jsonl RUN.json

A job (shmref.oracle.job, written by shmref.oracle.isolation) names the
implementation, the suite's selections, the recordings and hazard replays
still to do, and what an earlier child already finished or lost; the
implementation is loaded once, for all of them (the suite is given it).
RUN.json is the run's configuration (shmref.core.runconfig: where traces
and calls go, the protocol's limits), entered once for everything below.
The child's one way out is EVENTS: it appends one JSON line per event
(shmref.oracle.events; `Events`, its only writer), flushed at once, so that
whatever kills it (a segfault in a native store, os._exit, the parent's
kill after a hang) the parent knows which property was running; a store
program's failure comes to it through shmref.process.channel's `on_failure`
and leaves as a `ProgramFailed` event. A watchdog thread reports a call into
the implementation that has not returned within the job's `call_timeout`,
with the stack it is stuck in, and beats once a second so that a child
frozen with the GIL held is seen too.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import time
import traceback
from collections.abc import Generator, Iterator
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import pytest

from shmref.core.levels import ERROR, PROTOCOL
from shmref.core.runconfig import RunConfig, enter_run
from shmref.core.suitegroups import TEST_GROUPS, group_of, property_key
from shmref.oracle.descendants import hold
from shmref.oracle.events import (
    Beat,
    CaseResult,
    CaseStatus,
    Collected,
    CollectError,
    Ended,
    Event,
    Finished,
    HazardJudged,
    ProgramFailed,
    PytestExited,
    Recorded,
    Reserved,
    Spoken,
    Stalled,
    Started,
    encode,
)
from shmref.oracle.job import RECORDING_UNIT, Job, hazard_unit, read_job
from shmref.oracle.shards import Claims, longest_first, run_claimed
from shmref.oracle.testgroups import suite_node_id
from shmref.oracle.verdict import Check
from shmref.process import channel
from shmref.process.lines import TRAFFIC
from shmref.process.messages import ProgramFailure
from shmref.session import given, shrinkbudget
from shmref.traces.recording import record


class Events:
    """EVENTS.jsonl: one line per event, written and flushed at once."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (open for the child's life)
        self.lock = threading.Lock()
        # a process forked by a test (a reader) may report too: a lock held by
        # another thread at the fork would never be released in it
        os.register_at_fork(after_in_child=self.fresh_lock)

    def fresh_lock(self) -> None:
        self.lock = threading.Lock()

    def emit(self, event: Event) -> None:
        line = encode(event)
        with self.lock:
            self.file.write(line + "\n")
            self.file.flush()

    def program_failed(self, failure: ProgramFailure) -> None:
        """A store program broke the protocol, died or hung (shmref.process.channel):
        its property's status, whatever the test does with exceptions. The
        line goes to the log and, as a `ProgramFailed` event, to the oracle
        (the status crosses only there; the exit code repeats it for the log)."""
        line = channel.failure_line(failure)
        print(line, file=sys.stderr, flush=True)  # pytest may be capturing it
        self.emit(ProgramFailed(failure.status, line))
        os._exit(channel.exit_code(failure))


# -- the watchdog ----------------------------------------------------------------------------


def implementation_files(impl: ModuleType) -> tuple[str, ...]:
    """Where the implementation's code lives: its module (or package folder)
    and those of the classes it exports (they may come from elsewhere)."""
    modules = {impl.__name__}
    for attr in ("SingleWriterShmRingBuffer", "SingleWriterShmObjectStorage"):
        cls = getattr(impl, attr, None)
        if cls is not None:
            modules.add(cls.__module__)
    places = []
    for name in modules:
        module = sys.modules.get(name.split(".")[0]) if "." in name else sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if not path:
            continue
        path = os.path.realpath(path)
        places.append(os.path.dirname(path) + os.sep if path.endswith("__init__.py") else path)
    return tuple(sorted(set(places)))


class Watchdog(threading.Thread):
    """Beats every half second; reports a call into the implementation that
    has been running for longer than `limit` seconds: in any thread (tests
    read from threads too), the outermost frame of the implementation's code
    unchanged since then."""

    def __init__(self, events: Events, places: tuple[str, ...], limit: float) -> None:
        super().__init__(daemon=True, name="shmref-watchdog")
        self.events, self.places, self.limit = events, places, limit

    def outermost_impl_frame(self, frame: FrameType | None) -> FrameType | None:
        found = None
        while frame is not None:
            if os.path.realpath(frame.f_code.co_filename).startswith(self.places):
                found = frame
            frame = frame.f_back
        return found

    def run(self) -> None:
        # Only a signature and a time are kept between looks: a frame kept
        # alive would keep its locals (a memoryview of a segment) and make
        # close() fail. The signature (the impl frames' ids and positions)
        # must stay the same at every look: a loop of fresh calls moves.
        seen: dict[int, tuple[tuple[int, ...], float]] = {}  # thread -> (signature, since)
        while True:
            time.sleep(0.5)
            self.events.emit(Beat())
            if self.places and self.look(seen):
                return  # reported: the parent kills this process now

    def signature(self, frame: FrameType | None) -> tuple[int, ...]:
        marks: list[int] = []
        while frame is not None:
            if os.path.realpath(frame.f_code.co_filename).startswith(self.places):
                marks += [id(frame), frame.f_lasti]
            frame = frame.f_back
        return tuple(marks)

    def look(self, seen: dict[int, tuple[tuple[int, ...], float]]) -> bool:
        now = time.monotonic()
        frames = sys._current_frames()
        try:
            for ident, top in frames.items():
                frame = self.outermost_impl_frame(top)
                if frame is None:
                    seen.pop(ident, None)
                    continue
                marks = self.signature(top)
                if ident not in seen or seen[ident][0] != marks:
                    seen[ident] = (marks, now)
                    continue
                if now - seen[ident][1] < self.limit:
                    continue
                self.events.emit(
                    Stalled(
                        f"a call into the implementation did not return within {self.limit:g} s"
                        f" ({frame.f_code.co_name} in {frame.f_code.co_filename}, "
                        f"line {frame.f_lineno})",
                        "".join(traceback.format_stack(top)[-12:]),
                    )
                )
                return True
            for gone in set(seen) - set(frames):
                del seen[gone]
            return False
        finally:
            del frames  # no frame outlives this look


# -- the suite ---------------------------------------------------------------------------------


def _theirs() -> Generator[None, None, None]:
    try:
        return (yield)
    except (KeyboardInterrupt, SystemExit) as exc:
        raise RuntimeError(f"the implementation raised {type(exc).__name__}({exc})") from exc


class SuitePlugin:
    """Keeps the job's selection (the level table decides, whatever the
    options), gives the suite the module this child loaded, and reports
    each test's start, outcome and end as events."""

    def __init__(self, job: Job, impl: ModuleType, events: Events, claims: Claims) -> None:
        self.claims, self.impl = claims, impl
        self.groups = set(job.groups)
        self.skip_nodes = set(job.skip_nodes)
        self.skip_units = set(job.skip_units)
        self.nodes = None if job.nodes is None else set(job.nodes)
        self.save_examples, self.replay_examples = job.save_examples, job.replay_examples
        self.events = events

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        """The suite's `impl` fixture takes the module this child loaded
        (shmref.session.given); and the run's two passes
        (shmref.oracle.conformance_run): failing examples saved unshrunk, or
        the saved ones replayed and shrunk."""
        given.give(config, self.impl)
        budget = shrinkbudget.active()
        if budget is not None:
            budget.save_to = self.save_examples
            budget.replay_from = self.replay_examples

    def wanted(self, node: str) -> bool:
        group = group_of(node, TEST_GROUPS)
        if group is None or group.label not in self.groups:
            return False
        if self.nodes is not None and node not in self.nodes:
            return False
        return node not in self.skip_nodes and property_key(node) not in self.skip_units

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        keep = [item for item in items if self.wanted(suite_node_id(item.nodeid))]
        dropped = [item for item in items if not self.wanted(suite_node_id(item.nodeid))]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = longest_first(keep, {item: suite_node_id(item.nodeid) for item in keep})
        self.events.emit(Collected(tuple(suite_node_id(item.nodeid) for item in items)))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        """Only the tests this child claims (shmref.oracle.shards)."""
        if session.testsfailed and not session.config.option.continue_on_collection_errors:
            raise session.Interrupted(f"{session.testsfailed} error(s) during collection")

        def reserved(item: pytest.Item, claim: Path) -> None:
            self.events.emit(Reserved(suite_node_id(item.nodeid), str(claim)))

        run_claimed(session, session.items, self.claims, reserved)
        return True

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        node = suite_node_id(nodeid)
        self.events.emit(Started(node, property_key(node)))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = suite_node_id(report.nodeid)
        if report.failed:
            status: CaseStatus = "fail" if report.when == "call" else "error"
            budget = shrinkbudget.active()
            cut = budget is not None and budget.cut_short(report.nodeid)
            text = report.longreprtext + (f"\n\nshmref: {budget.note()}" if cut and budget else "")
            self.events.emit(CaseResult(node, status, text))
        elif report.skipped:
            longrepr = report.longrepr
            reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
            self.events.emit(CaseResult(node, "skip", reason))
        elif report.when == "call":
            self.events.emit(CaseResult(node, "pass", ""))

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        self.events.emit(Finished(suite_node_id(nodeid)))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.events.emit(CollectError(f"{report.nodeid}: {report.longreprtext}"))

    # KeyboardInterrupt or SystemExit raised in a test, its fixtures or their
    # teardown come from the implementation (nobody types Ctrl-C at this
    # child): that test's error, not the end of the run.
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        return (yield from _theirs())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        return (yield from _theirs())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        return (yield from _theirs())


def run_pytest(job: Job, impl: ModuleType, events: Events, claims: Claims) -> None:
    if not job.groups:
        return
    from shmref.core.paths import SUITE_DIR
    from shmref.oracle.testgroups import plugin_args

    ini = job.out / "pytest.ini"
    ini.write_text("[pytest]\n")
    selections = dict.fromkeys(
        str(SUITE_DIR / g.select.split("::")[0]) for g in TEST_GROUPS if g.label in job.groups
    )
    args = [
        "-q",
        "-c",
        str(ini),
        "--rootdir",
        str(SUITE_DIR),
        "-p",
        "no:cacheprovider",
        # an exception an implementation's __del__ raises during garbage
        # collection is reported by the test it concerns, not by the run
        "-p",
        "no:unraisableexception",
        *plugin_args(),
        "--shmref-impl",
        job.impl.arg,  # its name for the suite (the module itself is given: SuitePlugin)
        "--shmref-profile",
        job.profile,
        "--shmref-shrink-budget",
        str(job.shrink_budget),
        *selections,
    ]
    code = pytest.main(args, plugins=[SuitePlugin(job, impl, events, claims)])
    events.emit(PytestExited(int(code)))


# -- recordings and hazard replays -----------------------------------------------------------


def run_recordings(job: Job, impl: ModuleType, events: Events, claims: Claims) -> None:
    for task in job.recordings:
        if not claims.claim(f"recording {task.path}"):
            continue
        events.emit(Started(None, RECORDING_UNIT))
        try:
            record(impl, task.steps, task.seed).save(task.path)
            events.emit(Recorded(task.path, None))
        except BaseException as exc:  # the implementation's: said in the report
            missing = type(exc).__name__ == "MissingCapability"
            events.emit(Recorded(task.path, f"{type(exc).__name__}: {exc}", missing))


def run_hazards(job: Job, impl: ModuleType, events: Events, claims: Claims) -> None:
    from shmref.oracle.hazardcheck import (
        hazard_check,
        hazard_counterexamples,
        supplied_counterexample,
    )
    from shmref.oracle.hazards import HAZARDS
    from shmref.traces.shipped import ShippedError

    for hazard in HAZARDS:
        if hazard.model not in job.hazards or not claims.claim("hazard " + hazard.model):
            continue
        unit = hazard_unit(hazard.model)
        try:
            counterexamples, problem = (
                (
                    [supplied_counterexample(hazard.model, job.counterexample)]
                    if job.counterexample
                    else hazard_counterexamples(hazard.model)
                ),
                "",
            )
        except ShippedError as exc:  # a stale or missing shipped file: named, never TLC
            counterexamples, problem = [], str(exc)
        events.emit(Started(None, unit))
        try:
            check = hazard_check(job.impl.name, impl, hazard, counterexamples, problem)[0]
        except BaseException as exc:  # the implementation's: said in the report
            check = Check(
                PROTOCOL,
                unit[1],
                hazard.what,
                ERROR,
                detail=f"the replay raised {type(exc).__name__}: {exc}",
            )
        events.emit(HazardJudged(unit, check))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--check"]:  # the contract check's child (shmref.oracle.checkchild)
        from shmref.oracle.checkchild import check

        return check(*argv[1:3])
    job_path, events_path, run_path = Path(argv[0]), Path(argv[1]), Path(argv[2])
    hold()  # whatever this child starts is ended with it (shmref.oracle.descendants)
    job = read_job(job_path)
    enter_run(RunConfig.read(run_path))  # traces, calls and limits, for all below
    events = Events(events_path)
    channel.on_failure(events.program_failed)
    faulthandler.enable()  # a segfault prints the Python stack to our log
    from shmref.seed.impl import load_impl

    impl = load_impl(job.impl.arg)  # once: the suite is given this module (SuitePlugin)
    Watchdog(events, implementation_files(impl), job.call_timeout).start()
    claims = Claims(job.claims)
    run_recordings(job, impl, events, claims)
    run_pytest(job, impl, events, claims)
    run_hazards(job, impl, events, claims)
    events.emit(Spoken(TRAFFIC.requests, TRAFFIC.round_trips))
    events.emit(Ended())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
