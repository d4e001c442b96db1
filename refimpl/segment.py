"""The ring's POSIX shared-memory segment: creating, attaching, and the faults
around them (issue 19).

- A new segment's pages are reserved at creation (`posix_fallocate`), so a
  /dev/shm too small for the ring fails there with a clear ENOSPC error that
  names the size, never with SIGBUS at a later write (tmpfs allocates lazily).
  The cost: the ring's memory is committed when it is created, not as it
  fills, and creation takes time in proportion (the kernel zeroes the pages).
- The writer holds an exclusive `flock` on its segment for its lifetime; the
  kernel drops it when the writer dies. A new writer that finds the name
  taken removes the segment only if no live writer holds that lock (its
  writer was killed, e.g. in the middle of a put), and otherwise fails.
  (A child forked by the writer inherits the lock's descriptor, so the
  segment counts as alive while such a child lives; segments created by
  other implementations hold no lock and count as abandoned.)
- Readers attach without registering the segment with their resource
  tracker, which would unlink it when the reader exits.
"""

from __future__ import annotations

import errno
import fcntl
import importlib
import mmap
import os
import sys
from contextlib import suppress
from multiprocessing.shared_memory import SharedMemory
from typing import Any

_posixshmem: Any = None
if os.name == "posix":
    _posixshmem = importlib.import_module("_posixshmem")


class _UntrackedSegment(SharedMemory):
    """Python 3.11/3.12's `SharedMemory(name)` on POSIX, without the tracker
    registration (the attributes are those versions' `SharedMemory`'s own)."""

    def __init__(self, name: str) -> None:
        self._name = "/" + name
        self._fd = _posixshmem.shm_open(self._name, os.O_RDWR, mode=0o600)
        try:
            self._size = os.fstat(self._fd).st_size
            self._mmap = mmap.mmap(self._fd, self._size)
        except BaseException:
            os.close(self._fd)
            self._fd = -1
            raise
        self._buf = memoryview(self._mmap)


def attach_untracked(name: str) -> SharedMemory:
    """Attach to an existing segment without registering it with this process's
    resource tracker, which would unlink it when this process exits.

    Python 3.13+ has ``track=False`` for this. Before, `SharedMemory` always
    registers, and unregistering afterwards is not enough: the tracker keeps
    one set of names per tracker, shared with the segment's creator when it
    runs in this process or is our multiprocessing parent, so an unregister
    would drop the creator's registration too (and its later unlink makes the
    tracker print a KeyError). So on 3.11/3.12 we map the segment exactly as
    their `SharedMemory.__init__` does, minus the registration.
    """
    if sys.version_info >= (3, 13):
        return SharedMemory(name=name, track=False)
    if _posixshmem is None:  # Windows: nothing is tracked
        return SharedMemory(name=name)
    return _UntrackedSegment(name)


def create_segment(name: str | None, size: int) -> tuple[SharedMemory, int]:
    """A new segment of `size` bytes with every page reserved, and the file
    descriptor holding its writer lock (-1 where there is no flock)."""
    try:
        memory = SharedMemory(name=name, create=True, size=size)
    except FileExistsError:
        if name is None or not remove_if_abandoned(name):
            raise FileExistsError(
                errno.EEXIST,
                f"shared memory segment {name!r} already exists and its writer is alive; "
                "use another name or stop that writer",
            ) from None
        memory = SharedMemory(name=name, create=True, size=size)
    lock_fd = -1
    try:
        lock_fd = _writer_lock(memory.name)
        reserve_pages(memory)
    except BaseException:
        if lock_fd >= 0:
            os.close(lock_fd)
        memory.close()
        memory.unlink()
        raise
    return memory, lock_fd


def _writer_lock(name: str) -> int:
    if _posixshmem is None:
        return -1
    fd: int = _posixshmem.shm_open("/" + name, os.O_RDWR, mode=0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    return fd


def remove_if_abandoned(name: str) -> bool:
    """Unlink segment `name` if no live writer holds its lock; whether it did."""
    if _posixshmem is None:
        return False
    try:
        fd = _posixshmem.shm_open("/" + name, os.O_RDWR, mode=0o600)
    except FileNotFoundError:
        return True  # gone meanwhile: the name is free
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    with suppress(FileNotFoundError):
        _posixshmem.shm_unlink("/" + name)
    return True


def release_writer_lock(fd: int) -> None:
    """Drop the writer's `flock` on its segment (fd -1: none held): the name is free again."""
    if fd >= 0:
        os.close(fd)


def reserve_pages(memory: SharedMemory) -> None:
    """Allocate every page of a new segment now, so that a /dev/shm too small
    for it fails here with ENOSPC instead of with SIGBUS at the first write
    beyond the free space (tmpfs allocates pages lazily)."""
    if _posixshmem is None or not hasattr(os, "posix_fallocate"):
        return
    fd = _posixshmem.shm_open("/" + memory.name, os.O_RDWR, mode=0o600)
    try:
        os.posix_fallocate(fd, 0, memory.size)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.ENOMEM, errno.EFBIG):
            raise
        free = ""
        with suppress(OSError):
            stat = os.statvfs("/dev/shm")
            free = f"; /dev/shm has {stat.f_bavail * stat.f_frsize} bytes free"
        raise OSError(
            exc.errno,
            f"cannot reserve {memory.size} bytes of shared memory for the ring "
            f"(segment {memory.name!r}): {os.strerror(exc.errno)}{free}",
        ) from None
    finally:
        os.close(fd)
