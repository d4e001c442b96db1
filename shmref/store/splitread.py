"""A read in three steps (get_begin, get_copy, get_end) on any implementation.

refimpl has the three methods. An implementation that only has the seed's
`get` is read through its own `get`, held at its serde: the reader storage
is built with a serde class of ours (`CutSerde`, wrapping the handle's),
and `get` runs in a thread that stops when it calls `deserialize` (its
checks are done: get_begin) and again when deserialize has read the bytes
(get_copy); get_end lets it finish (its count). So the writer acts between
the steps exactly where the spec cuts a read, and what the segment's bytes
mean stays the store's business: no object layout is assumed (the seed's
`[count][serde bytes]` is the seed-layout level's claim, not the contract).
A store whose `get` never calls the handle's serde cannot be cut: its
split-read properties are `not run: missing` (MissingCapability); nor can a
program's (shmref.process): its `get` has copied and counted before the
proxy's serde is called, so it offers the three steps or they are not run.

A reader's signature check runs as its own step first (`check_signature`,
on every implementation), so that a refused handle is told from a stale one
by where the ValueError was raised, not by its message: a ValueError of
`verify_signature` becomes shmref.core.vocabulary.HandleRejected.
"""

from __future__ import annotations

import queue
import threading
import traceback
from typing import Any

from shmref.contract import MissingCapability, has, split_read_missing
from shmref.core.vocabulary import HandleRejected, InjectedCopyFailure, TornCopy

WAIT = 120.0  # seconds a step waits for the reading thread
UNCUT = (
    "a split read: storage.get_begin/get_copy/get_end, or a get that deserializes "
    "through the handle's serde_class"
)


class ReadAbandoned(Exception):
    """Raised inside a held `get` whose read will not be ended."""


class Gate:
    """Where a held `get` waits: `events` from the reading thread, `go` to it."""

    def __init__(self) -> None:
        self.events: queue.Queue[str] = queue.Queue()
        self.go: queue.Queue[str] = queue.Queue()
        self.serde_raised: BaseException | None = None  # what the wrapped serde raised

    def arrive(self, stage: str) -> None:
        """Called in the reading thread: say where it is, wait to go on."""
        self.events.put(stage)
        try:
            command = self.go.get(timeout=10 * WAIT)
        except queue.Empty:
            command = "abort"
        if command == "abort":
            raise ReadAbandoned(f"read abandoned at {stage}")


class CutSerde:
    """A serde class (subclassed per reader by `cut_serde`) that behaves as
    `inner`, fails one copy when `fail` is set (the spec's COPY_FAIL), and
    holds a split read's `get` at its deserialize while `gate` is set."""

    inner: type
    fail = False
    gate: Gate | None = None
    held: list[HeldRead] = []  # this reader's reads, each until it is over or abandoned

    def __init__(self) -> None:
        self.serde = self.inner()

    def serialize(self, value: Any) -> Any:
        return self.serde.serialize(value)

    def deserialize(self, data: Any) -> Any:
        gate = type(self).gate
        if gate is not None:
            gate.arrive("copy")
        if type(self).fail:
            raise InjectedCopyFailure("injected deserialize failure")
        try:
            value = self.serde.deserialize(data)
        except Exception as exc:  # the bytes did not decode: the store's get may handle it
            if gate is not None:
                gate.serde_raised = exc
            raise
        if gate is not None:
            gate.arrive("end")
        return value


def cut_serde(inner: type) -> type[CutSerde]:
    """A CutSerde class of its own for one reader storage."""
    name = f"Cut{getattr(inner, '__name__', 'Serde')}"
    return type(name, (CutSerde,), {"inner": inner, "fail": False, "gate": None, "held": []})


