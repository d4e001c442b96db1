"""The spec's hazard models: their TLC counterexamples replayed on an
implementation, watched for a wrong value, a misplaced count or a chunk
pinned for ever.

Where the driver observes read counts (the store's declared count reader,
or the segment's bytes under a layout claim: shmref.store.driver), a
misplaced count shows at the step it happens. Elsewhere counts are observed
through the API alone, as a black-box checker judges a store from its
history (shmref.oracle.apicounts): after the trace, each live chunk gets one read
fewer than it is owed, and free_unused must keep it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from shmref import contract, tlc
from shmref.core import tables, vocabulary
from shmref.core.paths import SPEC_DIR
from shmref.oracle.apicounts import count_probe
from shmref.render.build import Builder
from shmref.render.traceformat import Trace as Timeline
from shmref.store.driver import Driver, Outcome
from shmref.traces.replay import Replayer, describe
from shmref.traces.shipped import Closing


@dataclass(frozen=True)
class Hazard:
    model: str
    what: str
    closable: bool  # False: no seed-compatible implementation can close it
    liveness: bool = False
    expect: str = ""  # an unclosable hazard shows as this violation (else: a failure)
    serde_fails: str = ""  # whose serde fails ("reader"): needs contract.SERDE_IN_PROCESS


HAZARDS: tuple[Hazard, ...] = (
    Hazard("MCRingIdCollision", "ring: an allocation takes the id of a live chunk", True),
    Hazard("MCIdCollision", "a put takes the id of a live chunk (ID_MAX live chunks)", True),
    Hazard(
        "MCDoubleRead",
        "a reader reads a delivery twice; the other reader's read "
        "of the reclaimed, reused chunk returns a foreign value",
        True,
    ),
    Hazard(
        "MCDoubleReadCount",
        "the late increment of a read whose chunk was reused lands on the new chunk's count",
        True,
    ),
    Hazard("MCClearInFlight", "clear() with a read in flight, the chunk reused under it", True),
    Hazard(
        "MCClearDrain",
        "clear() with deliveries pending; a read begun after the clear meets the reused chunk",
        True,
    ),
    Hazard(
        "MCCopyFail",
        "a read whose deserialization fails is never counted: the chunk is pinned forever",
        True,
        liveness=True,
        serde_fails="reader",
    ),
    Hazard(
        "MCIdWrap",
        "ABA: ids wrap across clear() while a handle is outstanding; "
        "the id check passes on another object "
        "(F4, a new secret before a forgotten id returns, closes it)",
        True,
    ),
    Hazard(
        "MCLostReader",
        "a delivery is never read: its chunk is pinned forever "
        "(assumption A1: each delivery is read by every reader)",
        False,
        liveness=True,
        expect="stay pinned",
    ),
)


# -- hazards ----------------------------------------------------------------------------


Row = tuple[int, str, str, str, str]  # step, action, spec, impl, note
Chunk = tuple[int, int]  # (id, address)


class StepError(Exception):
    """An implementation raised something the contract does not allow at a step."""

    def __init__(self, message: str, rows: list[Row], timeline: Timeline) -> None:
        super().__init__(message)
        self.rows = rows
        self.timeline = timeline


@dataclass
class HazardReplay:
    hazard: Hazard
    violation: str | None
    rows: list[Row]
    timeline: Timeline | None = None  # the same steps, drawn (shmref.render)
    closed: str = ""  # the store left the counterexample as the fixed protocol does: where

    def table(self) -> str:
        return tables.text(("#", "action", "spec", "impl", "note"), self.rows)


def replay_hazard(
    impl: ModuleType, hazard: Hazard, trace: tlc.Trace, closing: Closing | None = None
) -> HazardReplay:
    """Replay the counterexample on `impl`, whatever it answers, and watch for
    the hazard: a read returning another key's value, a put/allocation taking
    a live chunk's id, a chunk's count above the reads that named it, and
    (liveness models) a chunk that stays pinned once every read is done.

    Where the store leaves the counterexample as the fixed protocol does
    (`closing`: the step where the spec with FIXED = TRUE answers otherwise,
    e.g. accepts a put the seed's protocol refuses), the replay ends there:
    the counterexample is closed, and what follows in it is a behaviour of
    the seed's protocol only, which the store is not to be blamed by."""
    replayer = Replayer(impl, SPEC_DIR / f"{hazard.model}.cfg")
    drawn = Builder(
        "hazard",
        f"hazard {hazard.model}: {hazard.what}",
        replayer.constants,
        [str(r) for r in replayer.readers],
        case=hazard.model,
    )
    with replayer.driver() as driver:
        spec_states = {state.index: state.vars for state in trace.states}
        watch = Watch(replayer, driver, drawn, spec_states, closing)
        violation = watch.replay(trace)
        if watch.closed:
            pass  # the store is off the counterexample: nothing after it is the hazard's
        elif hazard.liveness and violation is None:
            violation = settle(driver, replayer, trace, watch.stage, watch.rows, watch.step)
            violation = violation or pinned(driver, replayer, watch.done, watch.owed, watch.rows)
        elif violation is None and driver.writer is not None and "counts" not in driver.observe():
            index = trace.states[-1].index + 1
            violation = count_probe(
                driver,
                replayer,
                watch.reads,
                watch.owed,
                watch.stage,
                watch.rows,
                watch.step,
                index,
            )
    if violation and drawn.trace.diverged_at is None:
        drawn.mark("VIOLATION: " + violation)  # found after the steps (pinned, miscounted)
    drawn.trace.verdict = violation or watch.closed
    return HazardReplay(hazard, violation, watch.rows, drawn.trace, watch.closed)


@dataclass
class Watch:
    """A hazard's counterexample replayed step by step on one driver, and what
    the store handed out and read so far: the rows and the picture of each
    step, and the problem, if any, each step shows."""

    replayer: Replayer
    driver: Driver
    drawn: Builder
    spec_states: Mapping[int, Mapping[str, Any]]
    closing: Closing | None
    rows: list[Row] = field(default_factory=list)
    reads: dict[Chunk, list[Any]] = field(default_factory=dict)  # -> [key, reads naming it]
    owed: dict[Chunk, int] = field(default_factory=dict)  # -> handles issued (put, get_cached)
    # -> deliveries done with: a read begun on it (whatever came of it) or dropped unread
    done: dict[Chunk, int] = field(default_factory=dict)
    stage: dict[Any, tuple[str, tuple[Any, ...]]] = field(default_factory=dict)  # reader ->
    foreign: dict[Any, bool] = field(default_factory=dict)  # reader -> spec's copy was another's
    closed: str = ""  # where the store left the counterexample as the fixed protocol does

    def replay(self, trace: tlc.Trace) -> str | None:
        """Every step of the counterexample until one shows the hazard or the
        store leaves it; an exception the contract does not allow: StepError."""
        violation = None
        for state in trace.states[1:]:
            action = state.vars["last_action"]
            try:
                violation = self.step(state.index, action, action.get("outcome", "ok"))
            except contract.MissingCapability:
                raise
            except Exception as exc:  # the implementation's, named with its step
                message = (
                    f"step {state.index}, {describe(action)}: the implementation "
                    f"raised {type(exc).__name__}: {exc}"
                )
                self.drawn.add(state.index, action, type(exc).__name__)
                raise StepError(message, self.rows, self.drawn.mark(message)) from exc
            if violation or self.closed:
                break
        return violation

    def step(self, index: int, action: Mapping[str, Any], spec_outcome: str) -> str | None:
        """One step performed and judged: the problem it shows, or None."""
        name = action["name"]
        reader = self.replayer.reader(action["reader"]) if "reader" in action else None
        before = self.driver.observe()
        outcome, note = self.perform(name, reader, action)
        handle, problem = self.follow_read(index, name, reader, action, outcome)
        after = self.driver.observe()
        problem = self.follow_handout(name, action, outcome, before) or problem
        if name == "get_end" and outcome.status == "ok" and outcome.result != handle[0]:
            problem = (
                f"the read of {_handle_text(handle)} returned "
                f"{outcome.result!s}'s value, not {handle[0]}'s"
            )
        live_problem = self.check_live(after)  # forgets the chunks gone, whatever was found
        problem = problem or live_problem
        if problem is None and self.closes(index, outcome, spec_outcome):
            note = self.closed
        self.record(index, action, spec_outcome, outcome, after, problem, note)
        return problem

    def perform(self, name: str, reader: Any, action: Mapping[str, Any]) -> tuple[Outcome, str]:
        """The step on the store, unless the store's read it ends is not in flight."""
        if name in ("get_copy", "get_end") and reader not in self.stage:
            return Outcome("-"), "no read in flight on the impl"
        if name == "get_end" and self.stage[reader][0] == "failed":
            self.stage.pop(reader)
            return Outcome("DeserializeError"), "the read ended at get_copy"
        return self.replayer.perform(self.driver, action), ""

    def follow_read(
        self, index: int, name: str, reader: Any, action: Mapping[str, Any], outcome: Outcome
    ) -> tuple[tuple[Any, ...], str | None]:
        """A read's three steps followed (and the deliveries taken): the handle
        the step is about, and a torn read of another put's bytes."""
        handle = tuple(action.get("handle", ()))
        problem = None
        if name in ("get_begin", "drop_delivery"):  # this delivery is taken
            self.done[(handle[2], handle[1])] = self.done.get((handle[2], handle[1]), 0) + 1
        stage = self.stage
        if name == "get_begin" and outcome.status == "ok":
            stage[reader] = ("open", handle)
        elif name == "get_copy" and reader in stage:
            self.foreign[reader] = copied_elsewhere(
                self.spec_states.get(index), action["reader"], stage[reader][1]
            )
            if outcome.status == "torn" and self.foreign[reader]:
                problem = torn_read(stage[reader][1], outcome)
            if outcome.status == "ok":
                stage[reader] = ("copied", stage[reader][1])
            else:  # the impl raised at the copy: its read is over, uncounted
                assert reader is not None
                self.driver.readers[reader].abandon()
                stage[reader] = ("failed", stage[reader][1])
        elif name == "get_end" and reader in stage:
            handle = stage.pop(reader)[1]
            if outcome.status == "torn" and self.foreign.pop(reader, False):
                problem = torn_read(handle, outcome)  # decoded after the store's read
            if outcome.status in ("ok", "DeserializeError", "torn"):
                entry = self.reads.get((handle[2], handle[1]))
                if entry is not None and entry[0] == handle[0]:
                    entry[1] += 1
        return handle, problem

    def follow_handout(
        self, name: str, action: Mapping[str, Any], outcome: Outcome, before: Mapping[str, Any]
    ) -> str | None:
        """A chunk allocated (its id must not be a live one's) and the handles
        issued for it, each owed a read by every reader."""
        problem = None
        if vocabulary.action(name).allocates and outcome.status == "ok":
            address, chunk_id = outcome.result
            if chunk_id in before.get("metadata", {}):
                problem = f"got id {chunk_id}, the id of a live chunk"
            self.reads[(chunk_id, address)] = [action.get("key", ""), 0]
            self.owed[(chunk_id, address)] = 0
        if name in ("put", "get_cached") and outcome.status == "ok":
            issued = (outcome.result[1], outcome.result[0])
            self.owed[issued] = self.owed.get(issued, 0) + 1
        return problem

    def check_live(self, after: Mapping[str, Any]) -> str | None:
        """The live chunks after the step: fewer than ID_MAX, each counting no
        more reads than named it (chunks gone are forgotten)."""
        problem = None
        live = after.get("metadata", {})
        id_max = self.replayer.constants["ID_MAX"]
        if len(live) >= id_max:
            problem = (
                f"{len(live)} live chunks with ID_MAX {id_max}:"
                " the live id range is ambiguous (the next id is a live one)"
            )
        for key in [k for k in self.reads if live.get(k[0]) != k[1]]:
            del self.reads[key]
            self.owed.pop(key, None)
        for chunk_id, address in live.items():
            count = after.get("counts", {}).get(chunk_id)
            named = self.reads.get((chunk_id, address), [None, 0])[1]
            if count is not None and count > named and problem is None:
                problem = (
                    f"chunk id {chunk_id} at {address} has count {count} but "
                    f"only {named} read(s) named it"
                )
        return problem

    def closes(self, index: int, outcome: Outcome, spec_outcome: str) -> bool:
        """Does the store leave the counterexample here as the fixed protocol does?"""
        closing = self.closing
        if (
            closing is None
            or index != closing.step
            or not outcome.status == closing.fixed != spec_outcome
        ):
            return False
        self.closed = (
            f"closed at step {index}: {closing.call} is {closing.seed} in the seed's "
            f"protocol and {closing.fixed} in the fixed one, as in the store"
        )
        return True

    def record(
        self,
        index: int,
        action: Mapping[str, Any],
        spec_outcome: str,
        outcome: Outcome,
        after: Mapping[str, Any],
        problem: str | None,
        note: str,
    ) -> None:
        """The step as a row of the table and a step of the picture."""
        shown = outcome.status
        if vocabulary.action(action["name"]).places and outcome.status == "ok":
            shown = f"ok {_handle_text(tuple(outcome.result))}"  # the impl's own numbers
        said = ("VIOLATION: " + problem) if problem else note
        self.rows.append((index, describe(action), spec_outcome, shown, said))
        self.drawn.add(
            index,
            action,
            outcome.status,
            outcome.result,
            after,
            expected=None if spec_outcome.startswith("(") else spec_outcome,
            note=said,
            diverged=problem is not None,
            spec_state=self.spec_states.get(index),
        )


def settle(
    driver: Driver,
    replayer: Replayer,
    trace: tlc.Trace,
    stage: dict[Any, tuple[str, tuple[Any, ...]]],
    rows: list[Any],
    step: Any,
) -> str | None:
    """After a liveness counterexample: finish every read in flight, read
    every pending delivery, release touches and free (pinned() then judges)."""
    last = trace.states[-1]
    index = last.index + 1
    names = replayer.readers
    for reader in list(stage):
        if stage[reader][0] == "open":
            step(index, {"name": "get_copy", "reader": names[reader]}, "(settle)")
            index += 1
        step(index, {"name": "get_end", "reader": names[reader]}, "(settle)")
        index += 1
    inbox = last.vars.get("inbox", {})
    for name in names:
        bag = inbox.get(name, ()) if isinstance(inbox, Mapping) else ()
        for handle, copies in bag.items() if isinstance(bag, Mapping) else ():
            for _ in range(copies):
                reader = replayer.reader(name)
                step(index, {"name": "get_begin", "reader": name, "handle": handle}, "(settle)")
                index += 1
                if reader in stage:
                    step(index, {"name": "get_copy", "reader": name}, "(settle)")
                    step(index + 1, {"name": "get_end", "reader": name}, "(settle)")
                    index += 2
    for name in ("release_touches", "free_unused", "free_unused"):
        step(index, {"name": name}, "(settle)")
        index += 1
    return None


def pinned(
    driver: Driver,
    replayer: Replayer,
    done: Mapping[tuple[int, int], int],
    owed: Mapping[tuple[int, int], int],
    rows: list[Any],
) -> str | None:
    """After settle(): every live chunk whose every hand-out is done (a read
    begun on it and ended, whatever came of it, or dropped by the trace)
    must have gone. A chunk with a hand-out no reader took (one the store
    issued where the counterexample issued none) is still owed that read,
    as the protocol demands: it is not counted."""
    live = driver.observe().get("metadata", {})
    readers = len(replayer.readers)
    stuck = sorted(
        chunk_id
        for chunk_id, address in live.items()
        if (chunk_id, address) in owed
        and done.get((chunk_id, address), 0) >= owed[(chunk_id, address)] * readers
    )
    if not stuck:
        return None
    problem = (
        f"chunk(s) {stuck} stay pinned after every read is done "
        "(free_unused can never reclaim them)"
    )
    rows.append((rows[-1][0] + 1 if rows else 1, "(end)", "", "", "VIOLATION: " + problem))
    return problem


def copied_elsewhere(state: Mapping[str, Any] | None, reader: Any, handle: tuple[Any, ...]) -> bool:
    """Did the spec's copy (state after get_copy) read cells that hold
    another put's payload than the handle's key? A store whose serde then
    failed on those bytes read reused memory as surely as one that
    returned them (the serde's luck decides which)."""
    if state is None:
        return False  # a step after the counterexample (settle, count probe)
    rd = state.get("rd", {})
    read = rd.get(reader) if isinstance(rd, Mapping) else None
    copied = read.get("val") if isinstance(read, Mapping) else None
    if not copied:
        return False
    return any(owner != handle[0] for owner in copied)


def torn_read(handle: tuple[Any, ...], outcome: Outcome) -> str:
    return f"the read of {_handle_text(handle)} copied bytes reused under it ({outcome.result})"


def _handle_text(handle: tuple[Any, ...]) -> str:
    return "<<" + ", ".join(str(x) for x in handle) + ">>"
