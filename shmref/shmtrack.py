"""Which shared-memory segments this process created, and which of them leaked.

Comparing /dev/shm before and after a run blames us for every segment that
other processes on the machine create meanwhile; recording the names our own
`SharedMemory(create=True)` calls produce does not.
"""

from __future__ import annotations

import os
from multiprocessing import shared_memory

_created: dict[str, str] = {}  # name -> who created it (shmtrack.owner then)
owner = "(outside any test)"  # set by the test session to the running test's id
_original_init = shared_memory.SharedMemory.__init__


def _recording_init(self, name=None, create=False, size=0, *args, **kwargs):  # type: ignore[no-untyped-def]
    try:
        _original_init(self, name, create, size, *args, **kwargs)
    finally:
        # Also when __init__ fails after shm_open (e.g. a non-int size makes
        # ftruncate raise): Python 3.11 leaves that segment behind.
        if create and getattr(self, "_name", None):
            _created.setdefault(self._name, owner)


def start() -> None:
    """Record every segment this process creates from now on (idempotent)."""
    shared_memory.SharedMemory.__init__ = _recording_init  # type: ignore[method-assign]


def created() -> set[str]:
    return set(_created)


def creator(name: str) -> str:
    return _created.get(name, "(unknown)")


def leaked() -> set[str]:
    """Segments this process created that still exist."""
    return {name for name in _created if os.path.exists(f"/dev/shm/{name.lstrip('/')}")}


def remove(names: list[str]) -> None:
    """Unlink leaked segments (after they were reported)."""
    for name in names:
        try:
            os.unlink(f"/dev/shm/{name.lstrip('/')}")
        except FileNotFoundError:
            pass
