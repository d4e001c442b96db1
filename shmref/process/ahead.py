"""Requests sent ahead (docs/protocol.md, `request.pipeline`): the replay of a
ring trace knows its next requests before it has the replies to the last
ones, so it writes them together and reads the replies one by one as its
steps ask for them; a round trip per step is what a program's replay cost.
Likewise the observation after a state machine's step (the `is_cached` of
each key placed) is written behind that step's last request (FOLLOWED).

Only what the oracle would have sent anyway is sent ahead, in the order it
would have sent it; a `free_buf` goes last (the answers to its callbacks are
the next lines the program reads). When a replay stops (it diverged), the
requests left are dropped: their replies are read and thrown away, and a
failure of the program there (a crash, a hang, a bad line) is nobody's, as
those requests would never have been sent one at a time: the copy is
stopped quietly and the next request starts another.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple, NoReturn, Protocol

from shmref.process import segments, shmwatch
from shmref.process.messages import (
    REQUEST_PIPELINE,
    ProgramFailure,
    ProtocolError,
    as_version,
    line_of,
)
from shmref.process.states import RingStates

AHEAD_MAX = 64  # requests in flight at once
# bytes of requests written at once: one page, the least a pipe holds, so the
# write never waits for a program that is itself waiting to write its replies
AHEAD_BYTES = 4096
CALLS_BACK = frozenset({"free_buf"})  # asks is_free (unless sent its free_ids)
# the last requests of the steps (shmref.store.driver.Driver.OBSERVED_BEHIND)
# that what comes right after them may be written behind (AFTER_NEXT_HOOK);
# another request meanwhile (a put before its get_signature, a reader's
# verify_signature, a finalizer's close, a picture's ring_state) goes alone
FOLLOWED = frozenset(
    {
        "touch",
        "release_touches",
        "free_unused",
        "clear",
        "get",
        "get_copy",
        "get_end",
        "get_begin",
        "get_signature",
    }
)


class Queued(NamedTuple):
    """A request sent ahead, its reply not read yet."""

    rid: int
    op: str
    target: str | None
    arguments: dict[str, Any]


class AheadMismatch(RuntimeError):
    """The oracle asked for another request than the one it sent ahead: its
    own mistake (the program has run what was sent), never the program's."""


class Program(Protocol):
    """What of a program's conversation (shmref.process.channel.Program) this uses."""

    spec: str
    lock: threading.RLock
    capabilities: frozenset[str]
    dead: str | None
    next_id: int
    in_flight: int
    version: int
    generation: int
    states: RingStates
    ledger: segments.Ledger

    def record(self, direction: str, message: Any) -> None: ...
    def write(self, data: bytes, rid: Any, op: Any) -> None: ...
    def fail(self, failure: ProgramFailure) -> NoReturn: ...
    def send_deferred(self) -> None: ...
    def converse(
        self,
        rid: int,
        op: str,
        callback: Callable[[dict[str, Any]], Any] | None,
        target: str | None = None,
    ) -> Any: ...


class Ahead:
    """The requests one program has been sent ahead (its Program's `ahead`)."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.queued: deque[Queued] = deque()
        self.window: shmwatch.Window | None = None  # open while some are in flight
        self.quiet = False  # dropping what was sent ahead: a failure is nobody's

    def __bool__(self) -> bool:
        return bool(self.queued)

    def send(self, target: str, calls: list[tuple[str, dict[str, Any]]]) -> int:
        """Write the first of `calls` on `target` (op, arguments) now, as
        many as one write takes and up to a `free_buf`; how many were sent
        (0: the program does not offer request.pipeline, or some are still
        in flight)."""
        prog = self.program
        with prog.lock:
            if REQUEST_PIPELINE not in prog.capabilities or self.queued or prog.dead:
                return 0
            prog.in_flight += 1  # a finalizer's close waits (it would take an id meanwhile)
            try:
                return self.write(target, calls)
            finally:
                prog.in_flight -= 1
                if not prog.in_flight and not self.queued:
                    prog.send_deferred()

    def write(self, target: str, calls: list[tuple[str, dict[str, Any]]]) -> int:
        """The lines of `send`, written (its caller holds the program's lock)."""
        prog = self.program
        lines: list[str] = []
        size = 0
        for op, arguments in calls[:AHEAD_MAX]:
            message = {"type": "request", "id": prog.next_id + 1, "op": op, "object": target}
            message = as_version({**message, **arguments}, prog.version)
            line = line_of(message)
            if lines and size + len(line) > AHEAD_BYTES:
                break
            prog.next_id += 1
            prog.record("out", message)
            self.queued.append(Queued(prog.next_id, op, target, arguments))
            lines.append(line)
            size += len(line)
            if op in CALLS_BACK and "free_ids" not in arguments:
                break  # it asks is_free: the answers must be the next lines
        if lines:
            self.window = shmwatch.window()
            prog.write("".join(lines).encode("utf-8"), self.queued[0].rid, self.queued[0].op)
        return len(lines)

    def take(self, op: str, target: str | None, arguments: dict[str, Any]) -> int | None:
        """The id of the request sent ahead that this one is (None: none is
        waiting); any other request while some wait is the oracle's mistake."""
        if not self.queued:
            return None
        head = self.queued[0]
        if (head.op, head.target, head.arguments) != (op, target, arguments):
            raise AheadMismatch(
                f"{self.program.spec}: the oracle asked for {op} on {target} {arguments} while "
                f"{head.op} on {head.target} {head.arguments} (request {head.rid}) was sent ahead"
            )
        self.queued.popleft()
        return head.rid

    def must_carry(self, target: str | None, rid: int) -> None:
        """A reply to a request sent ahead carries its ring's state: the
        oracle cannot ask `ring_state` between requests already sent."""
        prog = self.program
        ring = prog.states.ring_of(target)
        if ring is not None and prog.states.now(ring, prog.generation) is None:
            prog.fail(
                ProtocolError(
                    f"{prog.spec}: the reply to request {rid}, sent ahead "
                    f"({REQUEST_PIPELINE}), carries no ring_state"
                )
            )

    def drop(self) -> None:
        """The requests sent ahead that the oracle will not ask for (its
        replay stopped): their replies read and dropped, whatever they are."""
        prog = self.program
        with prog.lock:
            if not self.queued:
                return
            self.quiet = True
            prog.in_flight += 1  # a finalizer's close waits for the last reply read
            try:
                while self.queued and not prog.dead:
                    dropped = self.queued.popleft()
                    prog.generation += 1
                    try:
                        prog.converse(dropped.rid, dropped.op, never_free, dropped.target)
                    except ProgramFailure:
                        break  # stopped quietly: the next request starts another copy
                    except Exception:  # noqa: S112 - its error reply: nobody asked
                        continue
            finally:
                self.quiet = False
                prog.in_flight -= 1
                self.queued.clear()
                self.done()
                if not prog.in_flight:
                    prog.send_deferred()

    def done(self) -> None:
        """Once nothing is in flight: what the program made in /dev/shm
        since the requests were sent is accounted for."""
        if not self.queued and self.window is not None:
            window, self.window = self.window, None
            self.program.ledger.note(window.created())


def never_free(_callback: dict[str, Any]) -> bool:
    """is_free for a free_buf nobody asked for: free nothing."""
    return False
