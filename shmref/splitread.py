"""A read in three steps (get_begin, get_copy, get_end) on any implementation.

refimpl has the three methods. For an implementation that only has the seed's
`get`, the same read is composed from the contract's pieces (shmref.contract:
`verify_signature`, `ring_buffer.access_buf`, `increment_reader_flag`), the
serde instance and the reader lock that the caller put in the handle, and the
documented object layout (a 4-byte read count, then the serde's bytes):
exactly the seed's `get`, cut where the spec cuts it, so that the writer can
act between the steps. No private attribute of the storage is read.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from shmref.contract import COUNT_BYTES, MissingCapability, split_read_missing


class SeedRead:
    """An in-flight read composed from the seed's API."""

    def __init__(
        self, storage: Any, resources: ExitStack, view: Any, serde: Any, lock: Any
    ) -> None:
        self.storage, self.resources, self.view = storage, resources, view
        self.serde, self.lock = serde, lock
        self.value: Any = None

    def copy(self) -> None:
        self.value = self.serde.deserialize(self.view[COUNT_BYTES:])

    def close(self) -> None:
        self.resources.close()

    def end(self) -> Any:
        try:
            if self.lock is not None:
                with self.lock:
                    self.storage.increment_reader_flag(self.view[:COUNT_BYTES])
        finally:
            self.resources.close()
        return self.value


def begin(
    storage: Any,
    address: int,
    monotonic_id: int,
    signature: Any,
    key: Any,
    *,
    serde: Any = None,
    lock: Any = None,
) -> Any:
    """Start a read. `serde` (an instance of the handle's serde class) and
    `lock` (the handle's reader lock; None for the writer, which does not
    count) are needed only when the read is composed from the seed's pieces."""
    if (
        hasattr(storage, "get_begin")
        and hasattr(storage, "get_copy")
        and hasattr(storage, "get_end")
    ):
        return storage.get_begin(address, monotonic_id, signature, key)
    lacking = split_read_missing(storage)
    if lacking is not None:
        raise MissingCapability(lacking)
    if serde is None:
        raise MissingCapability("a serde instance for a composed split read")
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
    return SeedRead(storage, resources, view, serde, lock)


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
