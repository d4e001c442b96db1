"""What the findings tests (tests/findings/test_seed_findings_*.py, test_seed_build.py)
share besides their fixtures (conftest.py: the seed, refimpl, `shm`): a maker
of rings and storages that closes them all, read helpers, and serdes that reach
the error paths.

Every finding has a `_seed` test that DEMONSTRATES the defect on the module
built from the seed (vLLM's code; it fails once the seed no longer has the
defect) and a `_refimpl` test that shows what refimpl does instead. Findings
refimpl has not fixed yet carry `xfail(strict=True)` on the refimpl half: it
turns into a failure the day refimpl is fixed, so the marker gets removed.

The seed is built once per session into a temporary directory; without the
seed file every `_seed` test is skipped. Tests that need `python -O` run a
subprocess. Every shared-memory segment made here is closed and unlinked.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from contextlib import suppress
from multiprocessing import Lock
from pathlib import Path
from types import ModuleType
from typing import Any

import msgpack

from refimpl.serde import MsgpackOnlySerde

REPO = Path(__file__).resolve().parents[2]
DEV_SHM = Path("/dev/shm")


# -- rings and storages, and reading them ---------------------------------------


class Shm:
    """Makes rings and storages, remembers them, closes them all afterwards."""

    def __init__(self) -> None:
        self.objects: list[Any] = []
        self.names: set[str] = set()

    def ring(self, mod: ModuleType, size: int, name: str | None = None, create: bool = True) -> Any:
        ring = mod.SingleWriterShmRingBuffer(size, name=name, create=create)
        self.objects.append(ring)
        if create:
            self.names.add(ring.shared_memory.name)
        return ring

    def writer(
        self,
        mod: ModuleType,
        size: int = 256,
        max_object_size: int = 64,
        n_readers: int = 1,
        lock: Any = None,
        serde: type | None = None,
        id_max: int | None = None,
    ) -> Any:
        """A writer storage; its serde is `serde`, else the msgpack-only one,
        whose one-byte metadata the findings' object sizes are written in
        (the modules' default, the releases' format, frames some 25 bytes)."""
        ring = self.ring(mod, size)
        if id_max is not None:
            ring.ID_MAX = id_max
        return mod.SingleWriterShmObjectStorage(
            max_object_size,
            n_readers,
            ring,
            reader_lock=lock,
            serde_class=serde or MsgpackOnlySerde,
        )

    def reader(self, mod: ModuleType, writer: Any, serde: type | None = None) -> Any:
        size, name = writer.ring_buffer.handle()
        ring = self.ring(mod, size, name=name, create=False)
        return mod.SingleWriterShmObjectStorage(
            writer.max_object_size,
            writer.n_readers,
            ring,
            serde_class=serde or writer.serde_class,
            reader_lock=writer._reader_lock or Lock(),
        )

    def close_all(self) -> None:
        for obj in reversed(self.objects):
            with suppress(Exception):
                obj.close()

    def leaked(self) -> list[str]:
        return sorted(n for n in self.names if (DEV_SHM / n).exists())


def unique_name() -> str:
    return f"shmref_t_{os.getpid()}_{uuid.uuid4().hex[:10]}"


def read(writer: Any, reader: Any, key: str) -> Any:
    """One reader's read of `key`'s current handle, as vLLM's workers do it."""
    address, monotonic_id = writer.key_index[key]
    return reader.get(address, monotonic_id, writer.get_signature(key), key)


def consistent(storage: Any) -> bool:
    """Every key the writer knows resolves to a live chunk at its address."""
    metadata = storage.ring_buffer.metadata
    return all(metadata.get(mid) == address for address, mid in storage.key_index.values())


def count_of(storage: Any, address: int) -> int:
    with storage.ring_buffer.access_buf(address) as (view, _):
        return int.from_bytes(view[:4], "little", signed=True)


# -- serdes used to reach the error paths ------------------------------------------


def _pack(value: Any) -> tuple[bytes, bytes]:
    payload = msgpack.packb(value, use_bin_type=True)
    return payload, msgpack.packb(len(payload))


def _unpack(data: memoryview) -> Any:
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(bytes(data))
    length = unpacker.unpack()
    offset = unpacker.tell()
    return msgpack.unpackb(bytes(data[offset : offset + length]), raw=False)


class PlainSerde:
    """msgpack payload after a msgpack length header (the seed fallback's format)."""

    def serialize(self, value: Any) -> tuple[Any, int, bytes, int]:
        payload, header = _pack(value)
        return payload, len(payload), header, len(header)

    def deserialize(self, data: memoryview) -> Any:
        return _unpack(data)


class LyingSerde(PlainSerde):
    """Values starting with 'zero' claim 0 data bytes; 'bytearray' values come
    back as a bytearray. Both reach put's copy only after the allocation."""

    def serialize(self, value: Any) -> tuple[Any, int, bytes, int]:
        payload, header = _pack(value)
        if isinstance(value, str) and value.startswith("zero"):
            return payload, 0, header, len(header)
        if value == "bytearray":
            return bytearray(payload), len(payload), header, len(header)
        return payload, len(payload), header, len(header)


class FailFirstRead(MsgpackOnlySerde):
    """The first deserialize in the process fails, as a reader's copy can
    (the writer's default serde, which both modules share, otherwise)."""

    failed: list[bool] = []

    def deserialize(self, data: memoryview) -> Any:
        if not FailFirstRead.failed:
            FailFirstRead.failed.append(True)
            raise MemoryError("simulated failure while copying the object")
        return super().deserialize(data)


HOOKS: list[Callable[[], None]] = []


class HookSerde(MsgpackOnlySerde):
    """Runs the pending hooks (the writer acting) before copying the object
    (the writer's default serde, which both modules share, otherwise)."""

    def deserialize(self, data: memoryview) -> Any:
        while HOOKS:
            HOOKS.pop()()
        return super().deserialize(data)


class RawSerde:
    """Value n -> n payload bytes and a 1-byte header: exact chunk sizes."""

    def serialize(self, n: int) -> tuple[Any, int, bytes, int]:
        return b"x" * n, n, b"\x00", 1

    def deserialize(self, data: memoryview) -> Any:
        return len(data) - 1
