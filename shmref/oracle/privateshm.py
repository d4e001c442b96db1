"""A /dev/shm of the run's own, so that two runs on one machine never touch
each other's segments.

The oracle sweeps what a store's dead processes leave in /dev/shm: whatever
is new since the run started and held by no live process. On a shared
/dev/shm that rule cannot tell this run's orphans from another run's, and a
run beside it could remove (and report) what the other's store left. So the
oracle's process, before it starts any other, moves into a mount namespace of
its own with an empty tmpfs on /dev/shm (the size of the machine's); every
process it starts inherits it, and the tmpfs goes away with the last of them.
Where the machine allows no mount namespace (no CAP_SYS_ADMIN and no
unprivileged user namespaces), the run keeps the shared /dev/shm and its
report says so: then an orphan another run leaves at the same time may be
swept, and named, by this one.
"""

from __future__ import annotations

import ctypes
import errno
import os
from dataclasses import dataclass

from shmref.process import shmwatch

SHM = "/dev/shm"
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000

PRIVATE = "private"
SHARED = "shared"


@dataclass(frozen=True)
class Segments:
    """Which /dev/shm the run used, and why (the report's `segments`)."""

    way: str  # PRIVATE or SHARED
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"way": self.way, "detail": self.detail}


# this process's /dev/shm, once `enter` decided it (None: never asked)
_entered: Segments | None = None


def enter(wanted: str = PRIVATE) -> Segments:
    """Move this process (and whatever it starts after) onto a /dev/shm of
    its own, where `wanted` is PRIVATE and the machine allows it. Call it
    before any thread or child starts: a user namespace needs a process of
    one thread. Idempotent."""
    global _entered
    if _entered is not None:
        return _entered
    if wanted == SHARED:
        _entered = Segments(SHARED, "the machine's /dev/shm, as asked (--shm shared)")
        return _entered
    reason = _private_shm()
    if reason is None:
        _entered = Segments(
            PRIVATE,
            "a /dev/shm of this run's own (a mount namespace): "
            "no other run's segments are seen, swept or reported",
        )
    else:
        _entered = Segments(
            SHARED,
            f"the machine's /dev/shm ({reason}): an orphan another run leaves "
            "meanwhile may be swept and reported by this one",
        )
    return _entered


def current() -> Segments:
    """What this process runs on: what `enter` decided, else its caller's
    (an in-process run, shmref.oracle.cli.main, never moves its process)."""
    return _entered or Segments(
        SHARED, "the calling process's /dev/shm (a run inside another process keeps it)"
    )


def _private_shm() -> str | None:
    """Enter a mount namespace with a fresh tmpfs on /dev/shm; None when it
    worked, else why not (the process is left as it was)."""
    if not os.path.isdir(SHM):
        return f"{SHM} does not exist here"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        stat = os.statvfs(SHM)
    except OSError as exc:
        return f"no libc or {SHM}: {exc}"
    size = max(stat.f_blocks * stat.f_frsize, 1 << 26)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWNS) != 0:
        first = errno.errorcode.get(ctypes.get_errno(), "?")
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
            second = errno.errorcode.get(ctypes.get_errno(), "?")
            return f"no mount namespace: unshare gave {first}, with a user namespace {second}"
        try:  # the same user inside as outside, mapped (needs one thread)
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError as exc:
            return f"a user namespace without an id map: {exc}"
    # private from here on: nothing mounted below is seen outside, nor the reverse
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return f"mount namespace not private: {errno.errorcode.get(ctypes.get_errno(), '?')}"
    options = f"mode=1777,size={size}".encode()
    if libc.mount(b"tmpfs", SHM.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
        return f"no tmpfs on {SHM}: {errno.errorcode.get(ctypes.get_errno(), '?')}"
    shmwatch.moved()  # its watch of the /dev/shm it left tells nothing now
    return None


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as file:
        file.write(text)
