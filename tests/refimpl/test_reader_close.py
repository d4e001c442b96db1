"""A reader storage is closed even when a held read (shmref.store.splitread)
left views of the segment in a reference cycle: close_storage collects and
closes again, where a plain close is a BufferError."""

from __future__ import annotations

import gc
from multiprocessing import shared_memory
from typing import Any

import pytest

from shmref.store.readers import close_storage


class SegmentStorage:
    """A storage whose close is the segment's, as the seed's reader's is."""

    def __init__(self) -> None:
        self.segment = shared_memory.SharedMemory(create=True, size=4096)

    def close(self) -> None:
        self.segment.close()


def leave_a_view_in_a_cycle(storage: SegmentStorage) -> None:
    cycle: dict[str, Any] = {"view": storage.segment.buf[8:16]}
    cycle["self"] = cycle  # only the cycle collector frees it


def test_a_view_in_a_cycle_is_collected_before_the_close() -> None:
    gc.disable()  # the cycle must still be there when close runs
    try:
        plain, helped = SegmentStorage(), SegmentStorage()
        for storage in (plain, helped):
            leave_a_view_in_a_cycle(storage)
        with pytest.raises(BufferError):
            plain.close()  # the broken input: without the collector, the close fails
        close_storage(helped)
        assert helped.segment._mmap is None  # closed
    finally:
        gc.enable()
        gc.collect()
        for storage in (plain, helped):
            storage.segment.close()
            storage.segment.unlink()


class SeedLikeWriterRing:
    """A writer ring whose close is the seed's: the segment's close, then its unlink."""

    def __init__(self) -> None:
        self.segment = shared_memory.SharedMemory(create=True, size=4096)

    def close(self) -> None:
        self.segment.close()  # a BufferError here skips the unlink: the segment leaks
        self.segment.unlink()

    def refused_get(self) -> None:
        """A call refused inside `with access_buf(...)`: its traceback's frame
        holds the view, and the frame holds the exception (a cycle)."""
        view = self.segment.buf[0:8]
        try:
            raise ValueError(f"data at {bytes(view[:1])!r} has been modified")
        except ValueError as exc:
            kept = exc  # noqa: F841 - the frame -> exception -> traceback -> frame cycle


def test_a_writer_ring_is_unlinked_after_a_refused_call_left_its_view_in_a_cycle() -> None:
    from shmref.store.readers import close_despite_cycles

    gc.disable()
    try:
        plain, helped = SeedLikeWriterRing(), SeedLikeWriterRing()
        for ring in (plain, helped):
            ring.refused_get()
        with pytest.raises(BufferError):
            plain.close()  # the broken input: closed without the collector, never unlinked
        close_despite_cycles(helped.close)
        with pytest.raises(FileNotFoundError):  # unlinked: the segment is gone
            shared_memory.SharedMemory(name=helped.segment.name)
    finally:
        gc.enable()
        gc.collect()
        plain.segment.close()
        plain.segment.unlink()
