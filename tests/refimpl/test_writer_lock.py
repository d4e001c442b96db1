"""refimpl's writer holds the reader lock while it reclaims and writes a chunk.

That is what makes `get_end` (re-check + read-modify-write of the count, under
the same lock) one step for the writer, as the spec's default (`SPLIT_END`
FALSE) assumes; a writer without the lock leaves the window of
spec/MCEndWindow* open (issue 15, item 3). The check records, at every
allocation and every reclaim, whether the lock was held; the broken variant
(a writer that ignores its lock) is caught.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from refimpl.ring import SingleWriterShmRingBuffer
from refimpl.serde import MsgpackOnlySerde
from refimpl.storage import SingleWriterShmObjectStorage


class RecordingLock:
    """A lock that says whether it is held (single process, no contention)."""

    def __init__(self) -> None:
        self.held = False

    def __enter__(self) -> RecordingLock:
        assert not self.held, "the writer took the lock twice (it is not reentrant)"
        self.held = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.held = False

    def acquire(self, block: bool = True, timeout: float | None = None) -> bool:
        self.__enter__()
        return True

    def release(self) -> None:
        self.__exit__()


class LockIgnoringWriter(SingleWriterShmObjectStorage):
    """Broken variant: the writer does not take the reader lock."""

    def _writer_lock(self) -> AbstractContextManager[Any]:
        return nullcontext()


@contextmanager
def writer(
    cls: type[SingleWriterShmObjectStorage],
) -> Iterator[tuple[Any, RecordingLock, list[bool]]]:
    ring = SingleWriterShmRingBuffer(96, create=True)
    lock = RecordingLock()
    seen: list[bool] = []  # lock.held at each allocate_buf / free_buf
    allocate, free = ring.allocate_buf, ring.free_buf

    def allocate_buf(size: int) -> tuple[int, int]:
        seen.append(lock.held)
        return allocate(size)

    def free_buf(is_free: Any, nbytes: int | None = None) -> Any:
        seen.append(lock.held)
        return free(is_free, nbytes)

    ring.allocate_buf = allocate_buf  # type: ignore[method-assign]
    ring.free_buf = free_buf  # type: ignore[method-assign]
    try:
        yield (
            cls(16, 0, ring, serde_class=MsgpackOnlySerde, reader_lock=lock),  # type: ignore[arg-type]
            lock,
            seen,
        )
    finally:
        ring.close()


def exercise(store: Any) -> None:
    """Sizes in the msgpack-only serde's one-byte metadata (16-byte chunks)."""
    for n in range(8):  # fills the 96-byte ring: later puts reclaim inside put
        store.put(f"k{n}", "v" * 6)
    store.free_unused()


def test_put_and_free_unused_hold_the_reader_lock() -> None:
    with writer(SingleWriterShmObjectStorage) as (store, lock, seen):
        exercise(store)
        assert len(seen) > 8 and all(seen)
        assert not lock.held


def test_a_writer_that_ignores_the_lock_is_caught() -> None:
    with writer(LockIgnoringWriter) as (store, _lock, seen):
        exercise(store)
        assert seen and not any(seen)


def test_without_a_lock_the_writer_still_works() -> None:
    ring = SingleWriterShmRingBuffer(96, create=True)
    try:
        store = SingleWriterShmObjectStorage(16, 0, ring, serde_class=MsgpackOnlySerde)
        exercise(store)
        assert ring.monotonic_id_end == 8  # every put succeeded
    finally:
        ring.close()
