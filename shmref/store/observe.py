"""Read an implementation's segment from outside: the bytes, decoded by the layout.

The oracle never reads an implementation's private attributes to see reader
counts or chunk headers. It attaches the segment itself, by the name in
`ring.handle()` (without registering it with this process's resource
tracker, so it never unlinks it), and decodes what the seed documents:
`[32-byte secret][chunks]`, chunk `[4-byte id][4-byte size][object]`,
object `[4-byte read count][...]`.

Only a claim of the seed's layout licenses this reading (the seed-layout
level, or `Driver(layout=True)`): the state machines, replay and trace
validation otherwise judge through the API alone (shmref.store.driver), so that a
store with another layout is judged on its behaviour.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from multiprocessing import shared_memory
from typing import Any

from refimpl.segment import attach_untracked
from shmref.contract import COUNT_BYTES, HEADER_BYTES, SECRET_BYTES

_INT = struct.Struct("<i")
_HEADER = struct.Struct("<ii")


class LayoutError(ValueError):
    """The segment is not laid out as the seed documents."""


def attach(name: str) -> shared_memory.SharedMemory:
    """Attach without registering with this process's resource tracker (which
    would unlink the implementation's segment when we exit)."""
    return attach_untracked(name)


class Segment:
    """A read-only view of a ring's segment, attached by its handle."""

    def __init__(self, ring_handle: Any) -> None:
        try:
            size, name = ring_handle
            self.size = int(size)
        except (TypeError, ValueError) as exc:
            raise LayoutError(
                f"ring.handle() is {ring_handle!r}, not (data_buffer_size, segment name)"
            ) from exc
        self.name = str(name)
        self._shm: shared_memory.SharedMemory | None = attach(self.name)
        if self._shm.size < SECRET_BYTES + self.size:
            have = self._shm.size
            self.close()
            raise LayoutError(
                f"segment {self.name!r} has {have} bytes, fewer than the "
                f"{SECRET_BYTES}-byte secret + {self.size} data bytes"
            )

    def _buf(self) -> memoryview:
        if self._shm is None or self._shm.buf is None:
            raise LayoutError(f"segment {self.name!r} is closed")
        return self._shm.buf

    def secret(self) -> bytes:
        return bytes(self._buf()[:SECRET_BYTES])

    def data(self) -> bytes:
        """Every data byte (after the secret)."""
        return bytes(self._buf()[SECRET_BYTES : SECRET_BYTES + self.size])

    def header(self, address: int) -> tuple[int, int]:
        """(id, size incl. header) of the chunk at logical `address`."""
        offset = SECRET_BYTES + address % self.size
        if offset + HEADER_BYTES > SECRET_BYTES + self.size:
            raise LayoutError(f"no room for a chunk header at address {address}")
        return _HEADER.unpack_from(self._buf(), offset)

    def count(self, address: int) -> int:
        """The read count of the object in the chunk at logical `address`."""
        offset = SECRET_BYTES + address % self.size + HEADER_BYTES
        if offset + COUNT_BYTES > SECRET_BYTES + self.size:
            raise LayoutError(f"no room for a read count at address {address}")
        return int(_INT.unpack_from(self._buf(), offset)[0])

    def close(self) -> None:
        if self._shm is not None:
            self._shm.close()
            self._shm = None

    def __enter__(self) -> Segment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


FIELDS = (("id", 0, 4), ("size", 4, 8), ("read count", 8, 12))


def first_difference(expected: bytes, actual: bytes, starts: Iterable[int] = ()) -> str | None:
    """Where two segments' data bytes differ: the offset, the field it falls in
    (given the chunk `starts`, physical offsets) and both values. None if equal."""
    if expected == actual:
        return None
    if len(expected) != len(actual):
        return f"data sizes differ: {len(expected)} vs {len(actual)} bytes"
    at = next(i for i in range(len(expected)) if expected[i] != actual[i])
    chunk = max((s for s in starts if s <= at), default=None)
    where = f"data byte {at}"
    if chunk is not None:
        rel = at - chunk
        field = next(
            (f"{name}" for name, lo, hi in FIELDS if lo <= rel < hi),
            f"object byte {rel - HEADER_BYTES - COUNT_BYTES} after the count",
        )
        lo = chunk + next((lo for _n, lo, hi in FIELDS if lo <= rel < hi), rel)
        hi = chunk + next((hi for _n, lo, hi in FIELDS if lo <= rel < hi), rel + 1)
        return (
            f"{where}: field '{field}' of the chunk at offset {chunk} "
            f"(bytes {lo}-{hi - 1}): expected {expected[lo:hi].hex()}, "
            f"got {actual[lo:hi].hex()}"
        )
    return f"{where}: expected {expected[at : at + 16].hex()}, got {actual[at : at + 16].hex()}"