class HeldRead:
    """An in-flight read: the store's own `get` in a thread, held at its serde."""

    def __init__(self, storage: Any, serde_class: type[CutSerde], args: tuple[Any, ...]) -> None:
        self.serde_class, self.gate = serde_class, Gate()
        self.outcome: tuple[bool, Any] | None = None  # (returned, value or exception)
        self.done = False
        serde_class.gate = self.gate
        self.thread = threading.Thread(target=self._run, args=(storage, args), daemon=True)
        serde_class.held = [r for r in serde_class.held if r.running()] + [self]
        self.thread.start()

    def running(self) -> bool:
        thread: threading.Thread = self.thread
        return thread.is_alive()

    def _run(self, storage: Any, args: tuple[Any, ...]) -> None:
        try:
            self.outcome = (True, storage.get(*args))
        except BaseException as exc:  # handed to the step that waits for it
            # its frames hold the store's views of the segment: drop them, or
            # the segment could not be closed while the exception is kept
            traceback.clear_frames(exc.__traceback__)
            self.outcome = (False, exc.with_traceback(None))
        finally:
            self.gate.events.put("done")

    def wait(self) -> str:
        if self.done:  # the get is over: what it gave, again
            return self.finished()
        try:
            stage = self.gate.events.get(timeout=WAIT)
        except queue.Empty:
            raise TimeoutError(f"the store's get gave no sign in {WAIT:.0f} s") from None
        if stage == "done":
            self.done, self.serde_class.gate = True, None
            return self.finished()
        return stage

    def finished(self) -> str:
        assert self.outcome is not None
        returned, result = self.outcome
        if not returned:
            raise result
        return "done"

    def step(self) -> Any:
        """Let the held get go on to its next stop (or its end)."""
        if not self.done:
            self.gate.go.put("go")
        return self.wait()

    def copy(self) -> None:
        """The held get deserializes: its serde's own exception coming out of
        the get unchanged is no refusal of the store's (TornCopy)."""
        try:
            self.step()
        except Exception as exc:
            if exc is not self.gate.serde_raised:
                raise
            raise TornCopy(
                f"its serde could not decode the bytes: {type(exc).__name__}: {exc}"
            ) from exc

    def end(self) -> Any:
        if self.step() != "done":
            raise RuntimeError("the store's get deserialized twice in one read")
        assert self.outcome is not None
        return self.outcome[1]

    def close(self) -> None:
        if not self.done and self.thread.is_alive():
            self.gate.go.put("abort")
            self.thread.join(WAIT)
        self.serde_class.gate = None


def check_signature(
    storage: Any, address: int, monotonic_id: int, signature: Any, key: Any
) -> bool:
    """A reader's signature check as its own step: a ValueError of the
    implementation's `verify_signature` is raised as HandleRejected. False
    when the check could not run (no `verify_signature`); a writer checks
    no signature (True)."""
    if storage.is_writer:
        return True
    if not has(storage, "verify_signature"):
        return False
    try:
        storage.verify_signature(key, address, monotonic_id, signature)
    except HandleRejected:
        raise
    except ValueError as exc:
        raise HandleRejected(str(exc)) from exc
    return True


def unnamed_refusal(checked: bool, exc: ValueError) -> None:
    """Raise MissingCapability for a refusal that cannot be named rejected
    or stale: the signature could not be checked apart (no `verify_signature`)."""
    if not checked and not isinstance(exc, HandleRejected):
        raise MissingCapability(
            "storage.verify_signature (to tell a rejected handle from a stale one)"
        ) from exc


def touch(storage: Any, key: Any, address: int, monotonic_id: int, signature: Any) -> Any:
    """A reader's touch (validate a handle), its signature checked first."""
    checked = check_signature(storage, address, monotonic_id, signature, key)
    try:
        return storage.touch(key, address, monotonic_id, signature)
    except ValueError as exc:
        unnamed_refusal(checked, exc)
        raise


def native(storage: Any) -> bool:
    return all(has(storage, n) for n in ("get_begin", "get_copy", "get_end"))


def begin(
    storage: Any,
    address: int,
    monotonic_id: int,
    signature: Any,
    key: Any,
    *,
    serde_class: type[CutSerde] | None = None,
) -> Any:
    """Start a read. `serde_class`: the CutSerde class the reader storage was
    built with (needed only when the store has no split read of its own)."""
    checked = check_signature(storage, address, monotonic_id, signature, key)
    if native(storage):
        try:
            return storage.get_begin(address, monotonic_id, signature, key)
        except ValueError as exc:
            unnamed_refusal(checked, exc)
            raise
    lacking = split_read_missing(storage)
    if serde_class is None or lacking:  # a program's get: its serde runs after the count
        raise MissingCapability(lacking or UNCUT)
    read = HeldRead(storage, serde_class, (address, monotonic_id, signature, key))
    try:
        stage = read.wait()
    except ValueError as exc:
        unnamed_refusal(checked, exc)
        raise
    if stage == "done":  # get returned without calling the serde: no place to cut
        raise MissingCapability(UNCUT)
    return read


def copy(storage: Any, read: Any) -> None:
    if isinstance(read, HeldRead):
        read.copy()
    else:
        storage.get_copy(read)


def end(storage: Any, read: Any) -> Any:
    if isinstance(read, HeldRead):
        return read.end()
    return storage.get_end(read)


def abandon(read: Any) -> None:
    """Release a read that will not be ended (its view must not pin the segment)."""
    read.close()


def abandon_all(serde_class: Any) -> None:
    """Before a reader storage closes: every held read of its serde class whose
    thread still waits is abandoned, wherever the read was lost track of (a
    waiting get holds views of the segment, and a segment with views cannot
    be closed)."""
    for read in getattr(serde_class, "held", []):
        read.close()
    if isinstance(serde_class, type) and issubclass(serde_class, CutSerde):
        serde_class.held = []
