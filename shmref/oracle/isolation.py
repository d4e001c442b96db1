"""The oracle's side of a conformance run: the implementation runs in a
child process (shmref.oracle.worker), so that a store that segfaults, exits or
hangs gets a verdict instead of taking the oracle down with it.

Several children run at once (one per core by default; shmref.oracle.shards
says which test each runs). A child writes an event per test start, outcome and end. When it dies in
the middle of a property, that property is CRASH; when a call into the
implementation does not return within `call_timeout`, or a property runs
past `timeout`, the child's whole process group is killed and the property
is TIMEOUT. Either way a new child goes on with what is left (as
deqp-runner does), and the segments and semaphores the dead processes left
in /dev/shm (new since the child started, held by no live process) are
removed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shmref.calls.callstream import calls_file, crash_trace
from shmref.core.runconfig import RunConfig
from shmref.oracle.descendants import become_subreaper, child_env, end_adopted, end_tree
from shmref.oracle.shmclean import group_gone, remove_orphans
from shmref.oracle.verdict import CRASH, TIMEOUT
from shmref.process import has_programs
from shmref.process.segments import names as shm_names
from shmref.render.sink import FOLDER, file_name, save

POLL = 0.1  # seconds between looks at the child
STARTUP = 120.0  # seconds a new child may take to start beating
LOG_TAIL = 25  # lines of the child's output kept in a CRASH's detail

Unit = tuple[str, str]  # (level, property)


@dataclass
class Incident:
    status: str  # CRASH or TIMEOUT
    detail: str
    node: str | None = None  # the suite test that was running, if any


@dataclass
class Outcome:
    """What all the children together reported."""

    cases: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> worst result
    checks: list[dict[str, Any]] = field(default_factory=list)  # hazard checks (asdict)
    recordings: list[tuple[str, str | None, bool]] = field(default_factory=list)
    incidents: dict[Unit, Incident] = field(default_factory=dict)
    collect_errors: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # a child that died outside any property
    removed: list[str] = field(default_factory=list)  # what dead children left in /dev/shm
    stopped: list[Unit] = field(default_factory=list)  # the TIMEOUTs that ended the run early

    def timeouts(self) -> list[Unit]:
        return [unit for unit, incident in self.incidents.items() if incident.status == TIMEOUT]

    children: int = 0

    RANK = {"error": 3, "fail": 2, "pass": 1, "skip": 0}

    def keep_case(self, node: str, status: str, text: str) -> None:
        known = self.cases.get(node)
        if known is None or self.RANK[status] > self.RANK[known["status"]]:
            self.cases[node] = {"node": node, "status": status, "text": text}


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

    def __init__(self, job: dict[str, Any], out: Path, number: int, config: RunConfig) -> None:
        folder = out / "workers"  # one job, event stream, configuration and log per child
        folder.mkdir(parents=True, exist_ok=True)
        self.job_path = folder / f"{number}.json"
        self.events_path = folder / f"{number}.jsonl"
        self.log_path = folder / f"{number}.log"
        self.job_path.write_text(json.dumps(job))
        self.events_path.write_text("")
        # what the child is told (shmref.core.runconfig): failures leave their
        # traces in DIR/timelines, and a crash the calls before it
        run = config.but(
            trace_dir=str(out / FOLDER), calls_file=str(calls_file(self.events_path))
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

    def events(self) -> list[dict[str, Any]]:
        with open(self.events_path, encoding="utf-8") as file:
            file.seek(self.offset)
            text = file.read()
        complete = text[: text.rfind("\n") + 1]
        self.offset += len(complete.encode())
        return [json.loads(line) for line in complete.splitlines() if line.strip()]

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


Listener = Callable[[dict[str, Any]], None]


def run_isolated(
    job: dict[str, Any],
    out: Path,
    timeout: float,
    call_timeout: float,
    workers: int = 1,
    listener: Listener | None = None,
    max_timeouts: int = 0,
    config: RunConfig | None = None,
) -> Outcome:
    """Run `job` in `workers` children at once (shmref.oracle.shards), each
    replaced when it dies, until every part of it has a result. `listener`
    sees every event of every child (shmref.oracle.progress); `config` is
    what each child is told (its own files added). Once `max_timeouts`
    properties (0: no limit) have ended TIMEOUT, no more is started: the
    store stopped answering, and asking each property again would cost a
    call timeout each (`Outcome.stopped`; shmref.oracle.conformance_run makes every
    property TIMEOUT then, whichever had finished)."""
    become_subreaper()  # a child's orphans come here, never to init (shmref.oracle.descendants)
    config = config or RunConfig()
    outcome = Outcome()
    claims = out / "workers" / "claims"
    shutil.rmtree(claims, ignore_errors=True)
    job = {**job, "skip_nodes": [], "skip_units": [], "call_timeout": call_timeout}
    job["claims"] = str(claims)
    hear = listener or (lambda event: None)
    before = shm_names()
    lanes = []
    for _ in range(max(1, workers)):
        outcome.children += 1
        lanes.append(Lane(Child(job, out, outcome.children, config), timeout, call_timeout, hear))
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
                    child = Child(successor, out, outcome.children, config)
                    lanes.append(Lane(child, *lane.limits, hear))
            if outcome.stopped:
                break
            if lanes:
                time.sleep(POLL)
        # every child is gone: what a store program left that no live process
        # holds (a segment made between requests, which it does not account
        # for: shmref.process.segments); not swept while a sibling still runs
        if has_programs(str(job.get("impl_arg", ""))):
            outcome.removed += remove_orphans(before)
    finally:  # stopped, or interrupted (Ctrl-C, SIGTERM): the children have sessions of their own
        for lane in lanes:
            lane.child.kill()
            outcome.removed += remove_orphans(lane.child.shm_before)
    return outcome


def process_incident(code: int, node: str | None, tail: str) -> Incident:
    """A dead child's incident: CRASH, or the status a store program's proxy
    exited with (shmref.process.channel.EXIT_CODES: its last line says why)."""
    from shmref.process.channel import EXIT_CODES

    if code in EXIT_CODES:  # its line, not the program's stderr after it
        said = [line for line in tail.splitlines() if line.startswith("shmref.process: ")]
        return Incident(EXIT_CODES[code], said[-1] if said else tail, node)
    where = f" in {node}" if node else ""
    return Incident(
        CRASH, f"the implementation's process {signal_text(code)}{where}:\n{tail}", node
    )


def draw_the_calls_before(incident: Incident, child: Child) -> None:
    """The calls of the test a child died (or was killed) in, drawn up to
    the call it never returned from (shmref.calls.callstream)."""
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
    job: dict[str, Any],
    outcome: Outcome,
    hear: Listener,
) -> dict[str, Any] | None:
    """What follows a child's end: nothing, or the job of its replacement."""
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
    hear({"e": "incident", "unit": list(unit), "status": incident.status, "node": node})
    job["skip_units"] = [list(u) for u in outcome.incidents]
    job["skip_nodes"] = sorted(outcome.cases)
    done = {path for path, _, _ in outcome.recordings}
    job["recordings"] = [r for r in job["recordings"] if r["path"] not in done]
    judged = {c["name"] for c in outcome.checks}
    job["hazards"] = [h for h in job["hazards"] if f"hazard {h}" not in judged]
    return dict(job)


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
            kind = event["e"]
            if kind == "beat":
                self.beat, self.grace = now, max(call_timeout, 10.0)
            elif kind == "start":
                self.unit = (event["unit"][0], event["unit"][1]) if event["unit"] else None
                self.node = event.get("node")
                if self.reserved and self.reserved[0] == self.node:
                    self.reserved = None
            elif kind == "reserve":
                self.reserved = (event["node"], event["claim"])
            elif kind == "case":
                outcome.keep_case(event["node"], event["status"], event["text"])
            elif kind == "finish":
                self.unit = self.node = None
            elif kind == "recording":
                outcome.recordings.append(
                    (event["path"], event["error"], event.get("missing", False))
                )
                self.unit = None
            elif kind == "check":
                outcome.checks.append(event["check"])
                self.unit = None
            elif kind == "collect_error":
                outcome.collect_errors.append(event["text"])
            elif kind == "incident" and self.unit is not None:  # a store program's (shmref.process)
                return self.stop(outcome, event["status"], event["detail"])
            elif kind == "stall" and self.unit is not None:
                where = f" in {self.node}" if self.node else ""
                return self.stop(outcome, TIMEOUT, event["detail"] + where + ":\n" + event["stack"])
            elif kind == "end":
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
