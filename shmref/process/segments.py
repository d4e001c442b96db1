"""Which /dev/shm entries a store program created: whatever appeared while
one of its requests was in flight and is held by no other process. The
program need not announce them (a constructor that fails after `shm_open`
leaves a segment no reply names), so the oracle accounts for every one:
charged to the test that made it, as a Python store's `SharedMemory` is
(shmref.testing.leaks), and removed when the program ends."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

SHM = "/dev/shm"

# Called with each name a program is found to have created (the leak guard
# of shmref.testing.leaks registers here: a higher layer listening).
CREATED_HOOKS: list[Callable[[str], None]] = []


def names() -> frozenset[str]:
    try:
        return frozenset(os.listdir(SHM))
    except OSError:
        return frozenset()


def holders_of(inodes: set[int], pids: Iterable[str]) -> set[str]:
    """The pids among `pids` that have one of `inodes` open or mapped."""
    found = set()
    for pid in pids:
        if held_by(pid, inodes):
            found.add(pid)
    return found


def held_by(pid: str, inodes: set[int]) -> bool:
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                if "/dev/shm/" in line:
                    fields = line.split()
                    if len(fields) > 4 and fields[4].isdigit() and int(fields[4]) in inodes:
                        return True
    except OSError:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(SHM + "/"):
                if os.stat(f"/proc/{pid}/fd/{fd}").st_ino in inodes:
                    return True
        except OSError:
            continue
    return False


def created_by(pid: int, before: frozenset[str]) -> list[str]:
    """What appeared in /dev/shm since `before` that no process other than
    the program `pid` (and its descendants) holds: the program's, whether
    it holds it or not (one nobody holds was made and dropped in its request)."""
    new = names() - before
    if not new:
        return []
    inodes: dict[int, str] = {}
    for name in new:
        try:
            inodes[os.stat(f"{SHM}/{name}").st_ino] = name
        except OSError:
            continue  # made and removed within the request: nothing to account for
    if not inodes:
        return []
    held = {inode for inode in inodes if held_by(str(pid), {inode})}  # the usual case
    rest = set(inodes) - held
    if rest:  # held by no one, or by another process (another store's, made meanwhile)
        ours = family(pid) | {str(os.getpid())}
        others = [p for p in os.listdir("/proc") if p.isdigit() and p not in ours]
        rest = {inode for inode in rest if not holders_of({inode}, others)}
    return sorted(inodes[inode] for inode in held | rest)


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


def unlink(name: str) -> bool:
    """Remove one segment; True if it was there."""
    try:
        os.unlink(f"{SHM}/{name.lstrip('/')}")
    except OSError:
        return False
    return True
