"""The oracle's side of a conformance run: the implementation runs in a
child process (shmref.oracle.worker), so that a store that segfaults, exits or
hangs gets a verdict instead of taking the oracle down with it.

Several children run at once (one per core by default; shmref.oracle.shards
says which test each runs). Each is told a job (shmref.oracle.job) and writes
an event per test start, outcome and end (shmref.oracle.events). When it dies in
the middle of a property, that property is CRASH; when a call into the
implementation does not return within `call_timeout`, or a property runs
past `timeout`, the child's whole process group is killed and the property
is TIMEOUT. Either way a new child goes on with what is left (as
deqp-runner does), and the segments and semaphores the dead processes left
in /dev/shm (new since the child started, held by no live process) are
removed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from shmref.calls.drawing import calls_file, crash_trace
from shmref.core.levels import CRASH, TIMEOUT
from shmref.core.runconfig import RunConfig
from shmref.oracle.descendants import become_subreaper, child_env, end_adopted, end_tree
from shmref.oracle.events import (
    Beat,
    CaseResult,
    CollectError,
    Ended,
    Event,
    Finished,
    HazardJudged,
    Lost,
    ProgramFailed,
    Recorded,
    Reserved,
    Spoken,
    Stalled,
    Started,
    parse,
)
from shmref.oracle.job import Job, Unit, hazard_unit, write_job
from shmref.oracle.shmclean import group_gone, remove_orphans
from shmref.oracle.verdict import Check
from shmref.process.lines import Traffic
from shmref.process.segments import names as shm_names
from shmref.render.sink import FOLDER, file_name, save

POLL = 0.1  # seconds between looks at the child
STARTUP = 120.0  # seconds a new child may take to start beating
LOG_TAIL = 25  # lines of the child's output kept in a CRASH's detail


@dataclass
class Incident:
    """How a property was lost with its child."""

    status: str  # CRASH, TIMEOUT, or a store program's (shmref.process.channel)
    detail: str
    node: str | None = None  # the suite test that was running, if any


@dataclass
class Outcome:
    """What all the children together reported."""

    cases: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> worst result
    checks: list[Check] = field(default_factory=list)  # the hazard replays judged
    recordings: list[Recorded] = field(default_factory=list)
    incidents: dict[Unit, Incident] = field(default_factory=dict)
    collect_errors: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # a child that died outside any property
    removed: list[str] = field(default_factory=list)  # what dead children left in /dev/shm
    stopped: list[Unit] = field(default_factory=list)  # the TIMEOUTs that ended the run early
    spoken: Traffic = field(default_factory=Traffic)  # what the children said to a program

    def traffic(self) -> dict[str, int] | None:
        """What the children said to a store program (None: a module's run)."""
        return asdict(self.spoken) if self.spoken.requests else None

    def timeouts(self) -> list[Unit]:
        return [unit for unit, incident in self.incidents.items() if incident.status == TIMEOUT]

    children: int = 0

    RANK = {"error": 3, "fail": 2, "pass": 1, "skip": 0}

    def keep_case(self, node: str, status: str, text: str) -> None:
        known = self.cases.get(node)
        if known is None or self.RANK[status] > self.RANK[known["status"]]:
            self.cases[node] = {"node": node, "status": status, "text": text}


def default_workers() -> int:
    """One child per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def signal_text(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


# -- /dev/shm ------------------------------------------------------------------------------


class Child:
    """One worker process and the events it has written so far."""

    def __init__(self, job: Job, number: int, config: RunConfig) -> None:
        folder = job.out / "workers"  # one job, event stream, configuration and log per child
        folder.mkdir(parents=True, exist_ok=True)
        self.job_path = folder / f"{number}.json"
        self.events_path = folder / f"{number}.jsonl"
        self.log_path = folder / f"{number}.log"
        write_job(job, self.job_path)
        self.events_path.write_text("")
        # what the child is told (shmref.core.runconfig): failures leave their
        # traces in DIR/timelines, and a crash the calls before it
        run = config.but(
            trace_dir=str(job.out / FOLDER), calls_file=str(calls_file(self.events_path))
        ).write(folder / f"{number}.run.json")
        self.offset = 0
        self.shm_before = shm_names()
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "shmref.oracle.worker",
                    str(self.job_path),
                    str(self.events_path),
                    str(run),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=child_env(),
                start_new_session=True,  # its own process group: killed as one
            )

    def events(self) -> list[Event]:
        """The events it wrote since the last look (complete lines only)."""
        with open(self.events_path, encoding="utf-8") as file:
            file.seek(self.offset)
            text = file.read()
        complete = text[: text.rfind("\n") + 1]
        self.offset += len(complete.encode())
        return [parse(line) for line in complete.splitlines() if line.strip()]

    def kill(self) -> None:
        end_tree(self.process.pid)  # stopped, then killed: none leaves meanwhile
        self.end_descendants()

    def end_descendants(self) -> None:
        """Its process group, what is below it, and the orphans of its
        session that came to this process, gone (shmref.oracle.descendants)."""
        if self.process.poll() is None:
            end_tree(self.process.pid)
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except OSError:
            pass
        self.process.wait()
        end_adopted(self.process.pid)  # its session's id is its pid (start_new_session)
        group_gone(self.process.pid)
        end_adopted(self.process.pid)  # any that came here while they died: reaped

    def log_tail(self) -> str:
        lines = self.log_path.read_text(errors="replace").strip().splitlines()
        return "\n".join(lines[-LOG_TAIL:])


Listener = Callable[[Event], None]


def run_isolated(
    job: Job,
    timeout: float,
    workers: int = 1,
    listener: Listener | None = None,
    max_timeouts: int = 0,
    config: RunConfig | None = None,
) -> Outcome:
    """Run `job` in `workers` children at once (shmref.oracle.shards), each
    replaced when it dies, until every part of it has a result. `listener`
    sees every event of every child (shmref.oracle.progress), and the `Lost`
    of each property a child died in; `config` is
    what each child is told (its own files added). Once `max_timeouts`
    properties (0: no limit) have ended TIMEOUT, no more is started: the
    store stopped answering, and asking each property again would cost a
    call timeout each (`Outcome.stopped`; shmref.oracle.conformance_run makes every
    property TIMEOUT then, whichever had finished)."""
    become_subreaper()  # a child's orphans come here, never to init (shmref.oracle.descendants)
    config = config or RunConfig()
    outcome = Outcome()
    shutil.rmtree(job.claims, ignore_errors=True)
    hear = listener or (lambda event: None)
    before = shm_names()
    lanes = []
    for _ in range(max(1, workers)):
        outcome.children += 1
        lanes.append(Lane(Child(job, outcome.children, config), timeout, job.call_timeout, hear))
    try:
        while lanes:
            for lane in list(lanes):
                result = lane.poll(outcome)
                if result is None:
                    continue
                lanes.remove(lane)
                successor = after(lane, result, job, outcome, hear)
                if 0 < max_timeouts <= len(outcome.timeouts()):
                    outcome.stopped = outcome.timeouts()
                    break
                if successor is not None:
                    outcome.children += 1
                    child = Child(successor, outcome.children, config)
                    lanes.append(Lane(child, *lane.limits, hear))
            if outcome.stopped:
                break
            if lanes:
                time.sleep(POLL)
        # every child is gone: what a store program left that no live process
        # holds (a segment made between requests, which it does not account
        # for: shmref.process.segments); not swept while a sibling still runs
        if job.impl.has_programs:
            outcome.removed += remove_orphans(before)
    finally:  # stopped, or interrupted (Ctrl-C, SIGTERM): the children have sessions of their own
        for lane in lanes:
            lane.child.kill()
            outcome.removed += remove_orphans(lane.child.shm_before)
    return outcome


def process_incident(code: int, node: str | None, tail: str) -> Incident:
    """A dead child's incident when it said nothing of how it died: CRASH.
    (A store program's failure is said as a `ProgramFailed` event, its status
    there; the worker's exit code only repeats it for the log.)"""
    where = f" in {node}" if node else ""
    return Incident(
        CRASH, f"the implementation's process {signal_text(code)}{where}:\n{tail}", node
    )


def draw_the_calls_before(incident: Incident, child: Child) -> None:
    """The calls of the test a child died (or was killed) in, drawn up to
    the call it never returned from (shmref.calls.drawing)."""
    folder = child.events_path.parent.parent / FOLDER  # DIR/workers/N.jsonl -> DIR/timelines
    if incident.node is None or (folder / file_name(incident.node)).exists():
        return
    trace = crash_trace(
        calls_file(child.events_path), incident.node, incident.status, incident.detail
    )
    if trace is not None:
        save(trace, incident.node, folder)


def after(
    lane: Lane,
    result: tuple[bool, Unit | None, str | None],
    job: Job,
    outcome: Outcome,
    hear: Listener,
) -> Job | None:
    """What follows a child's end: nothing, or the job of its replacement
    (the run's `job` less what is done or lost by now)."""
    child = lane.child
    ended, unit, node = result
    # the group's stragglers (readers the tests spawned, a resource tracker,
    # a store program's children, in the group or not)
    child.end_descendants()
    if ended:  # what it left is swept when every child is done (run_isolated)
        return None
    if lane.reserved:  # the test it had claimed to run next: for another child
        Path(lane.reserved[1]).unlink(missing_ok=True)
    outcome.removed += remove_orphans(child.shm_before)
    code = child.process.returncode
    if unit is None:  # died outside any property (at start, on import)
        problem = (
            f"the implementation's process {signal_text(code)} outside any property:\n"
            + child.log_tail()
        )
        if not any(p.splitlines()[0] == problem.splitlines()[0] for p in outcome.problems):
            outcome.problems.append(problem)  # once, not once per child
        return None
    if unit not in outcome.incidents:
        outcome.incidents[unit] = process_incident(code, node, child.log_tail())
    incident = outcome.incidents[unit]
    draw_the_calls_before(incident, child)
    hear(Lost(unit, incident.status, node))
    recorded = {r.path for r in outcome.recordings}
    judged = {c.name for c in outcome.checks}
    return replace(
        job,
        skip_units=tuple(outcome.incidents),
        skip_nodes=tuple(sorted(outcome.cases)),
        recordings=tuple(r for r in job.recordings if r.path not in recorded),
        hazards=tuple(h for h in job.hazards if hazard_unit(h)[1] not in judged),
    )


class Lane:
    """One child followed until it ends or is killed; `poll` answers None
    while it runs, then (ended normally, the property that was running, the
    test that was running)."""

    def __init__(self, child: Child, timeout: float, call_timeout: float, hear: Listener) -> None:
        self.child, self.hear = child, hear
        self.limits = (timeout, call_timeout)
        self.unit: Unit | None = None
        self.node: str | None = None
        self.reserved: tuple[str, str] | None = None  # (test, claim file) claimed to run next
        self.spent: dict[Unit, float] = {}
        self.last = self.beat = time.monotonic()
        self.grace = STARTUP  # before its first beat: Python, pytest and the implementation import

    def stop(self, outcome: Outcome, status: str, detail: str) -> tuple[bool, Unit, str | None]:
        assert self.unit is not None
        outcome.incidents[self.unit] = Incident(status, detail, self.node)
        self.child.kill()
        return False, self.unit, self.node

    def poll(self, outcome: Outcome) -> tuple[bool, Unit | None, str | None] | None:
        child, (timeout, call_timeout) = self.child, self.limits
        alive = child.process.poll() is None
        now = time.monotonic()
        if self.unit is not None:
            self.spent[self.unit] = self.spent.get(self.unit, 0.0) + now - self.last
        self.last = now
        for event in child.events():
            self.hear(event)
            match event:
                case Beat():
                    self.beat, self.grace = now, max(call_timeout, 10.0)
                case Started(node=node, unit=unit):
                    self.unit, self.node = unit, node
                    if self.reserved and self.reserved[0] == node:
                        self.reserved = None
                case Reserved(node=node, claim=claim):
                    self.reserved = (node, claim)
                case CaseResult(node=node, status=status, text=text):
                    outcome.keep_case(node, status, text)
                case Finished():
                    self.unit = self.node = None
                case Recorded():
                    outcome.recordings.append(event)
                    self.unit = None
                case HazardJudged(check=check):
                    outcome.checks.append(check)
                    self.unit = None
                case CollectError(text=text):
                    outcome.collect_errors.append(text)
                case Spoken(requests=requests, round_trips=round_trips):
                    outcome.spoken.requests += requests
                    outcome.spoken.round_trips += round_trips
                case ProgramFailed(status=status, detail=detail) if self.unit is not None:
                    return self.stop(outcome, status, detail)
                case Stalled(detail=detail, stack=stack) if self.unit is not None:
                    where = f" in {self.node}" if self.node else ""
                    return self.stop(outcome, TIMEOUT, detail + where + ":\n" + stack)
                case Ended():
                    child.process.wait()
                    return True, None, None
        if not alive:
            return False, self.unit, self.node
        if self.unit is not None and self.spent.get(self.unit, 0.0) > timeout:
            where = f" (in {self.node})" if self.node else ""
            return self.stop(
                outcome, TIMEOUT, f"the property ran past --timeout {timeout:g} s" + where
            )
        if now - self.beat > self.grace:
            if self.unit is None:
                outcome.problems.append(
                    f"the implementation's process stopped answering for {now - self.beat:.0f} s"
                )
                child.kill()
                return True, None, None
            return self.stop(
                outcome,
                TIMEOUT,
                f"the implementation's process stopped answering for "
                f"{now - self.beat:.0f} s (a call holding the GIL?)"
                + (f" in {self.node}" if self.node else ""),
            )
        return None
