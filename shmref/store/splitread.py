"""A read in three steps (get_begin, get_copy, get_end) on any implementation.

refimpl has the three methods. For an implementation that only has the seed's
`get`, the same read is composed from the contract's pieces (shmref.contract:
`verify_signature`, `ring_buffer.access_buf`, `increment_reader_flag`), the
serde instance and the reader lock that the caller put in the handle, and the
documented object layout (a 4-byte read count, then the serde's bytes):
exactly the seed's `get`, cut where the spec cuts it, so that the writer can
act between the steps. No private attribute of the storage is read.

A reader's signature check runs as its own step first (`check_signature`,
on every implementation), so that a refused handle is told from a stale one
by where the ValueError was raised, not by its message: a ValueError of
`verify_signature` becomes shmref.core.vocabulary.HandleRejected.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from shmref.contract import COUNT_BYTES, MissingCapability, has, split_read_missing
from shmref.core.vocabulary import HandleRejected


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
        checked = check_signature(storage, address, monotonic_id, signature, key)
        try:
            return storage.get_begin(address, monotonic_id, signature, key)
        except ValueError as exc:
            unnamed_refusal(checked, exc)
            raise
    lacking = split_read_missing(storage)
    if lacking is not None:
        raise MissingCapability(lacking)
    if serde is None:
        raise MissingCapability("a serde instance for a composed split read")
    check_signature(storage, address, monotonic_id, signature, key)
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
