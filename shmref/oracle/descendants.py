"""Every process a child of the oracle started, found and ended, including
those that left its process group (a store program's child that called
`setsid`, or that outlived its parent).

Linux's child subreaper (`prctl(PR_SET_CHILD_SUBREAPER, 1)`): a process
that is one gets every orphaned descendant re-parented to it instead of to
init, so whatever it started stays below it however its members detach, and
is found by walking `/proc/PID/task/*/children` down from it. A child of
the oracle that runs the implementation (the worker, the contract check's
child) calls `hold()` first: its process becomes a subreaper and forks; the
fork goes on as the child, and the process above it (the holder) only waits
for it, reaps the orphans that come to it, and when the child ends, however
(a segfault, `os._exit`), ends every process left below it and exits as
the child did. When the oracle gives up on a child (a TIMEOUT), it stops the
child's whole tree (SIGSTOP: nothing forks or leaves any more), then kills
it (`end_tree`). The oracle is a subreaper too: orphans of a holder that was
itself killed come to it, and those of that child's session are ended with
the child (`end_adopted`).

Fallback: where prctl is unavailable (not Linux, or a kernel without
subreapers) `hold()` does nothing; the child's process group and what is
still below it are ended, but a descendant that called setsid and outlived
its parent went to init and may be left running (docs/protocol.md).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>


def become_subreaper() -> bool:
    """This process adopts its orphaned descendants (True), or cannot (False:
    no prctl here, or the kernel refused)."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return False
    return bool(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state, ppid,
    pgrp, session, ...); [] when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            text = file.read().decode(errors="replace")
    except OSError:
        return []
    return text.rsplit(")", 1)[-1].split()


def _has_children_files() -> bool:
    return os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def children(pid: int) -> list[int]:
    """`pid`'s children: from each of its threads' /proc children list, or
    (a kernel without them) from every process's parent in /proc/*/stat."""
    if not _has_children_files():
        found = []
        for entry in os.listdir("/proc"):
            fields = _stat(int(entry)) if entry.isdigit() else []
            if len(fields) > 1 and int(fields[1]) == pid:
                found.append(int(entry))
        return found
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found = []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as file:
                found += [int(word) for word in file.read().split()]
        except OSError:
            continue  # the thread ended meanwhile
    return found


def tree(root: int) -> list[int]:
    """Every live descendant of `root`, parents before their children."""
    order: list[int] = []
    seen = {root}
    todo = [root]
    while todo:
        for child in children(todo.pop(0)):
            if child not in seen:
                seen.add(child)
                order.append(child)
                todo.append(child)
    return order


def _settled(pid: int) -> bool:
    """Stopped, a zombie, or gone: it forks nothing any more."""
    fields = _stat(pid)
    return not fields or fields[0] in ("T", "t", "Z", "X")


def end_tree(root: int, *, include_root: bool = True, timeout: float = 5.0) -> list[int]:
    """Stop every process below `root` (and `root`) until a look finds no new
    one, then SIGKILL them all: a stopped process neither forks nor exits,
    so none is re-parented out of reach meanwhile. The pids ended."""
    stopped: list[int] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = ([root] if include_root and _stat(root) else []) + tree(root)
        new = [pid for pid in found if pid not in stopped]
        if not new:
            break
        for pid in new:
            try:
                os.kill(pid, signal.SIGSTOP)
            except OSError:
                continue
            stopped.append(pid)
        while not all(_settled(pid) for pid in new) and time.monotonic() < deadline:
            time.sleep(0.005)
    for pid in reversed(stopped):  # children first
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return stopped


def end_adopted(session: int) -> list[int]:
    """The orphans this process adopted (a subreaper) from `session` (a dead
    child's), and all below them, ended and reaped."""
    ended: list[int] = []
    for pid in children(os.getpid()):
        fields = _stat(pid)
        if len(fields) > 3 and int(fields[3]) == session:
            ended += end_tree(pid)
            _reap(pid)
    return ended


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _exit_as(status: int) -> None:
    """Exit as a child with wait status `status` did (killed by the same signal)."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file of the holder's
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)
        except (OSError, ValueError):
            pass
        os._exit(128 + number)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def hold() -> None:
    """Called first by a child of the oracle that runs the implementation:
    returns in a fork that goes on as that child, below a holder that ends
    whatever the child leaves (module docstring). Where this process cannot
    be a subreaper, returns at once without a holder (the fallback)."""
    if not become_subreaper():
        return
    child = os.fork()
    if child == 0:
        return
    while True:  # the child, and the orphans that come here meanwhile
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:  # pragma: no cover - the child is ours until it is reaped
            os._exit(1)
        if pid == child:
            break
    end_tree(os.getpid(), include_root=False)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    _exit_as(status)


def child_env() -> dict[str, str]:
    """This process's environment, with this process's import path (the
    implementation and shmref import in a child as they did here)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
