"""Drive an implementation of the seed's API by action name, in model units.

One `Driver` owns one writer ring (and, for the storage, the writer storage
and R reader storages attached through its handle). Its methods carry the
spec's action names and take the spec's arguments in units, so that a TLC
trace step, a Hypothesis rule and a hand-written story all become the same
call. A unit is 16 bytes (DESIGN.md) unless the serde's framing does not fit
in one: then it is the smallest multiple of 16 bytes that holds the chunk
header, the count and the serde's smallest object (`unit_for`), so that
every chunk size of the model can be filled exactly by any serde.

`observe()` reads the implementation back in the spec's variables through
what the API shows (return values, `is_cached`, the ring's documented
position attributes when present), as black-box checkers judge a store from
its history: a store with another byte layout is judged like the seed.
Read counts are observed only when the store declares how to read them
(the optional hook `shmref_read_count`, shmref.contract) or when the caller
claims the seed's layout (`layout=True`: the segment's bytes, shmref.store.observe).
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import multiprocessing as mp
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, cast

from shmref.contract import (
    AFTER_NEXT_HOOK,
    DROP_AHEAD_HOOK,
    POSITIONS_HOOK,
    READ_COUNT_HOOK,
    RING_POSITIONS,
    SEND_AHEAD_HOOK,
    MissingCapability,
    has,
)
from shmref.core.vocabulary import classify
from shmref.store.observe import Segment
from shmref.store.readers import LocalReader, RemoteReader, close_despite_cycles
from shmref.store.values import (
    MD_SIZE,
    UNIT,
    driving_serde_class,
    store_unit,
    unit_for,
    value_for,
)

FORGED_SIGNATURE = [0] * 32
FOREIGN_SECRET = bytes(range(32))  # another storage's secret


@dataclass(frozen=True)
class Outcome:
    """What a step did: an outcome name of shmref.core.vocabulary ("ok",
    "stale", "rejected", ...; an exception of no listed type by its class
    name), and the step's result (or the exception's message)."""

    status: str
    result: Any = None


class Driver:
    """The implementation under test, stepped by spec action names."""

    def __init__(
        self,
        impl: ModuleType,
        n_units: int,
        *,
        n_readers: int = 0,
        id_max: int | None = None,
        max_obj: int | None = None,
        storage: bool = True,
        reader_processes: bool = False,
        serde_class: type | None = None,
        layout: bool = False,
    ) -> None:
        """`serde_class`: passed to the storage (default: the storage's own,
        or refimpl's msgpack-only one where the own frames in more than 16
        bytes: `driving_serde_class`); the unit is scaled to it. `layout`:
        the caller claims the seed's byte layout, so read counts may be read
        from the segment's bytes."""
        self.impl = impl
        self.n_units = n_units
        if storage:  # a store whose own serde is wide is driven with a narrow one
            serde_class = driving_serde_class(impl, serde_class)
        self.serde_class = serde_class
        self.unit = store_unit(impl, serde_class) if storage or serde_class else UNIT
        self.resources = ExitStack()
        self.ring = impl.SingleWriterShmRingBuffer(self.unit * n_units, create=True)
        # the writer's refused gets leave views of its segment in tracebacks' cycles
        self.resources.callback(close_despite_cycles, self.ring.close)
        self.segment: Segment | None = None
        if layout:
            self.segment = Segment(self.ring.handle())
            self.resources.callback(self.segment.close)
        if id_max is not None:
            if not has(self.ring, "ID_MAX"):
                self.close()
                raise MissingCapability("ring.ID_MAX")
            self.ring.ID_MAX = id_max
        self.chunks: dict[int, int] = {}  # ring model: live id -> byte address (from returns)
        self.placed: dict[str, tuple[int, int]] = {}  # key -> (address, id) last returned
        self.marked: set[int] = set()  # ring model: ids whose is_free_fn says yes
        self.writer: Any = None
        self.readers: list[LocalReader | RemoteReader] = []
        # issued (key, address, id) -> its signature
        self.signatures: dict[tuple[Any, ...], list[int]] = {}
        if storage:
            max_object_size = self.unit * (max_obj or n_units) - MD_SIZE
            # As vLLM builds them: the writer without a lock, the readers with one.
            serde = {} if serde_class is None else {"serde_class": serde_class}
            self.writer = impl.SingleWriterShmObjectStorage(
                max_object_size, n_readers, self.ring, **serde
            )
            self.reader_lock = mp.get_context("spawn").Lock()  # kept alive with the driver
            handle = copy.copy(self.writer.handle())
            self.serde = handle.serde_class()
            if unit_for(handle.serde_class) != self.unit:
                self.close()
                raise ValueError(
                    f"the storage's serde {handle.serde_class.__name__} needs "
                    f"{unit_for(handle.serde_class)}-byte units: pass it as serde_class"
                )
            handle.reader_lock = self.reader_lock
            self.handle = handle
            kind = RemoteReader if reader_processes else LocalReader
            for _ in range(n_readers):
                reader = kind(impl, handle)
                self.resources.callback(reader.close)
                self.readers.append(reader)
        self.value_keys: dict[str | bytes, str] = {}  # every value put -> its key

    def close(self) -> None:
        drop = getattr(self.writer, DROP_AHEAD_HOOK, None)
        if drop is not None:
            drop()  # an observation written behind a step that ended the test
        self.resources.close()

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- ring actions (spec/RingBuffer.tla) ------------------------------------

    def ring_call(
        self, action: str, args: tuple[Any, ...], marked: Iterable[int] = ()
    ) -> tuple[str, dict[str, Any]] | None:
        """The ring call (method, keyword arguments) that ring action `action`
        makes with `args` (and `marked` the ids marked free then), as the
        methods below make it; None for an action that makes none
        (mark_free), or any other (a storage's): what the replay of a ring
        trace names ahead (shmref.contract.SEND_AHEAD_HOOK)."""
        if self.writer is not None:
            return None  # clear is the storage's: not a ring call
        if action == "allocate_buf":
            return "allocate_buf", {"size": self.unit * args[0] - MD_SIZE}
        if action == "free_buf":
            return "free_buf", {"is_free_fn": FreeIds(set(marked)), "nbytes": self.unit * args[0]}
        if action == "clear":
            return "clear", {}
        return None

    def allocate_buf(self, size: int) -> Outcome:
        outcome = self._run(
            "allocate_buf", lambda: self._units(self.ring.allocate_buf(self.unit * size - MD_SIZE))
        )
        if outcome.status == "ok":
            self.marked.discard(outcome.result[1])  # a new chunk is not free yet
            self.chunks[outcome.result[1]] = self.unit * outcome.result[0]  # bytes, as placed
        return outcome

    def mark_free(self, id: int) -> Outcome:
        self.marked.add(id)
        return Outcome("ok")

    def free_buf(self, nbytes: int) -> Outcome:
        def free() -> list[int]:
            freed = list(self.ring.free_buf(FreeIds(self.marked), self.unit * nbytes))
            self.marked.difference_update(freed)
            for i in freed:
                self.chunks.pop(i, None)
            return freed

        return self._run("free_buf", free)

    # -- writer actions (spec/ShmObjectStorage.tla) ------------------------------

    def put(self, key: str, size: int) -> Outcome:
        value = value_for(key, size, self.serde, self.unit)
        if self.value_keys.get(value, key) != key:
            raise ValueError(f"keys {key!r} and {self.value_keys[value]!r} get the same value")
        returned: list[tuple[int, int]] = []
        outcome = self._run(
            "put", lambda: self._units(_keep(returned, self.writer.put(key, value)))
        )
        if returned:
            self.value_keys[value] = key
            self.placed.pop(key, None)  # keep `placed` in allocation (FIFO) order
            self._issue(key, returned[0])
        return outcome

    def get_cached(self, key: str) -> Outcome:
        returned: list[tuple[int, int]] = []
        outcome = self._run(
            "get_cached", lambda: self._units(_keep(returned, self.writer.get_cached(key)))
        )
        if returned:
            self._issue(key, returned[0])
        return outcome

    def touch(self, key: str) -> Outcome:
        return self._run("touch", lambda: self.writer.touch(key))

    def release_touches(self) -> Outcome:
        return self._run("release_touches", self.writer.release_touches)

    def free_unused(self) -> Outcome:
        return self._run("free_unused", self.writer.free_unused)

    def clear(self) -> Outcome:
        target = self.writer if self.writer is not None else self.ring
        outcome = self._run("clear", target.clear)
        self.marked.clear()
        self.chunks.clear()
        return outcome

    def writer_get(self, handle: tuple[Any, ...]) -> Outcome:
        """The writer reads one of its objects (`get` without a signature; the
        writer has no lock, as in vLLM, so the read is not counted)."""
        key, address, monotonic_id = handle
        outcome = self._run(
            "writer_get", lambda: self.writer.get(self.unit * address, monotonic_id)
        )
        if outcome.status == "ok":
            return Outcome("ok", self.value_keys.get(outcome.result, "<foreign>"))
        return outcome

    # -- reader actions -----------------------------------------------------------

    def reader_touch(self, reader: int, handle: tuple[Any, ...]) -> Outcome:
        """A reader's `touch` (the receiver cache's): validates the handle,
        counts nothing."""
        key, address, monotonic_id = handle
        signature = self.signatures.get(tuple(handle), FORGED_SIGNATURE)
        return self._run(
            "reader_touch",
            lambda: self.readers[reader].touch(key, self.unit * address, monotonic_id, signature),
        )

    def get_begin_foreign(self, reader: int, handle: tuple[Any, ...]) -> Outcome:
        """A read of a handle signed by another storage: the same key, address
        and id, signed (as the seed documents: HMAC-SHA256 of sha256(key),
        address, id) with another segment's secret."""
        key, address, monotonic_id = handle
        payload = (
            hashlib.sha256(key.encode()).digest()
            + (self.unit * address).to_bytes(8, "little")
            + monotonic_id.to_bytes(4, "little")
        )
        signature = list(hmac.new(FOREIGN_SECRET, payload, hashlib.sha256).digest())
        return self._run(
            "get_begin_foreign",
            lambda: self.readers[reader].begin(self.unit * address, monotonic_id, signature, key),
        )

    # -- reader actions: a read in three steps -----------------------------------

    def get_begin(self, reader: int, handle: tuple[Any, ...]) -> Outcome:
        """`handle` = (key, address, id) in units; unissued handles are forged.
        A refused read is "rejected" (signature) or "stale" (id check)."""
        key, address, monotonic_id = handle
        signature = self.signatures.get(tuple(handle), FORGED_SIGNATURE)
        return self._run(
            "get_begin",
            lambda: self.readers[reader].begin(self.unit * address, monotonic_id, signature, key),
        )

    def get_copy(self, reader: int, fail: bool = False) -> Outcome:
        """`fail` makes this copy's deserialization fail, as a corrupt or
        unexpected object would (the spec's COPY_FAIL)."""
        return self._run("get_copy", lambda: self.readers[reader].copy(fail=fail))

    def get_end(self, reader: int) -> Outcome:
        """Ends the read; an ok result is the key whose value came back
        (or "<foreign>" for bytes that are no key's value)."""
        outcome = self._run("get_end", self.readers[reader].end)
        if outcome.status == "ok":
            return Outcome("ok", self.value_keys.get(outcome.result, "<foreign>"))
        return outcome

    # -- observation -------------------------------------------------------------

    def observe(self) -> dict[str, Any]:
        """The implementation's state in the spec's variables and units,
        through the API: the ring's documented position attributes (if it
        has them), which keys `is_cached` (at the address and id that put or
        get_cached returned), and, only if declared or claimed (module
        docstring), the read counts."""
        writer = self.writer
        # is_cached first: a program's last reply then carries the ring's
        # state (reply.ring_state), which the positions read without asking
        placed = self._still_cached(writer) if writer is not None else {}
        state: dict[str, Any] = {}
        for name, value in self._positions(self.ring).items():
            state[name] = self._scaled(value) if name.startswith("data") else value
        if writer is None:
            live = dict(self.chunks)
        else:
            state["key_index"] = {k: (self._scaled(a), i) for k, (a, i) in placed.items()}
            live = {i: a for a, i in placed.values()}
        state["metadata"] = {i: self._scaled(a) for i, a in live.items()}
        count = self.count_reader()
        if writer is not None and count is not None:
            state["counts"] = {i: count(a) for i, a in live.items()}
        return state

    @staticmethod
    def _positions(ring: Any) -> dict[str, Any]:
        """The ring's documented positions it has: each read once
        (contract.has's rule: a property that raises is missing), or all
        four from a ring in another process at once (POSITIONS_HOOK: the
        same values; if it raises, each is read as any ring's)."""
        hook = getattr(ring, POSITIONS_HOOK, None)
        if hook is not None:
            try:
                found: dict[str, Any] = hook()
                return found
            except Exception:  # noqa: S110 - read one by one below, as any ring's
                pass
        positions = {}
        for name in RING_POSITIONS:
            try:
                positions[name] = getattr(ring, name)
            except Exception:
                continue
        return positions

    # the actions whose last request to the writer's program is one the
    # observation may follow (shmref.process.ahead.FOLLOWED), the only one
    # such: put and get_cached end with get_signature, a reader's get_begin
    # and touch come after its verify_signature
    OBSERVED_BEHIND = frozenset(
        {
            "put",
            "get_cached",
            "touch",
            "release_touches",
            "free_unused",
            "clear",
            "writer_get",
            "reader_touch",
            "get_begin",
            "get_begin_foreign",
            "get_copy",
            "get_end",
        }
    )

    @contextmanager
    def observed_after(self, action: str) -> Iterator[None]:
        """Around a step that `observe` follows (a state-machine rule's last,
        a replay's): to a store in another process, if the action is one of
        OBSERVED_BEHIND, the observation's `is_cached` calls (of the keys
        placed then: a put's included) are written behind the step's last
        request (AFTER_NEXT_HOOK), not a round trip after it. The same calls
        in the same order; dropped (`close`) if the step ends the test."""
        after = getattr(self.writer, AFTER_NEXT_HOOK, None)
        if after is None or action not in self.OBSERVED_BEHIND:
            yield
            return
        after(lambda: [("is_cached", {"key": k}) for k in self.placed])
        try:
            yield
        finally:
            after(None)  # forgotten if the step made no such request

    def _still_cached(self, writer: Any) -> dict[str, tuple[int, int]]:
        """The keys placed that `is_cached` still finds: one call each, named
        together first to a store in another process (SEND_AHEAD_HOOK), so
        that they travel together instead of a round trip each."""
        keys = list(self.placed)
        send = getattr(writer, SEND_AHEAD_HOOK, None) if len(keys) > 1 else None
        if send is not None:
            send([("is_cached", {"key": k}) for k in keys])
        try:
            return {k: self.placed[k] for k in keys if writer.is_cached(k)}
        finally:
            drop = getattr(writer, DROP_AHEAD_HOOK, None) if send is not None else None
            if drop is not None:
                drop()  # none left, unless an is_cached raised

    def count_reader(self) -> Callable[[int], int] | None:
        """How to read the count of the chunk at a byte address: the store's
        declared hook, else the seed's layout if claimed, else None."""
        hook = getattr(self.writer, READ_COUNT_HOOK, None)
        if callable(hook):
            return lambda address: int(hook(address))
        return self.segment.count if self.segment is not None else None

    # -- helpers -----------------------------------------------------------------

    def _issue(self, key: str, placed: tuple[int, int]) -> None:
        self.placed[key] = placed
        handle = (key, self._scaled(placed[0]), placed[1])
        self.signatures[handle] = self.writer.get_signature(key)

    def _units(self, pair: tuple[int, int]) -> tuple[int, int]:
        address, monotonic_id = pair
        return self._scaled(address), monotonic_id

    def _scaled(self, byte_address: int) -> int:
        if byte_address % self.unit:
            raise ValueError(f"address {byte_address} is not a whole number of units")
        return byte_address // self.unit

    @staticmethod
    def _run(action: str, step: Callable[[], Any]) -> Outcome:
        """Run one action's call; what it raised is named by shmref.core.vocabulary
        (by its type and the kind of step, never by its message)."""
        try:
            return Outcome("ok", step())
        except (ValueError, MemoryError, KeyError) as exc:
            return Outcome(classify(action, exc), str(exc))


class FreeIds:
    """free_buf's predicate of the ring model: a chunk may be freed when its
    id is marked free (whatever its bytes). It says so (FREE_IDS_HOOK): a
    store in another process is sent the ids rather than asked about each
    chunk."""

    def __init__(self, ids: set[int]) -> None:
        self.ids = ids  # the driver's own set: read when the call is made

    def __call__(self, chunk_id: int, _buf: Any) -> bool:
        return chunk_id in self.ids

    @property
    def shmref_free_ids(self) -> frozenset[int]:  # FREE_IDS_HOOK
        return frozenset(self.ids)


def _keep(into: list[tuple[int, int]], pair: Any) -> tuple[int, int]:
    """Record a returned (address, id) before it is scaled (which may fail)."""
    into.append((pair[0], pair[1]))
    return cast(tuple[int, int], pair)  # as returned: scaling checks it
