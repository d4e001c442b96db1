"""Shared helpers: progress lines, medians, clean-up of segments and processes."""

from __future__ import annotations

import importlib
import math
import os
import signal
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BENCH_DIR = Path(__file__).resolve().parent
SPEC_DIR = REPO / "spec"

_START = time.monotonic()


def progress(message: str) -> None:
    """One progress line on stderr, stamped with the time since start."""
    print(f"[{time.monotonic() - _START:6.1f}s] {message}", file=sys.stderr, flush=True)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def ratio(a: float, b: float) -> float:
    return a / b if b else math.inf


def shm_segments() -> set[str]:
    """Segments in /dev/shm that could be ours (not semaphores or the tracker's)."""
    try:
        names = os.listdir("/dev/shm")
    except FileNotFoundError:
        return set()
    return {n for n in names if not n.startswith(("sem.", "lttng", "pym-"))}


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


@contextmanager
def cleanup_guard() -> Iterator[Callable[[], set[str]]]:
    """SIGTERM unwinds like Ctrl-C (so every `finally` closes its segments and
    stops its readers); yields a function that lists segments leaked so far."""
    before = shm_segments()
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield lambda: shm_segments() - before
    finally:
        signal.signal(signal.SIGTERM, previous)


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def load(impl_name: str) -> ModuleType:
    """An implementation by module name; "seed" is built from ../shared/seed."""
    if impl_name in ("seed", "shmref_seed"):
        from shmref.seedbuild import build_seed_module

        return build_seed_module()
    return importlib.import_module(impl_name)
