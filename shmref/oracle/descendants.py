"""Every process a child of the oracle started, found and ended, including
those that left its process group (a store program's child that called
`setsid`): each child gets a mark in its environment, which its
descendants inherit, and the end of the child ends every live process
that carries the mark."""

from __future__ import annotations

import os
import signal
import time
import uuid

MARK_ENV = "SHMREF_PROCESS_MARK"  # docs/protocol.md: how descendants are found


def marked_env(base: dict[str, str]) -> tuple[dict[str, str], str]:
    """`base` with a fresh mark: the environment of one child and the mark."""
    mark = uuid.uuid4().hex
    return {**base, MARK_ENV: mark}, mark


def carrying(mark: str) -> list[int]:
    """The live processes whose environment carries `mark` (zombies have none)."""
    needle = f"{MARK_ENV}={mark}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as file:
                environ = file.read()
        except OSError:
            continue  # gone, or not ours to read (then not ours to kill either)
        if needle in environ.split(b"\0"):
            found.append(int(entry))
    return found


def end_marked(mark: str, timeout: float = 5.0) -> list[int]:
    """SIGKILL every process carrying `mark`, again until none is left (a
    fork in flight is caught by the next look); the pids killed."""
    killed: list[int] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = carrying(mark)
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                pass
        time.sleep(0.02)
    return sorted(set(killed))
