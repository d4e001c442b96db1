"""Drive an implementation of the seed's API by action name, in model units.

One `Driver` owns one writer ring (and, for the storage, the writer storage
and R reader storages attached through its handle). Its methods carry the
spec's action names and take the spec's arguments in units (DESIGN.md:
1 unit = 16 bytes), so a TLC trace step, a Hypothesis rule and a hand-written
story all become the same call. `observe()` reads the implementation back in
the spec's variables, for comparison with a model state.
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
from contextlib import ExitStack
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from shmref import splitread
from shmref.readers import ReaderProcess

UNIT = 16  # bytes per model unit: twice the 8-byte chunk header
MD_SIZE = 8
FLAG_BYTES = 4
FORGED_SIGNATURE = [0] * 32


@dataclass(frozen=True)
class Outcome:
    """What a step did: "ok", or the exception class's name (plus "stale" /
    "rejected" for reads refused at get_begin), and the step's result."""

    status: str
    result: Any = None


class LocalReader:
    """A reader storage in this process, attached through the writer's handle."""

    def __init__(self, impl: ModuleType, handle: Any) -> None:
        self.storage = impl.SingleWriterShmObjectStorage.create_from_handle(handle)
        self.read: Any = None

    def begin(self, *args: Any) -> None:
        self.abandon()
        self.read = splitread.begin(self.storage, *args)

    def copy(self, fail: bool = False) -> None:
        if not fail:
            splitread.copy(self.storage, self.read)
            return
        serde = self.storage.ser_de
        self.storage.ser_de = FailingSerde()
        try:
            splitread.copy(self.storage, self.read)
        finally:
            self.storage.ser_de = serde

    def end(self) -> Any:
        read, self.read = self.read, None
        return splitread.end(self.storage, read)

    def abandon(self) -> None:
        if self.read is not None:
            splitread.abandon(self.read)
            self.read = None

    def close(self) -> None:
        self.abandon()
        self.storage.close()


class RemoteReader:
    """A reader in its own process (see shmref.readers), stepped by command."""

    def __init__(self, impl: ModuleType, handle: Any) -> None:
        self.process = ReaderProcess(impl.__name__, handle)

    def _call(self, *command: Any) -> Any:
        status, payload = self.process.call(*command)
        if status != "ok":
            raise _EXCEPTIONS.get(status, RuntimeError)(payload)
        return payload

    def begin(self, *args: Any) -> None:
        self._call("begin", *args)

    def copy(self, fail: bool = False) -> None:
        if fail:
            raise NotImplementedError("injected copy failures need in-process readers")
        self._call("copy")

    def end(self) -> Any:
        return self._call("end")

    def close(self) -> None:
        self.process.stop()


class DeserializeError(ValueError):
    """Injected: the object could not be deserialized."""


class FailingSerde:
    def deserialize(self, data: Any) -> Any:
        raise DeserializeError("injected deserialize failure")


_EXCEPTIONS = {"ValueError": ValueError, "MemoryError": MemoryError, "KeyError": KeyError}


