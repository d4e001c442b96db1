"""Which /dev/shm entries a store program created: whatever appeared while
one of its requests was in flight, and is held by the program or by no
process at all (one nobody holds was made and dropped in its request: a
constructor that fails after `shm_open` leaves a segment no reply names).
The oracle accounts for every one: charged to the test that made it, as a
Python store's `SharedMemory` is (shmref.session.leaks, which takes them
from `found`), and removed when the program ends.

Each request notes the names that appeared (two directory listings) and,
only when some did, who holds them: an entry another process holds then is
not the program's, even if its maker drops it before the test ends (other
runs on the same machine make and drop theirs all the time). Who holds the
rest is looked up again when a test ends or the program stops (`settle`)."""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterable

SHM = "/dev/shm"

# Each name a program was found to have created, until `found` takes it
# (the leak guard of shmref.session.leaks asks; nothing here calls up).
_FOUND: list[str] = []


def names() -> frozenset[str]:
    try:
        return frozenset(os.listdir(SHM))
    except OSError:
        return frozenset()


FileId = tuple[int, int]  # (st_dev, st_ino): inode numbers alone repeat across tmpfs mounts


def file_id(path: str) -> FileId:
    """The file's identity (raises OSError when it is gone)."""
    stat = os.stat(path)
    return (stat.st_dev, stat.st_ino)


def held_among(files: set[FileId] | None, pids: Iterable[str]) -> set[FileId]:
    """Which of `files` (None: any /dev/shm file) the processes `pids` have
    open or mapped. By device and inode, not name: glibc's sem_open maps a
    temporary file, then links it to the semaphore's name, so a mapping
    shows another (deleted) name; and another run's private /dev/shm
    (shmref.oracle.privateshm) numbers its inodes from the same start."""
    held: set[FileId] = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
                for line in maps:
                    if "/dev/shm/" in line:
                        fields = line.split()
                        if len(fields) > 4 and fields[4].isdigit() and ":" in fields[3]:
                            major, minor = fields[3].split(":", 1)
                            device = os.makedev(int(major, 16), int(minor, 16))
                            found = (device, int(fields[4]))
                            if files is None or found in files:
                                held.add(found)
        except (OSError, ValueError):
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(SHM + "/"):
                    found = file_id(f"/proc/{pid}/fd/{fd}")
                    if files is None or found in files:
                        held.add(found)
            except OSError:
                continue
    return held


def family(pid: int) -> set[str]:
    """`pid` and its live descendants (by parent pid)."""
    parents: dict[str, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as stat:
                parents[entry] = stat.read().rsplit(")", 1)[1].split()[1]
        except (OSError, IndexError):
            continue
    found, grew = {str(pid)}, True
    while grew:
        more = {child for child, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return found


def created_by(pid: int, candidates: Iterable[str]) -> list[str]:
    """Of the `candidates` (entries that appeared during the program's
    requests), those still there that no process other than the program
    `pid` (and its descendants) holds."""
    inodes: dict[FileId, str] = {}
    for name in candidates:
        try:
            inodes[file_id(f"{SHM}/{name}")] = name
        except OSError:
            continue  # gone already: nothing to account for
    if not inodes:
        return []
    ours = family(pid) | {str(os.getpid())}
    held_by_us = held_among(set(inodes), ours - {str(os.getpid())})
    rest = set(inodes) - held_by_us
    if rest:  # held by no one, or by another process (made meanwhile)
        others = (p for p in os.listdir("/proc") if p.isdigit() and p not in ours)
        rest -= held_among(rest, others)
        # a lock this process made meanwhile (a multiprocessing lock, made by
        # another thread or an import) is its own: the proxy maps a program's
        # segments, never a program's semaphores
        locks = {f for f in rest if inodes[f].startswith("sem.")}
        rest -= held_among(locks, [str(os.getpid())])
    return sorted(inodes[inode] for inode in held_by_us | rest)


class Ledger:
    """One program's /dev/shm entries: the names that appeared during its
    requests (`note`), settled into its own (`settle`, which tells the hooks)."""

    def __init__(self) -> None:
        self.pid = 0
        self.candidates: set[str] = set()
        self.own: set[str] = set()
        LEDGERS.add(self)

    def note(self, before: frozenset[str]) -> None:
        """The entries that appeared since `before`, those another process
        holds left out at once: on a machine shared with other runs, an
        entry another process made meanwhile is still held by its maker
        now, but may be dropped (not yet unlinked) when the test ends."""
        appeared = names() - before
        if appeared and self.pid:
            appeared = frozenset(created_by(self.pid, appeared))
        self.candidates |= appeared

    def settle(self) -> list[str]:
        """The program's new entries (each queued for `found` once)."""
        if not self.candidates or not self.pid:
            return []
        found = [n for n in created_by(self.pid, self.candidates - self.own) if n not in self.own]
        self.candidates.clear()
        self.own.update(found)
        _FOUND.extend(found)
        return found


LEDGERS: weakref.WeakSet[Ledger] = weakref.WeakSet()


def settle_all() -> None:
    """Every program's entries accounted for (a test's end: its leaks)."""
    for ledger in list(LEDGERS):
        ledger.settle()


def found() -> list[str]:
    """The entries programs were found to have created since the last call."""
    taken = list(_FOUND)
    del _FOUND[: len(taken)]
    return taken


def unlink(name: str) -> bool:
    """Remove one segment; True if it was there."""
    try:
        os.unlink(f"{SHM}/{name.lstrip('/')}")
    except OSError:
        return False
    return True
