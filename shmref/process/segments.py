"""Which /dev/shm entries a store program created: whatever appeared while
one of its requests was in flight, and is held by the program or by no
process at all (one nobody holds was made and dropped in its request: a
constructor that fails after `shm_open` leaves a segment no reply names).
The oracle accounts for every one: charged to the test that made it, as a
Python store's `SharedMemory` is (shmref.session.leaks, which takes them
from `found`), and removed when the program ends.

Each request notes the names created while it was in flight (told by the
kernel, else two directory listings: shmref.process.shmwatch) and, only
when some were, who holds them: an entry another process holds then is not
the program's, even if its maker drops it before the test ends (other runs
on the same machine make and drop theirs all the time). Who holds the rest
is looked up again when a test ends or the program stops (`settle`)."""

from __future__ import annotations

import os
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator

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


# Processes lately seen holding an entry of /dev/shm, asked first: on a machine
# shared with other runs, what appears during a request is mostly theirs.
HOLDERS: OrderedDict[str, None] = OrderedDict()
HOLDERS_KEPT = 64


def held_among(files: set[FileId] | None, pids: Iterable[str]) -> set[FileId]:
    """Which of `files` (None: any /dev/shm file) the processes `pids` have
    open or mapped (asked no further once all of `files` are found). By
    device and inode, not name: glibc's sem_open maps a temporary file, then
    links it to the semaphore's name, so a mapping shows another (deleted)
    name; and another run's private /dev/shm (shmref.oracle.privateshm)
    numbers its inodes from the same start."""
    held: set[FileId] = set()
    for _pid, found in holders(files, pids):
        held |= found
    return held


def holders(
    files: set[FileId] | None, pids: Iterable[str], descriptors_first: bool = False
) -> Iterator[tuple[str, set[FileId]]]:
    """Each of `pids` that holds some of `files` (None: any /dev/shm file),
    with what it holds; no further once all of `files` are found. Looking
    for given files, every process's mappings are read before any process's
    descriptors (a holder maps what it holds, mostly: reading descriptors
    costs a look at each of them), or the other way round (`descriptors_first`:
    for a program and its kin, which have few descriptors and keep a segment's
    open while it is theirs, mostly: a Python program's maps are thousands of
    lines, read after every request that made a segment)."""
    if files is None:
        for pid in pids:
            found = mapped_by(pid, None) | opened_by(pid, None)
            if found:
                yield pid, found
        return
    left, order = set(files), list(pids)
    for look in (opened_by, mapped_by) if descriptors_first else (mapped_by, opened_by):
        for pid in order:
            if not left:
                return
            found = look(pid, left)
            if found:
                left -= found
                HOLDERS[pid] = None
                HOLDERS.move_to_end(pid)
                if len(HOLDERS) > HOLDERS_KEPT:
                    HOLDERS.popitem(last=False)
                yield pid, found


def mapped_by(pid: str, files: set[FileId] | None) -> set[FileId]:
    """Which of `files` (None: any /dev/shm file) process `pid` maps."""
    held: set[FileId] = set()
    try:
        with open(f"/proc/{pid}/maps", "rb") as maps:
            data = maps.read()
    except OSError:
        return held
    if b"/dev/shm/" not in data:
        return held
    for line in data.splitlines():
        if b"/dev/shm/" in line:
            fields = line.split()
            if len(fields) > 4 and fields[4].isdigit() and b":" in fields[3]:
                major, minor = fields[3].split(b":", 1)
                try:
                    device = os.makedev(int(major, 16), int(minor, 16))
                except ValueError:
                    continue
                found = (device, int(fields[4]))
                if files is None or found in files:
                    held.add(found)
    return held


def opened_by(pid: str, files: set[FileId] | None) -> set[FileId]:
    """Which of `files` (None: any /dev/shm file) process `pid` has open."""
    held: set[FileId] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return held
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(SHM + "/"):
                found = file_id(f"/proc/{pid}/fd/{fd}")
                if files is None or found in files:
                    held.add(found)
        except OSError:
            continue
    return held


def likely_first(pids: Iterable[str]) -> list[str]:
    """`pids`, those lately seen holding an entry first (most recent first)."""
    given = list(pids)
    present = set(given)
    recent = [p for p in reversed(HOLDERS) if p in present]
    return recent + [p for p in given if p not in HOLDERS]


def parent(pid: str) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[1]
    except (OSError, IndexError):
        return None


def descends(pid: str, ancestor: int) -> bool:
    """`pid` is a live descendant of `ancestor` (by parent pids)."""
    seen: set[str] = set()
    up = parent(pid)
    while up is not None and up not in seen and up not in ("0", "1"):
        if up == str(ancestor):
            return True
        seen.add(up)
        up = parent(up)
    return False


def created_by(pid: int, candidates: Iterable[str], kin: set[str] | None = None) -> list[str]:
    """Of the `candidates` (entries that appeared during the program's
    requests), those still there that no process other than the program
    `pid` (and its descendants) holds. `kin`: the descendants known so far,
    asked first and kept up to date (a holder found below the program joins
    it): the whole process table is read only for what they do not hold,
    and no further than its holders, those lately seen first."""
    inodes: dict[FileId, str] = {}
    for name in candidates:
        try:
            inodes[file_id(f"{SHM}/{name}")] = name
        except OSError:
            continue  # gone already: nothing to account for
    if not inodes:
        return []
    kin = set() if kin is None else kin
    held_by_us: set[FileId] = set()
    for holder, found in holders(set(inodes), [str(pid), *sorted(kin)], descriptors_first=True):
        if holder == str(pid) or descends(holder, pid):
            held_by_us |= found
        else:
            kin.discard(holder)  # gone, and its pid taken by another process
    rest = set(inodes) - held_by_us
    if rest:  # held by a descendant not known yet, by another process, or by no one
        skip = {str(os.getpid()), str(pid), *kin}
        others = (p for p in os.listdir("/proc") if p.isdigit() and p not in skip)
        for holder, found in holders(rest, likely_first(others)):
            if descends(holder, pid):
                kin.add(holder)
                held_by_us |= found
            rest -= found
        # a lock this process made meanwhile (a multiprocessing lock, made by
        # another thread or an import) is its own: the proxy maps a program's
        # segments, never a program's semaphores
        locks = {f for f in rest if inodes[f].startswith("sem.")}
        rest -= held_among(locks, [str(os.getpid())])
    return sorted(inodes[inode] for inode in held_by_us | rest)


class Ledger:
    """One program's /dev/shm entries: the names created during its requests
    (`note`), settled into its own (`settle`, which queues them for `found`)."""

    def __init__(self) -> None:
        self.pid = 0
        self.candidates: set[str] = set()
        self.own: set[str] = set()
        self.kin: set[str] = set()  # the program's descendants seen holding an entry
        LEDGERS.add(self)

    def note(self, appeared: frozenset[str]) -> None:
        """The entries created during a request (shmref.process.shmwatch's
        window), those another process holds left out at once: on a machine
        shared with other runs, an entry another process made meanwhile is
        still held by its maker now, but may be dropped (not yet unlinked)
        when the test ends."""
        if appeared and self.pid:
            appeared = frozenset(created_by(self.pid, appeared, self.kin))
        self.candidates |= appeared

    def settle(self) -> list[str]:
        """The program's new entries (each queued for `found` once)."""
        if not self.candidates or not self.pid:
            return []
        fresh = self.candidates - self.own
        found = [n for n in created_by(self.pid, fresh, self.kin) if n not in self.own]
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
