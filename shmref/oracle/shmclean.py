"""What a store's dead processes leave in /dev/shm: found by inode (held by
no live process) and removed, once the killed process group is gone."""

from __future__ import annotations

import os
import time
from collections.abc import Collection
from collections.abc import Set as AbstractSet
from pathlib import Path

from shmref.process.segments import FileId, file_id, held_among, names

SHM = Path("/dev/shm")


def held_inodes() -> set[FileId]:
    """Device and inode of the /dev/shm files that any live process has open or mapped."""
    return held_among(None, (pid for pid in os.listdir("/proc") if pid.isdigit()))


def orphans(
    before: AbstractSet[str], settle: float = 0.0, within: Collection[str] | None = None
) -> list[str]:
    """What appeared in /dev/shm since `before` (and is among `within`, when
    given) that no live process holds; with `settle`, still held by none that
    many seconds later (a sibling child's segment between its last unmap and
    its unlink is not an orphan)."""
    new = set(names() - before)
    if within is not None:
        new &= set(within)
    found: list[str] = []
    for look in range(2 if settle else 1):
        if look:
            time.sleep(settle)
        held = held_inodes()
        found = []
        for name in sorted(new):
            try:
                if file_id(str(SHM / name)) not in held:
                    found.append(name)
            except OSError:
                continue
        new = set(found)
        if not new:
            return []
    return found


def group_gone(group: int, timeout: float = 5.0) -> None:
    """Wait until no live process of process group `group` is left: a killed
    child's stragglers (readers its tests spawned, a resource tracker) hold
    their mappings until they are gone, and what they hold is no orphan yet."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = False
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(fields) > 2 and fields[2] == str(group) and fields[0] != "Z":
                alive = True
                break
        if not alive:
            return
        time.sleep(0.02)


def remove_orphans(before: AbstractSet[str], within: Collection[str] | None = None) -> list[str]:
    """Remove what appeared in /dev/shm since `before` (among `within`) and no
    live process holds: what the dead child's processes left."""
    removed = []
    for name in orphans(before, settle=0.3, within=within):
        try:
            (SHM / name).unlink()
            removed.append(name)
        except OSError:
            pass
    return removed


# -- one child -------------------------------------------------------------------------------
