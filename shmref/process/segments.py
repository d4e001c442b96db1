"""Which /dev/shm entries a store program created: whatever appeared while
one of its requests was in flight, and is held by the program or by no
process at all (one nobody holds was made and dropped in its request: a
constructor that fails after `shm_open` leaves a segment no reply names).
The oracle accounts for every one: charged to the test that made it, as a
Python store's `SharedMemory` is (shmref.testing.leaks), and removed when
the program ends.

Each request notes the names created while it was in flight (told by the
kernel: shmref.process.shmwatch) and, only when some were, who holds them:
an entry another process holds then is not the program's, even if its maker
drops it before the test ends (other runs on the same machine make and drop
theirs all the time). Who holds the rest is looked up again when a test ends
or the program stops (`settle`)."""

from __future__ import annotations

import os
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator

from shmref.process.shmwatch import SHM, Window, names, watch

__all__ = ["SHM", "Ledger", "Window", "names", "settle_all", "unlink", "window"]

# Called with each name a program is found to have created (the leak guard
# of shmref.testing.leaks registers here: a higher layer listening).
CREATED_HOOKS: list[Callable[[str], None]] = []


def window() -> Window:
    """A request starts: the names created from now on are its to account for."""
    return watch().open()


# Processes lately seen holding an entry of /dev/shm, asked first: on a machine
# shared with other runs, what appears during a request is mostly theirs.
HOLDERS: OrderedDict[str, None] = OrderedDict()
HOLDERS_KEPT = 64


def held_among(inodes: set[int] | None, pids: Iterable[str]) -> set[int]:
    """Which of `inodes` (None: any /dev/shm file's) the processes `pids`
    have open or mapped (asked no further once all of `inodes` are found)."""
    held: set[int] = set()
    for _pid, found in holders(inodes, pids):
        held |= found
    return held


def holders(inodes: set[int] | None, pids: Iterable[str]) -> Iterator[tuple[str, set[int]]]:
    """Each of `pids` that holds some of `inodes` (None: any /dev/shm
    file's), with what it holds; no further once all of `inodes` are found.
    Looking for given inodes, every process's mappings are read before any
    process's descriptors (a holder maps what it holds, mostly: reading
    descriptors costs a look at each of them)."""
    if inodes is None:
        for pid in pids:
            found = held_by(pid, None)
            if found:
                yield pid, found
        return
    left, order = set(inodes), list(pids)
    for look in (mapped_by, opened_by):
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


def held_by(pid: str, inodes: set[int] | None) -> set[int]:
    """Which of `inodes` (None: any /dev/shm file's) process `pid` has open
    or mapped. By inode, not name: glibc's sem_open maps a temporary file,
    then links it to the semaphore's name, so a mapping shows another
    (deleted) name."""
    return mapped_by(pid, inodes) | opened_by(pid, inodes)


def mapped_by(pid: str, inodes: set[int] | None) -> set[int]:
    held: set[int] = set()
    try:
        with open(f"/proc/{pid}/maps", "rb") as maps:
            data = maps.read()
    except OSError:
        return held
    if b"/dev/shm/" in data:
        for line in data.splitlines():
            if b"/dev/shm/" in line:
                fields = line.split()
                if (
                    len(fields) > 4
                    and fields[4].isdigit()
                    and (inodes is None or int(fields[4]) in inodes)
                ):
                    held.add(int(fields[4]))
    return held


def opened_by(pid: str, inodes: set[int] | None) -> set[int]:
    held: set[int] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return held
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(SHM + "/"):
                inode = os.stat(f"/proc/{pid}/fd/{fd}").st_ino
                if inodes is None or inode in inodes:
                    held.add(inode)
        except OSError:
            continue
    return held


def likely_first(pids: Iterable[str]) -> list[str]:
    """`pids`, those lately seen holding an entry first (most recent first)."""
    given = list(pids)
    recent = [p for p in reversed(HOLDERS) if p in set(given)]
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
    inodes: dict[int, str] = {}
    for name in candidates:
        try:
            inodes[os.stat(f"{SHM}/{name}").st_ino] = name
        except OSError:
            continue  # gone already: nothing to account for
    if not inodes:
        return []
    kin = set() if kin is None else kin
    held_by_us: set[int] = set()
    for holder, found in holders(set(inodes), [str(pid), *sorted(kin)]):
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
    return sorted(inodes[inode] for inode in held_by_us | rest)


class Ledger:
    """One program's /dev/shm entries: the names that appeared during its
    requests (`note`), settled into its own (`settle`, which tells the hooks)."""

    def __init__(self) -> None:
        self.pid = 0
        self.candidates: set[str] = set()
        self.own: set[str] = set()
        self.kin: set[str] = set()  # the program's descendants seen holding an entry
        LEDGERS.add(self)

    def note(self, since: Window) -> None:
        """The entries created since the window opened (`window()`), those
        another process holds left out at once: on a machine shared with
        other runs, an entry another process made meanwhile is still held by
        its maker now, but may be dropped (not yet unlinked) when the test ends."""
        appeared = since.created()
        if appeared and self.pid:
            appeared = frozenset(created_by(self.pid, appeared, self.kin))
        self.candidates |= appeared

    def settle(self) -> list[str]:
        """The program's new entries (each told to CREATED_HOOKS once)."""
        if not self.candidates or not self.pid:
            return []
        found = [
            n
            for n in created_by(self.pid, self.candidates - self.own, self.kin)
            if n not in self.own
        ]
        self.candidates.clear()
        self.own.update(found)
        for name in found:
            for hook in CREATED_HOOKS:
                hook(name)
        return found


LEDGERS: weakref.WeakSet[Ledger] = weakref.WeakSet()


def settle_all() -> None:
    """Every program's entries accounted for (a test's end: its leaks)."""
    for ledger in list(LEDGERS):
        ledger.settle()


def unlink(name: str) -> bool:
    """Remove one segment; True if it was there."""
    try:
        os.unlink(f"{SHM}/{name.lstrip('/')}")
    except OSError:
        return False
    return True
