"""refimpl with one fault in the reader's `get`: the stores the oracle must
judge without dying (tests/oracle/test_isolation.py). Each module below picks the fault."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import refimpl


def faulty_module(name: str, fault: Callable[[], Any]) -> dict[str, Any]:
    """The names a store module exports: refimpl's, with a storage whose
    reader-side `get` calls `fault()` first."""

    class Storage(refimpl.SingleWriterShmObjectStorage):
        def get(self, *args: Any, **kwargs: Any) -> Any:
            if not self.is_writer:
                fault()
            return super().get(*args, **kwargs)

        @staticmethod
        def create_from_handle(handle: Any) -> Storage:
            ring = refimpl.SingleWriterShmRingBuffer(*handle.ring_buffer_handle)
            return Storage(
                handle.max_object_size,
                handle.n_readers,
                ring,
                handle.serde_class,
                handle.reader_lock,
            )

    Storage.__qualname__ = Storage.__name__ = "SingleWriterShmObjectStorage"
    Storage.__module__ = name
    exported = {k: getattr(refimpl, k) for k in refimpl.__all__}
    exported.update(
        SingleWriterShmRingBuffer=refimpl.SingleWriterShmRingBuffer,
        ShmObjectStorageHandle=refimpl.ShmObjectStorageHandle,
        MsgpackSerde=refimpl.MsgpackSerde,
        SingleWriterShmObjectStorage=Storage,
    )
    return exported
