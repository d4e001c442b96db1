"""The contract check, a property like the others: the implementation is
imported (a program started, its `hello` read) in a child process, which
then creates a ring of 1024 bytes and a storage on it, asks the storage
for its `handle()`, and closes the ring (shmref.oracle.worker `--check`).

It runs in the isolation of the tests (shmref.oracle.isolation): a session
of its own killed as one, its descendants found below it even after
`setsid` (a subreaper: shmref.oracle.descendants), what it left in /dev/shm removed. Only
what leaves nothing to judge ends the run with exit 2: a module that does
not import or lacks required names, a program that cannot start or sends
no `hello`. A program that breaks the protocol, crashes or hangs during
the check gets its property's status (ERROR, CRASH, TIMEOUT); one that
leaves a segment behind, FAIL, as any test that leaks one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shmref.core.levels import CRASH, FAIL, SEED, TIMEOUT
from shmref.core.runconfig import RunConfig, running
from shmref.oracle.descendants import become_subreaper, child_env, end_adopted, end_tree
from shmref.oracle.events import ContractEnded, Event, Loaded, NotLoaded, parse
from shmref.oracle.isolation import signal_text
from shmref.oracle.shmclean import group_gone, remove_orphans
from shmref.oracle.verdict import Check
from shmref.process import has_programs
from shmref.process.segments import names as shm_names

NAME = "the contract check"
WHAT = (
    "the implementation starts: a ring of 1024 bytes, a storage on it "
    "(max_object_size 256, one reader), its handle(), the ring closed; "
    "nothing left in /dev/shm"
)
IMPORT_TIMEOUT = 600.0  # seconds a module may take to import (a program: its hello's limit)
SLACK = 30.0  # seconds beyond the calls' own limits (a program's exit after EOF)
TAIL = 20  # lines of the child's stderr in a CRASH's detail


@dataclass
class Checked:
    """What the check found: the module as its child loaded it (its name,
    import root, notes), or one line that ends the run (exit 2), or the
    check's property when it did not pass."""

    found: Loaded | None
    problem: str = ""
    check: Check | None = None


def events_of(path: Path) -> list[Event]:
    """The child's events on its stdout (lines that are no event, which the
    module under test may print there, skipped)."""
    found = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            found.append(parse(line))
        except ValueError:
            continue
    return found


def loaded_in(events: list[Event]) -> Loaded | None:
    return next((e for e in events if isinstance(e, Loaded)), None)


def tail(path: Path) -> str:
    return "\n".join(path.read_text(errors="replace").strip().splitlines()[-TAIL:])


def run_check(module: str, call_timeout: float, config: RunConfig | None = None) -> Checked:
    """Run the check of `module` in a child; whatever the child does, the
    oracle gets an answer within the check's limits. The child is told
    `config` (the protocol's limits), a request's limit `call_timeout` added
    unless the user set $SHMREF_EXEC_TIMEOUT."""
    from shmref.process.channel import request_timeout

    config = (config or RunConfig()).but(request_timeout=call_timeout)
    is_program = has_programs(module)
    before = shm_names()
    become_subreaper()  # the child's orphans come here, never to init
    load_limit = config.hello_timeout + SLACK if is_program else IMPORT_TIMEOUT
    with tempfile.TemporaryDirectory(prefix="shmref-check-") as folder:
        run = config.write(Path(folder) / "run.json")
        with running(config):  # the limit as the child will see it
            call_limit = 4 * request_timeout() + SLACK
        out, err = Path(folder) / "out", Path(folder) / "err"
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "shmref.oracle.checkchild", module, str(run)],
                stdout=stdout,
                stderr=stderr,
                stdin=subprocess.DEVNULL,
                env=child_env(),
                start_new_session=True,
            )
        started = loaded_at = time.monotonic()
        loaded: Loaded | None = None
        timed_out = False
        try:
            while process.poll() is None:
                time.sleep(0.05)
                if loaded is None:
                    loaded = loaded_in(events_of(out))
                    loaded_at = time.monotonic()
                limit = call_limit if loaded else load_limit
                if time.monotonic() - (loaded_at if loaded else started) > limit:
                    timed_out = True
                    break
        finally:
            end_tree(process.pid)  # stopped, then killed: none leaves meanwhile
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                pass
            process.wait()
            end_adopted(process.pid)  # its session's id is its pid
            group_gone(process.pid)
            end_adopted(process.pid)  # any that came here while they died: reaped
        removed = remove_orphans(before)
        said_events = events_of(out)
        loaded = loaded or loaded_in(said_events)
        final = next(
            (e for e in reversed(said_events) if isinstance(e, (NotLoaded, ContractEnded))), None
        )
        said = {"limit": call_limit if loaded else load_limit, "tail": tail(err)}
        ended = (process.returncode, timed_out)
        return judge(module, is_program, ended, loaded, final, removed, said)


def judge(
    module: str,
    is_program: bool,
    ended: tuple[int, bool],
    loaded: Loaded | None,
    final: NotLoaded | ContractEnded | None,
    removed: list[str],
    said: dict[str, Any],
) -> Checked:
    """The check's answer from what its child said and how it `ended`
    (its exit code, and whether it was killed at the limit)."""
    code, timed_out = ended
    if loaded is None:  # nothing to judge: exit 2
        if final is not None and final.problem:
            return Checked(None, final.problem)
        if timed_out:
            what = "sent no hello" if is_program else "did not import"
            return Checked(None, f"{module}: {what} within {said['limit']:g} s")
        last = (said["tail"].splitlines() or [""])[-1]
        return Checked(None, f"{module}: importing it {signal_text(code)}: {last}".rstrip(": "))
    found = loaded
    end = final if isinstance(final, ContractEnded) else None
    # its own leaks, as the child counted them (a diff of /dev/shm may see
    # another process's, made meanwhile): FAIL; after a failure, all it left
    leaked = sorted(end.leaked) if end is not None else []
    everything = sorted(set(leaked) | set(removed))
    left = f"; left in /dev/shm (removed): {', '.join(everything)}" if everything else ""
    if end is not None and end.status:
        check = Check(SEED, NAME, WHAT, end.status, detail=end.detail + left)
        return Checked(found, check=check)
    if final is not None and final.problem:
        return Checked(None, final.problem)
    if timed_out:
        detail = f"the check did not end within {said['limit']:g} s{left}"
        return Checked(found, check=Check(SEED, NAME, WHAT, TIMEOUT, detail=detail))
    if end is None:
        detail = f"the check's process {signal_text(code)}{left}:\n{said['tail']}".rstrip(":\n")
        return Checked(found, check=Check(SEED, NAME, WHAT, CRASH, detail=detail))
    if leaked:
        detail = f"test leaked shared-memory segments: {', '.join(leaked)} (removed)"
        return Checked(found, check=Check(SEED, NAME, WHAT, FAIL, detail=detail))
    return Checked(found)