def value_for(key: str, size: int, serde: Any) -> str:
    """A string, recognisably `key`'s, whose serialized object fills a chunk
    of `size` units exactly (object = 16*size - 8 bytes incl. the 4-byte
    count). It starts with a 2-character tag of the key, so that even the
    2-character value of a 1-unit chunk tells keys apart."""
    target = UNIT * size - MD_SIZE
    digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "little")
    tag = "0123456789abcdefghijklmnopqrstuvwxyz"[digest % 36] + \
        "0123456789abcdefghijklmnopqrstuvwxyz"[digest // 36 % 36]
    pattern = tag + key + "|"
    for length in range(max(target - 16, 0), target + 1):
        value = (pattern * (length // len(pattern) + 1))[:length]
        _data, data_bytes, _md, md_bytes = serde.serialize(value)
        if FLAG_BYTES + md_bytes + data_bytes == target:
            return value
    raise ValueError(f"no value of key {key!r} fills {size} units exactly")


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
    ) -> None:
        self.impl = impl
        self.n_units = n_units
        self.resources = ExitStack()
        self.ring = impl.SingleWriterShmRingBuffer(UNIT * n_units, create=True)
        self.resources.callback(self.ring.close)
        if id_max is not None:
            self.ring.ID_MAX = id_max
        self.marked: set[int] = set()  # ring model: ids whose is_free_fn says yes
        self.writer = None
        self.readers: list[LocalReader | RemoteReader] = []
        self.signatures: dict[tuple, list[int]] = {}  # issued (key, addr, id) -> signature
        if storage:
            max_object_size = UNIT * (max_obj or n_units) - MD_SIZE
            # As vLLM builds them: the writer without a lock, the readers with one.
            self.writer = impl.SingleWriterShmObjectStorage(max_object_size, n_readers, self.ring)
            self.reader_lock = mp.get_context("spawn").Lock()  # kept alive with the driver
            handle = self.writer.handle()
            handle.reader_lock = self.reader_lock
            kind = RemoteReader if reader_processes else LocalReader
            for _ in range(n_readers):
                reader = kind(impl, handle)
                self.resources.callback(reader.close)
                self.readers.append(reader)
        self.value_keys: dict[str, str] = {}  # every value put -> its key

    def close(self) -> None:
        self.resources.close()

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- ring actions (spec/RingBuffer.tla) ------------------------------------

    def allocate_buf(self, size: int) -> Outcome:
        outcome = self._run(lambda: self._units(self.ring.allocate_buf(UNIT * size - MD_SIZE)))
        if outcome.status == "ok":
            self.marked.discard(outcome.result[1])  # a new chunk is not free yet
        return outcome

    def mark_free(self, id: int) -> Outcome:
        self.marked.add(id)
        return Outcome("ok")

    def free_buf(self, nbytes: int) -> Outcome:
        def free() -> list[int]:
            freed = list(self.ring.free_buf(lambda i, _buf: i in self.marked, UNIT * nbytes))
            self.marked.difference_update(freed)
            return freed

        return self._run(free)

    # -- writer actions (spec/ShmObjectStorage.tla) ------------------------------

    def put(self, key: str, size: int) -> Outcome:
        value = value_for(key, size, self.writer.ser_de)
        if self.value_keys.get(value, key) != key:
            raise ValueError(f"keys {key!r} and {self.value_keys[value]!r} get the same value")
        outcome = self._run(lambda: self._units(self.writer.put(key, value)))
        if outcome.status == "ok":
            self.value_keys[value] = key
            self._issue(key)
        return outcome

    def get_cached(self, key: str) -> Outcome:
        outcome = self._run(lambda: self._units(self.writer.get_cached(key)))
        if outcome.status == "ok":
            self._issue(key)
        return outcome

    def touch(self, key: str) -> Outcome:
        return self._run(lambda: self.writer.touch(key))

    def release_touches(self) -> Outcome:
        return self._run(self.writer.release_touches)

    def free_unused(self) -> Outcome:
        return self._run(self.writer.free_unused)

    def clear(self) -> Outcome:
        target = self.writer if self.writer is not None else self.ring
        outcome = self._run(target.clear)
        self.marked.clear()
        return outcome

    # -- reader actions: a read in three steps -----------------------------------

    def get_begin(self, reader: int, handle: tuple) -> Outcome:
        """`handle` = (key, address, id) in units; unissued handles are forged.
        A refused read is "rejected" (signature) or "stale" (id check)."""
        key, address, monotonic_id = handle
        signature = self.signatures.get(tuple(handle), FORGED_SIGNATURE)
        outcome = self._run(
            lambda: self.readers[reader].begin(UNIT * address, monotonic_id, signature, key)
        )
        return outcome if outcome.status == "ok" else Outcome(_refusal(outcome), outcome.result)

    def get_copy(self, reader: int, fail: bool = False) -> Outcome:
        """`fail` makes this copy's deserialization fail, as a corrupt or
        unexpected object would (the spec's COPY_FAIL)."""
        outcome = self._run(lambda: self.readers[reader].copy(fail=fail))
        return outcome if outcome.status == "ok" else Outcome(_refusal(outcome), outcome.result)

    def get_end(self, reader: int) -> Outcome:
        """Ends the read; an ok result is the key whose value came back
        (or "<foreign>" for bytes that are no key's value)."""
        outcome = self._run(self.readers[reader].end)
        if outcome.status == "ok":
            return Outcome("ok", self.value_keys.get(outcome.result, "<foreign>"))
        return Outcome(_refusal(outcome), outcome.result)

    # -- observation -------------------------------------------------------------

    def observe(self) -> dict[str, Any]:
        """The implementation's state in the spec's variables and units.
        Internal attributes an implementation lacks are left out."""
        ring = self.ring
        state: dict[str, Any] = {}
        for name in ("data_buffer_start", "data_buffer_end"):
            if hasattr(ring, name):
                state[name] = _scaled(getattr(ring, name))
        for name in ("monotonic_id_start", "monotonic_id_end"):
            if hasattr(ring, name):
                state[name] = getattr(ring, name)
        metadata = getattr(ring, "metadata", None)
        if metadata is not None:
            state["metadata"] = {i: _scaled(a) for i, a in metadata.items()}
            state["counts"] = {i: self._count(a) for i, a in metadata.items()}
        writer = self.writer
        if writer is not None:
            if hasattr(writer, "key_index"):
                state["key_index"] = {
                    k: (_scaled(a), i) for k, (a, i) in writer.key_index.items()
                }
            if hasattr(writer, "writer_flag"):
                state["writer_flag"] = dict(writer.writer_flag)
            if hasattr(writer, "_touched"):
                state["touched"] = set(writer._touched)
        return state

    def _count(self, address: int) -> int:
        offset = self.ring.DATA_OFFSET + address % self.ring.data_buffer_size + MD_SIZE
        return int.from_bytes(self.ring.shared_memory.buf[offset : offset + 4], "little",
                              signed=True)

    # -- helpers -----------------------------------------------------------------

    def _issue(self, key: str) -> None:
        address, monotonic_id = self.writer.key_index[key]
        handle = (key, _scaled(address), monotonic_id)
        self.signatures[handle] = self.writer.get_signature(key)

    def _units(self, pair: tuple[int, int]) -> tuple[int, int]:
        address, monotonic_id = pair
        return _scaled(address), monotonic_id

    @staticmethod
    def _run(step) -> Outcome:
        try:
            return Outcome("ok", step())
        except (ValueError, MemoryError, KeyError) as exc:
            return Outcome(type(exc).__name__, str(exc))


def _scaled(byte_address: int) -> int:
    if byte_address % UNIT:
        raise ValueError(f"address {byte_address} is not a whole number of units")
    return byte_address // UNIT


def _refusal(outcome: Outcome) -> str:
    """Tell a forged handle (signature) from a stale one (id check) and
    from an injected deserialization failure."""
    message = str(outcome.result)
    if "injected deserialize failure" in message:
        return "DeserializeError"
    if outcome.status == "ValueError" and "signature" in message.lower():
        return "rejected"
    if outcome.status == "ValueError":
        return "stale"
    return outcome.status
