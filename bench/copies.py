"""Copies of a value from `put` to a reader's object, counted, not assumed.

One put and one reader `get` of a 1 MiB value in this process, under
tracemalloc: a copy of the value into Python memory (msgpack's packing
buffer, a bytes object, a str) shows as about one value's size of peak
allocation. The copy into the segment allocates nothing, so it is counted
by construction (every contender writes the value once into shared memory).

    copies = put's peak / size + 1 (into the segment) + get's peak / size

rounded down per call: a call that allocates less than the value's size
made no copy of it (a buffer grown by realloc counts as its peak). "plain"
is the physical limit: the value written into a segment slice and read
back with `bytes(view)`.
"""

from __future__ import annotations

import dataclasses
import gc
import multiprocessing as mp
import tracemalloc
from collections.abc import Callable
from multiprocessing import shared_memory
from types import ModuleType
from typing import Any

from bench.common import BENCH_SERDE, load, load_native, segment_buf

SIZE = 1 << 20
KINDS = {"bytes": bytes(SIZE), "str (msgpack)": "x" * SIZE}


def peak_allocation(call: Callable[[], Any]) -> tuple[int, Any]:
    """(peak bytes allocated during the call, its result)."""
    gc.collect()
    gc.disable()  # no collection (and no finalizer) inside the measured call
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        result = call()
        return tracemalloc.get_traced_memory()[1] - base, result
    finally:
        tracemalloc.stop()
        gc.enable()


def store_copies(impl: ModuleType, value: Any) -> int:
    lock = mp.get_context("spawn").Lock()
    ring = impl.SingleWriterShmRingBuffer(2 * SIZE, create=True)
    try:
        writer = impl.SingleWriterShmObjectStorage(SIZE + 64, 1, ring, serde_class=BENCH_SERDE)
        reader = impl.SingleWriterShmObjectStorage.create_from_handle(
            dataclasses.replace(writer.handle(), reader_lock=lock)
        )
        try:
            put_peak, (address, monotonic_id) = peak_allocation(lambda: writer.put("k", value))
            signature = writer.get_signature("k")
            get_peak, got = peak_allocation(
                lambda: reader.get(address, monotonic_id, signature, "k")
            )
        finally:
            reader.close()
    finally:
        ring.close()
    if got != value:
        raise RuntimeError(f"{impl.__name__}: the value read back differs")
    return put_peak // SIZE + 1 + get_peak // SIZE


def _write(memory: shared_memory.SharedMemory, value: bytes) -> None:
    segment_buf(memory)[: len(value)] = value


def plain_copies(value: bytes) -> int:
    memory = shared_memory.SharedMemory(create=True, size=SIZE)
    try:
        put_peak, _ = peak_allocation(lambda: _write(memory, value))
        get_peak, got = peak_allocation(lambda: bytes(segment_buf(memory)[:SIZE]))
    finally:
        memory.unlink()
        memory.close()
    if got != value:
        raise RuntimeError("plain: the value read back differs")
    return put_peak // SIZE + 1 + get_peak // SIZE


def run(seed_impl: ModuleType | None) -> list[dict[str, Any]]:
    impls = {"refimpl": load("refimpl"), "seed": seed_impl, "native": load_native()[0]}
    rows = []
    for kind, value in KINDS.items():
        row: dict[str, Any] = {"kind": kind, "bytes": SIZE}
        for name, impl in impls.items():
            if impl is not None:
                row[name] = store_copies(impl, value)
        if isinstance(value, bytes):
            row["plain"] = plain_copies(value)
        rows.append(row)
    return rows
