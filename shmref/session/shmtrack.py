"""Which shared-memory segments this process created, and which still exist.

For long-running harnesses (bench) that must report leaks without patching
anything: an audit hook (PEP 578) sees every `os.ftruncate` and `mmap` of a
file descriptor, and on Linux the descriptor names its /dev/shm file. A
segment this process sized (created) or mapped is recorded; "leaked" is one
of those that still exists. Comparing /dev/shm before and after instead would
blame us for the segments other processes create meanwhile.
(The test session's stricter guard, which also sees a creation that fails
before its first ftruncate, is the plugin shmref.session.leaks.)
"""

from __future__ import annotations

import os
import sys
from typing import Any

SHM_DIR = "/dev/shm"
_created: set[str] = set()
_started = False


def _segment_of(fd: Any) -> str | None:
    if type(fd) is not int or fd < 0:
        return None
    try:
        path = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    head, _, name = path.rpartition("/")
    return name if head == SHM_DIR and name else None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "os.truncate" or event == "mmap.__new__":
        name = _segment_of(args[0])
        if name is not None:
            _created.add(name)


def start() -> None:
    """Record from now on (idempotent; an audit hook cannot be removed)."""
    global _started
    if not _started:
        sys.addaudithook(_audit)
        _started = True


def created() -> set[str]:
    """Every segment this process sized or mapped since `start`."""
    return set(_created)


def leaked() -> set[str]:
    """Segments this process sized or mapped that still exist."""
    return {name for name in _created if os.path.exists(f"{SHM_DIR}/{name}")}
