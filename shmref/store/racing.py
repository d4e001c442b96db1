"""Races made to happen, not hoped for: reader threads released together by
one barrier, with a scheduler that hands the interpreter to another thread
at every line of Python the threads run (outside the standard library and
shmref's own code), and a 1 µs switch interval in between.

Why: under the GIL, a thread keeps the interpreter for its whole switch
interval (5 ms by default), and a store's read-modify-write of a count is a
few bytecodes of a read that takes some 30 µs: eight threads doing 25 reads
each almost never lose the interpreter inside it (the seed with its
increment outside the lock was caught in 0 of 20 runs). Yielding at each
line of the store's code makes the threads advance in near lockstep, so two
of them sit between reading the count and writing it back many times per
run. A store whose racing section is C that releases the GIL (a cffi or
ctypes call) is driven by the same lockstep: the threads enter its call
together. Across processes (`race_with_others`) the processes run truly in parallel;
a barrier they share starts each round, and each reads back to back, so
that their reads collide from the first and keep colliding. What a miss
costs, measured per property (`python -m bench.races`): docs/conformance.md,
"Races".
"""

from __future__ import annotations

import contextlib
import os
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

SWITCH_INTERVAL = 1e-6  # seconds: the interpreter's shortest useful interval
BARRIER_TIMEOUT = 60.0
STDLIB = tuple({sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]})
INSTALLED = ("site-packages", "dist-packages")  # below the stdlib's folder, and traced
# The oracle's own code (its call recorder, the process proxy and its
# transport) is not the store's: traced, a program's request would take
# seconds, its readers queueing on the oracle's lock past --call-timeout.
SHMREF = str(Path(__file__).resolve().parents[1]) + os.sep

# The shapes of the suite's two race properties (test_storage_readers.py),
# here for the measurement that argues them (python -m bench.races): 16
# threads of one reader, 16 rounds of one read each; three reader processes,
# 16 rounds of 2 reads back to back each. docs/conformance.md, "Races".
THREADS, THREAD_ROUNDS = 16, 16
PROCESSES, PROCESS_ROUNDS, PROCESS_READS = 3, 16, 2

Tracer = Callable[[FrameType, str, Any], Any]


def _yield_each_line(frame: FrameType, event: str, arg: Any) -> Tracer | None:
    """Local trace: give the interpreter away before each line runs."""
    if event == "line":
        time.sleep(0)  # releases the GIL: a waiting thread takes it
    return _yield_each_line


def _store_frames(frame: FrameType, event: str, arg: Any) -> Tracer | None:
    """Global trace: lines of every frame but the standard library's (the
    threading module's own, the barrier's) and shmref's own are yield
    points; a call is one too. A store installed into site-packages (below
    the stdlib's folder in most layouts) is traced."""
    filename = frame.f_code.co_filename
    if filename.startswith(STDLIB) and not any(part in filename for part in INSTALLED):
        return None
    if filename.startswith(SHMREF):
        return None
    time.sleep(0)
    return _yield_each_line


@contextlib.contextmanager
def yielding_at_each_line() -> Iterator[None]:
    """This thread yields at every line of the store's code, until the block ends."""
    sys.settrace(_store_frames)
    try:
        yield
    finally:
        sys.settrace(None)


@contextlib.contextmanager
def switching_often() -> Iterator[None]:
    """The interpreter switches threads as often as it can, until the block ends."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def race(
    threads_n: int,
    rounds: int,
    body: Callable[[], None],
    after_round: Callable[[], None] | None = None,
) -> None:
    """Run `body` `rounds` times in each of `threads_n` threads: every round
    starts when all threads reached one barrier (so each round is a fresh
    collision of all of them, independent of the ones before), and each
    thread yields the interpreter at every line it runs (outside the
    standard library). `after_round` runs in one thread when all are back
    at the barrier (a measurement's hook). The first exception of any thread
    is raised here, once the others stopped."""
    start = threading.Barrier(threads_n, action=after_round, timeout=BARRIER_TIMEOUT)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for _ in range(rounds):
                start.wait()
                with yielding_at_each_line():
                    body()
            start.wait()  # the last round's after_round
        except threading.BrokenBarrierError:
            pass  # another thread failed: its error is the one raised
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)
            start.abort()

    threads = [threading.Thread(target=run, name=f"racing-reader-{i}") for i in range(threads_n)]
    with switching_often():
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]


def race_with_others(start: Any, rounds: int, reads: int, body: Callable[[], None]) -> int:
    """Run `body` `reads` times back to back in each of `rounds` rounds, each
    round started when `start` (a barrier shared with the other processes
    of the race) let all of them go, yielding at every line of the store's
    code as `race` does. The processes run truly in parallel: the barrier
    lines up their first reads, and the reads after it keep colliding
    (a store in C or behind the process protocol runs untraced: the barrier
    alone lines up its calls). How many reads ran."""
    for _ in range(rounds):
        start.wait(BARRIER_TIMEOUT)
        with yielding_at_each_line():
            for _ in range(reads):
                body()
    return rounds * reads
