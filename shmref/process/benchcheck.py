"""A program's speed at its own pace (docs/protocol.md, "The bench request"):
the oracle gives the program a writer storage, the program runs the put+get
loop and times it by its own clock, and reference readers in another
process then check that every object it reported is in its segment, so
that the seconds it reports are for work it did.

Through the protocol's ordinary requests every put crosses a pipe as JSON
with base64 bytes: measured that way, a store in another language is the
speed of our pipe (bench/ruststore.py shows both). Here nothing crosses the
pipe during the loop, and nothing the program claims is taken on trust:

- one handle per put, `count` of them, their ids all different (N live
  chunks at once: the ring holds every object, nothing is freed);
- 0 < seconds <= the request's round trip as the oracle timed it;
- in a reader process (refimpl's reader: the seed's layout), each
  object's read count is at least 1 (the program's own get counted it),
  and a `get` with the handle and its signature returns the metadata then
  value i (benchloop.value_of).

A program that fails any of these is `UncheckedWork`, one line naming the
first objects that do not check.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import math
import multiprocessing as mp
import time
from contextlib import suppress
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from refimpl.serde import ObjectSerde
from shmref.process.benchloop import Placed, key_of, pattern, value_of
from shmref.process.channel import Program

__all__ = ["CAPABILITY", "Bench", "Checkers", "OwnPace", "UncheckedWork", "own_pace"]

CAPABILITY = "bench"
# What the oracle asks the program to put before each value: refimpl's
# msgpack-only serde's mark for bytes stored as they are (the bench's serde,
# bench.common.BENCH_SERDE), so the objects are those a Python writer with
# that serde makes of the same values.
METADATA = b"\x01"
DATA_OFFSET, HEADER, COUNT = 32, 8, 4  # the seed's layout: secret, chunk header, read count
SHOWN = 3  # objects named in an UncheckedWork's line
CTX = mp.get_context("spawn")


class UncheckedWork(Exception):
    """What the program reported is not what its segment holds (one line)."""


@dataclass(frozen=True)
class OwnPace:
    """One bench request: the program's seconds, and the oracle's round trip
    (the same loop plus the request and its reply crossing the pipe)."""

    count: int
    size: int
    seconds: float
    round_trip: float

    @property
    def rate(self) -> float:
        """put+get per second by the program's clock."""
        return self.count / self.seconds


class WholeObject(ObjectSerde):
    """A reader's serde that returns the object's bytes after its count as
    they are (metadata included), for comparing them byte for byte."""

    def serialize(self, value: Any) -> tuple[Any, int, bytes, int]:
        raise TypeError("a reference reader stores nothing")

    def deserialize(self, data: memoryview) -> bytes:
        return bytes(data)


def check_objects(
    readers: str,
    lock: Any,
    storage: tuple[int, int, list[Any]],
    prefix: str,
    size: int,
    placed: list[Placed],
) -> list[str]:
    """In a reader process: what is wrong with the objects `placed` in the
    segment (`storage`: max_object_size, n_readers, [data_buffer_size,
    name]); empty when every one checks."""
    from refimpl.handle import ShmObjectStorageHandle
    from refimpl.segment import attach_untracked

    max_object_size, n_readers, (buffer_size, name) = storage
    impl = importlib.import_module(readers)
    handle = ShmObjectStorageHandle(
        max_object_size, n_readers, (buffer_size, name), WholeObject, lock
    )
    reader = impl.SingleWriterShmObjectStorage.create_from_handle(handle)
    segment = attach_untracked(name)
    made, problems = pattern(size), []
    try:
        view = memoryview(segment.buf or b"")
        for index, (address, monotonic_id, signature) in enumerate(placed):
            key = key_of(prefix, index)
            at = DATA_OFFSET + address % buffer_size + HEADER
            count = int.from_bytes(view[at : at + COUNT], "little", signed=True)
            if count < 1:
                problems.append(f"{key!r}: read count {count}, its own get did not count it")
            try:
                got = reader.get(address, monotonic_id, list(signature), key)
            except Exception as exc:  # the reader refused the handle: what it said
                problems.append(
                    f"{key!r}: get({address}, {monotonic_id}): {type(exc).__name__}: {exc}"
                )
            else:
                if got != METADATA + value_of(made, index, size):
                    problems.append(f"{key!r}: other bytes ({len(got)}: {got[:12]!r}...)")
            if len(problems) >= SHOWN:
                break
        view.release()
    finally:
        reader.close()
        segment.close()
    return problems


