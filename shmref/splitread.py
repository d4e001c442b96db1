"""A read in three steps (get_begin, get_copy, get_end) on any implementation.

refimpl has the three methods. For an implementation that only has the seed's
`get`, the same read is composed from the seed's public pieces
(`verify_signature`, `ring_buffer.access_buf`, `ser_de.deserialize`,
`increment_reader_flag` under `_reader_lock`): exactly the seed's `get`, cut
where the spec cuts it, so that the writer can act between the steps.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any


class SeedRead:
    """An in-flight read composed from the seed's API."""

    def __init__(self, storage: Any, resources: ExitStack, view: Any) -> None:
        self.storage, self.resources, self.view = storage, resources, view
        self.value: Any = None

    def copy(self) -> None:
        self.value = self.storage.ser_de.deserialize(self.view[self.storage.flag_bytes :])

    def close(self) -> None:
        self.resources.close()

    def end(self) -> Any:
        try:
            lock = self.storage._reader_lock
            if lock is not None:
                with lock:
                    self.storage.increment_reader_flag(self.view[: self.storage.flag_bytes])
        finally:
            self.resources.close()
        return self.value


def begin(storage: Any, address: int, monotonic_id: int, signature: Any, key: Any) -> Any:
    if hasattr(storage, "get_begin"):
        return storage.get_begin(address, monotonic_id, signature, key)
    if not storage.is_writer:
        storage.verify_signature(key, address, monotonic_id, signature)
    resources = ExitStack()
    try:
        view, (chunk_id, _size) = resources.enter_context(storage.ring_buffer.access_buf(address))
        if chunk_id != monotonic_id:
            raise ValueError(
                f"Data for address:id '{address}:{monotonic_id}' has been modified or is invalid."
            )
    except BaseException:
        resources.close()
        raise
    return SeedRead(storage, resources, view)


def copy(storage: Any, read: Any) -> None:
    if isinstance(read, SeedRead):
        read.copy()
    else:
        storage.get_copy(read)


def end(storage: Any, read: Any) -> Any:
    if isinstance(read, SeedRead):
        return read.end()
    return storage.get_end(read)


def abandon(read: Any) -> None:
    """Release a read that will not be ended (its view must not pin the segment)."""
    read.close()
