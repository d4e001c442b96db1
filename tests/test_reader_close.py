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
