"""Which /dev/shm entries were created while a request to a store program was
in flight (what shmref.process.segments accounts for): told by the kernel
(inotify, Linux), else found by listing the folder before and after.

Listing cost two reads of a folder that other runs on the machine fill
(hundreds of entries) for every request, more than a Python program's whole
answer; a read of inotify's queue that finds nothing costs one system call.
Where inotify cannot be had (another kernel, no instance left for the user)
every window lists the folder, as before. A window whose events the kernel
dropped (more names created during one request than its queue holds, 16384
by default) tells nothing: what the program made then is found by the
oracle's sweeps (docs/protocol.md, "What the oracle cleans up") only.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
import weakref
from dataclasses import dataclass, field

from shmref.process.segments import SHM, names

IN_MOVED_TO, IN_CREATE, IN_Q_OVERFLOW = 0x80, 0x100, 0x4000
IN_NONBLOCK, IN_CLOEXEC = os.O_NONBLOCK, getattr(os, "O_CLOEXEC", 0o2000000)
EVENT = struct.Struct("iIII")  # wd, mask, cookie, len: then the name, NUL-padded


@dataclass(eq=False)
class Window:
    """From `Watch.open()` to `created()`: either a position in its watch's
    log of created names, or the folder's listing at its start."""

    watch: Watch | None = None
    seq: int = 0
    listing: frozenset[str] | None = None
    lost: bool = field(default=False)  # the queue overflowed meanwhile: list instead

    def created(self) -> frozenset[str]:
        """The names created since the window opened that are still there."""
        if self.watch is None:
            return names() - (self.listing or frozenset())
        return self.watch.created(self)


class Watch:
    """One process's watch on /dev/shm: every name created, in order, kept
    as long as a window that may ask for it is open."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.device = shm_device()  # the /dev/shm watched (the process may move: below)
        self.moves = _MOVES  # the process's moves when this was made (`moved`)
        # re-entrant: a finalizer the garbage collector runs while this
        # thread holds it may close a ring, which is a request of its own
        self.lock = threading.RLock()
        self.log: list[str] = []
        self.base = 0  # the sequence number of log[0]
        self.windows: weakref.WeakSet[Window] = weakref.WeakSet()
        self.fd = inotify_fd()

    def open(self) -> Window:
        with self.lock:
            if self.fd is None:
                return Window(listing=names())
            self.drain()
            if self.log:
                self.trim()
            window = Window(self, seq=self.base + len(self.log))
            self.windows.add(window)
            return window

    def created(self, window: Window) -> frozenset[str]:
        """The names created since `window` opened that are still there (a
        listed window: those that appeared)."""
        with self.lock:
            if self.fd is not None:
                self.drain()
            self.windows.discard(window)
            if window.lost:
                return frozenset()  # events lost: the sweeps (shmref.oracle) find the rest
            if len(self.log) == window.seq - self.base:  # nothing since: the usual case
                return frozenset()
            found = frozenset(self.log[window.seq - self.base :])
            self.trim()
        return frozenset(n for n in found if os.path.lexists(f"{SHM}/{n}"))

    def drain(self) -> None:
        """Read every event queued (a read that finds none is the usual case)."""
        while self.fd is not None:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:  # the descriptor broke: list from now on
                self.lose()
                if self.fd is not None:
                    os.close(self.fd)
                self.fd = None
                return
            at = 0
            while at + EVENT.size <= len(data):
                _wd, mask, _cookie, length = EVENT.unpack_from(data, at)
                name = data[at + EVENT.size : at + EVENT.size + length].rstrip(b"\0")
                at += EVENT.size + length
                if mask & IN_Q_OVERFLOW:
                    self.lose()
                    return
                if mask & (IN_CREATE | IN_MOVED_TO) and name:
                    self.log.append(os.fsdecode(name))

    def trim(self) -> None:
        """Forget the names no open window can ask for."""
        oldest = min((w.seq for w in self.windows), default=self.base + len(self.log))
        drop = oldest - self.base
        if drop > 0:
            del self.log[:drop]
            self.base = oldest

    def stop(self) -> None:
        """Watch no more: the windows open now tell nothing."""
        with self.lock:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None
            self.lose()

    def lose(self) -> None:
        """Events were lost: the windows open now cannot tell what was made."""
        for window in list(self.windows):
            window.lost = True
        self.base += len(self.log)
        self.log.clear()


def inotify_fd() -> int | None:
    """A non-blocking inotify descriptor watching /dev/shm for new names, or
    None where there is none to be had."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = int(libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    if libc.inotify_add_watch(fd, os.fsencode(SHM), IN_CREATE | IN_MOVED_TO) < 0:
        os.close(fd)
        return None
    return fd


_WATCH: Watch | None = None
_START = threading.RLock()  # re-entrant, as Watch.lock
# What `current` compares without a system call per request (a request's
# cost is mostly its system calls and cold caches): this process's id,
# changed in a forked child only, and how many times it moved (`moved`).
_PID = os.getpid()
_MOVES = 0


def _forked() -> None:
    global _PID
    _PID = os.getpid()


os.register_at_fork(after_in_child=_forked)


def moved() -> None:
    """This process is on another /dev/shm from now on (shmref.oracle.
    privateshm mounted one of its own): the next window comes from a new
    watch, which looks at the folder the process sees now."""
    global _MOVES
    with _START:
        _MOVES += 1


def shm_device() -> int | None:
    try:
        return os.stat(SHM).st_dev
    except OSError:
        return None


def current(made: Watch | None) -> bool:
    """`made` watches this process's /dev/shm: made by this process (a
    forked child makes its own), and since its last move (a process that
    moved onto a /dev/shm of its own, shmref.oracle.privateshm, watches that
    one from then on: then the device says whether it is the same)."""
    if made is None or made.pid != _PID:
        return False
    return made.moves == _MOVES or made.device == shm_device()


def watch() -> Watch:
    """This process's watch."""
    global _WATCH
    made = _WATCH
    if made is not None and made.pid == _PID and made.moves == _MOVES:
        return made  # the usual case, without a lock or a system call
    with _START:
        if current(_WATCH):
            assert _WATCH is not None
            _WATCH.moves = _MOVES  # still on the /dev/shm it watches
            return _WATCH
        made = Watch()
        if current(_WATCH):  # one made meanwhile (a finalizer's request, re-entrant)
            if made.fd is not None:
                os.close(made.fd)
            assert _WATCH is not None
            return _WATCH
        old, _WATCH = _WATCH, made
        if old is not None and old.pid == os.getpid():
            old.stop()  # the /dev/shm it watched is not this process's now
        return made


def window() -> Window:
    """A request starts: the names created from now on are its to account for."""
    return watch().open()
