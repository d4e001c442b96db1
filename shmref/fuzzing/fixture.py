"""The fuzz's store on real shared memory: a writer and a reader, a few
objects put, good handles and stale ones (their chunks reused), and the check
that the good objects still read back."""

from __future__ import annotations

import hashlib
import hmac
import multiprocessing as mp
from contextlib import ExitStack
from dataclasses import dataclass
from types import ModuleType

from shmref.contract import HEADER_BYTES, object_size

CAPACITY = 4096


MAX_OBJECT = 512


OBJECT_BYTES = 300  # each fuzz object's value: same chunk size, so reuse aligns


@dataclass
class Handle:
    key: str
    address: int
    monotonic_id: int
    signature: list[int]

    def args(self) -> tuple[int, int, list[int], str]:
        """`get`'s arguments."""
        return self.address, self.monotonic_id, self.signature, self.key


class Fixture:
    """A writer, a reader in this process, good and stale handles."""

    def __init__(self, impl: ModuleType, resources: ExitStack) -> None:
        self.impl = impl
        self.ring = impl.SingleWriterShmRingBuffer(CAPACITY, create=True)
        resources.callback(self.ring.close)
        self.writer = impl.SingleWriterShmObjectStorage(
            MAX_OBJECT, 1, self.ring, reader_lock=mp.Lock()
        )
        self.reader = impl.SingleWriterShmObjectStorage.create_from_handle(self.writer.handle())
        resources.callback(self.reader.close)
        self.reader_ring = self.reader.ring_buffer
        self.secret = bytes(self.ring.get_auth_secret())
        old = [self._put(f"old-{n}") for n in range(CAPACITY // self._chunk_bytes())]
        for handle in old:  # read by the one reader: reclaimable
            self.reader.get(handle.address, handle.monotonic_id, handle.signature, handle.key)
        self.good = [self._put(f"live-{n}") for n in range(len(old) - 1)]
        reused = {h.address % CAPACITY for h in self.good}
        self.stale = [h for h in old if h.address % CAPACITY in reused]
        if not self.stale:
            raise RuntimeError("fuzz setup: no chunk was reused")
        self.keys = [h.key for h in self.good]

    def _chunk_bytes(self) -> int:
        """One fuzz object's chunk: its header and the object as the storage's
        serde frames `OBJECT_BYTES` (measured: serdes frame differently)."""
        serde = self.writer.handle().serde_class()
        return HEADER_BYTES + object_size(serde, value_of("old-0"))

    def _put(self, key: str) -> Handle:
        address, monotonic_id = self.writer.put(key, value_of(key))
        return Handle(key, address, monotonic_id, list(self.writer.get_signature(key)))

    def sign(self, key: str, address: int, monotonic_id: int) -> list[int]:
        """A valid signature for any fields that fit the signed format."""
        message = (
            hashlib.sha256(key.encode("utf-8")).digest()
            + address.to_bytes(8, "little")
            + monotonic_id.to_bytes(4, "little")
        )
        return list(hmac.new(self.secret, message, hashlib.sha256).digest())

    def unreadable(self) -> list[str]:
        """Good objects that no longer read back intact, by writer or reader."""
        bad = []
        for h in self.good:
            for who in ("writer", "reader"):
                try:
                    if who == "writer":
                        value = self.writer.get(h.address, h.monotonic_id)
                    else:
                        value = self.reader.get(*h.args())
                except Exception as exc:  # reported: this read must work
                    value = f"{type(exc).__name__}: {exc}"
                if value != value_of(h.key):
                    bad.append(f"{who} read of {h.key!r}: {str(value)[:80]}")
        return bad


def value_of(key: str) -> bytes:
    return (key.encode() * OBJECT_BYTES)[:OBJECT_BYTES]