def _serve(conn: Connection, lock: Any, readers: str) -> None:
    """A reference reader's process: check what it is sent until told to stop."""
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        try:
            conn.send(("ok", check_objects(readers, lock, *job)))
        except Exception as exc:  # a reader that cannot attach: said, not raised here
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class Checkers:
    """Reference readers in other processes (spawned once, reused), each of
    which checks every object of a bench request."""

    def __init__(self, count: int = 1, readers: str = "refimpl") -> None:
        self.lock = CTX.Lock()
        self.readers = readers
        self.workers: list[tuple[Connection, Any]] = []
        try:
            for _ in range(count):
                ours, theirs = CTX.Pipe()
                proc = CTX.Process(target=_serve, args=(theirs, self.lock, readers), daemon=True)
                proc.start()
                theirs.close()
                self.workers.append((ours, proc))
        except BaseException:
            self.close()
            raise

    def check(
        self, storage: tuple[int, int, list[Any]], prefix: str, size: int, placed: list[Placed]
    ) -> list[str]:
        """Every reader's problems with the objects `placed` (empty: all check)."""
        for conn, _ in self.workers:
            conn.send((storage, prefix, size, placed))
        problems: list[str] = []
        for conn, proc in self.workers:
            while not conn.poll(0.5):
                if not proc.is_alive():
                    raise RuntimeError(f"a reference reader exited with code {proc.exitcode}")
            status, found = conn.recv()
            if status != "ok":  # e.g. a segment not of the seed's layout
                raise UncheckedWork(f"{self.readers}'s reader cannot read the segment: {found}")
            problems += [p for p in found if p not in problems]
        return problems

    def close(self) -> None:
        """Each reader told to stop, and killed if it has not within 5 s."""
        for conn, _ in self.workers:
            with suppress(OSError):
                conn.send(None)
        for conn, proc in self.workers:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
            conn.close()
        self.workers = []


def ring_size(count: int, size: int) -> int:
    """A data buffer that holds `count` objects of `size` bytes with room to
    spare (chunk header, read count, metadata): nothing needs freeing."""
    return (count + 2) * (HEADER + COUNT + len(METADATA) + size + 8)


def _placed(program: Program, result: Any, count: int, seconds: float) -> list[Placed]:
    """The reply's handles, if it has the shape the page gives it."""
    what = f"{program.spec}: the bench reply"
    if not isinstance(result, dict) or set(result) != {"seconds", "handles"}:
        raise UncheckedWork(f"{what} is not {{seconds, handles}}: {str(result)[:200]}")
    said, handles = result["seconds"], result["handles"]
    if type(said) not in (int, float) or not math.isfinite(said) or said <= 0:
        raise UncheckedWork(f"{what}: seconds must be a positive number, not {said!r}")
    if said > seconds:
        raise UncheckedWork(
            f"{what} says {said:.6g} s, more than the request took ({seconds:.6g} s)"
        )
    if not isinstance(handles, list) or len(handles) != count:
        got = len(handles) if isinstance(handles, list) else type(handles).__name__
        raise UncheckedWork(f"{what} has {got} handles for {count} puts")
    placed: list[Placed] = []
    for index, handle in enumerate(handles):
        try:
            address, monotonic_id, signature = handle
            sig = base64.b64decode(signature, validate=True)
            if type(address) is not int or type(monotonic_id) is not int or len(sig) != 32:
                raise ValueError
        except (TypeError, ValueError, binascii.Error):
            raise UncheckedWork(
                f"{what}: handle {index} is not [address, monotonic_id, base64 signature]: "
                f"{str(handle)[:120]}"
            ) from None
        placed.append((address, monotonic_id, sig))
    ids = [monotonic_id for _, monotonic_id, _ in placed]
    if len(set(ids)) != len(ids):
        raise UncheckedWork(f"{what} gives one monotonic id to several puts: not {count} objects")
    return placed


class Bench:
    """A writer storage of the program's for bench requests: a ring that
    holds `count` objects of `size` bytes, made once (so that a request after
    the first writes pages already mapped: the store is measured, not the
    kernel's zeroing of fresh ones), cleared after each request."""

    def __init__(self, program: Program, size: int, count: int, checkers: Checkers) -> None:
        self.program, self.size, self.count, self.checkers = program, size, count, checkers
        self.max_object_size = COUNT + len(METADATA) + size
        made = program.request(
            "create_ring", data_buffer_size=ring_size(count, size), name=None, create=True
        )
        self.ring, self.handle = made["ring"], made["handle"]
        try:
            self.storage = program.request(
                "create",
                ring=self.ring,
                max_object_size=self.max_object_size,
                n_readers=1,
                reader_lock=False,
            )["storage"]
        except BaseException:
            self.close()
            raise

    def run(self, prefix: str) -> OwnPace:
        """One bench request, its work checked, then the storage cleared;
        UncheckedWork if the work does not check."""
        program = self.program
        start = time.perf_counter()
        result = program.request(
            "bench",
            self.storage,
            prefix=prefix,
            count=self.count,
            size=self.size,
            metadata=base64.b64encode(METADATA).decode(),
        )
        round_trip = time.perf_counter() - start
        placed = _placed(program, result, self.count, round_trip)
        storage = (self.max_object_size, 1, self.handle)
        problems = self.checkers.check(storage, prefix, self.size, placed)
        if problems:
            raise UncheckedWork(
                f"{program.spec}: the objects it reported are not in its segment as reported "
                f"(checked by {self.checkers.readers}'s reader): " + "; ".join(problems[:SHOWN])
            )
        program.request("clear", self.storage)
        return OwnPace(self.count, self.size, float(result["seconds"]), round_trip)

    def close(self) -> None:
        """The ring closed (its segment unlinked), unless the program is gone."""
        if not self.program.dead:
            self.program.request("close", self.ring)


def own_pace(program: Program, size: int, count: int, checkers: Checkers, prefix: str) -> OwnPace:
    """One bench request on a fresh storage of `program`'s, closed after it."""
    bench = Bench(program, size, count, checkers)
    try:
        return bench.run(prefix)
    finally:
        bench.close()
