"""A writer storage seen through the contract (what put and get_cached returned
remembered; its bytes read only for seed-layout tests), the storage tests' fixtures
in conftest.py build them."""

from __future__ import annotations

import copy
import multiprocessing as mp
from typing import Any

from shmref.store.observe import Segment

LOCK = mp.get_context("spawn").Lock()


class Writer:
    """A writer storage seen through the contract: it remembers the
    (address, id) that put and get_cached returned; `segment()` reads its
    bytes (seed-layout tests only)."""

    def __init__(self, storage: Any, ring: Any) -> None:
        self.storage, self.ring = storage, ring
        self.placed: dict[Any, tuple[int, int]] = {}
        self._segment: Segment | None = None

    def segment(self) -> Segment:
        if self._segment is None:
            self._segment = Segment(self.ring.handle())
        return self._segment

    def close_segment(self) -> None:
        if self._segment is not None:
            self._segment.close()

    def put(self, key: Any, value: Any) -> tuple[int, int]:
        placed: tuple[int, int] = self.storage.put(key, value)
        self.placed[key] = placed
        return placed

    def get_cached(self, key: str) -> tuple[int, int]:
        placed: tuple[int, int] = self.storage.get_cached(key)
        self.placed[key] = placed
        return placed

    def reader_handle(self) -> Any:
        handle = copy.copy(self.storage.handle())
        handle.reader_lock = LOCK
        return handle

    def __getattr__(self, name: str) -> Any:
        return getattr(self.storage, name)


def handle_of(writer, key):
    address, monotonic_id = writer.placed[key]
    return address, monotonic_id, writer.get_signature(key), key
