"""Shared helpers: progress lines, medians, clean-up of segments and processes."""

from __future__ import annotations

import math
import signal
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path
from types import FrameType
from typing import Any

from refimpl.serde import MsgpackOnlySerde
from shmref.core.paths import SPEC_DIR as SPEC_DIR  # the spec as shmref finds it
from shmref.seed.impl import load_impl
from shmref.session import shmtrack

# Every store is measured with one serde, refimpl's msgpack-only one (a bytes value
# stored as it is), whatever its default: the bench measures stores, not serdes (the
# default of refimpl and the seed, the releases' format, pickles every value).
BENCH_SERDE = MsgpackOnlySerde

REPO = Path(__file__).resolve().parents[1]
BENCH_DIR = Path(__file__).resolve().parent

_START = time.monotonic()


def progress(message: str) -> None:
    """One progress line on stderr, stamped with the time since start."""
    print(f"[{time.monotonic() - _START:6.1f}s] {message}", file=sys.stderr, flush=True)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def ratio(a: float, b: float) -> float:
    return a / b if b else math.inf


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


@contextmanager
def cleanup_guard() -> Iterator[Callable[[], set[str]]]:
    """SIGTERM unwinds like Ctrl-C (so every `finally` closes its segments and
    stops its readers); yields a function that lists the segments this
    process created and has not removed."""
    shmtrack.start()
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield shmtrack.leaked
    finally:
        signal.signal(signal.SIGTERM, previous)


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


load = load_impl

# examples/native_store (issue 24): importable here and in every reader
# process (spawned children import this module too).
NATIVE_DIR = REPO / "examples" / "native_store"
if str(NATIVE_DIR) not in sys.path:
    sys.path.append(str(NATIVE_DIR))


def load_native() -> tuple[Any, str | None]:
    """native_store if it is built: (module, None), else (None, why not)."""
    try:
        return load_impl("native_store"), None
    except ImportError as exc:
        return None, str(exc)


def segment_buf(memory: SharedMemory) -> memoryview:
    """The segment's bytes (CPython sets `buf` to None once closed)."""
    buf = memory.buf
    if buf is None:
        raise ValueError(f"shared memory {memory.name!r} is closed")
    return buf
