"""The physical limit of a put+get: one memcpy of the value into memory the
cache does not hold (issue 24). A put+get is at best two of them (one copy
in, one copy out).

Per size, a pass copies n values from a 128 MiB source pool into a 128 MiB
destination pool at distinct, page-aligned offsets, right after streaming
through a 64 MiB scratch buffer (twice the machine's largest L3 here), so
that neither side of any copy is cached. The pools are written once before
timing, so no page fault is measured. The per-copy time is the pass time
over n, less the same loop's time with 0-byte copies (the Python call).
"""

from __future__ import annotations

import ctypes
import time

from bench.common import median

POOL = 128 << 20
SCRATCH = 64 << 20
PAGE = 4096


def _flush(scratch: bytearray, other: bytearray) -> None:
    scratch[:] = other  # stream 64 MiB through the caches (not timed)


def cold_copy_us(size: int, reps: int = 7) -> dict[str, float]:
    """Median µs per cold copy of `size` bytes (and the call overhead removed)."""
    src, dst = bytearray(b"\x5a") * POOL, bytearray(b"\xa5") * POOL
    scratch, filler = bytearray(SCRATCH), bytearray(b"\x01") * SCRATCH
    stride = max(PAGE, (size + PAGE - 1) // PAGE * PAGE)
    n = max(1, min(4096, POOL // stride))
    src_at = ctypes.addressof(ctypes.c_char.from_buffer(src))
    dst_at = ctypes.addressof(ctypes.c_char.from_buffer(dst))
    offsets = [i * stride for i in range(n)]
    # the source offsets run backwards, so a copy never reads what the last one wrote
    pairs = [(dst_at + o, src_at + POOL - stride - o) for o in offsets]
    memmove = ctypes.memmove

    def one_pass(nbytes: int) -> float:
        _flush(scratch, filler)
        start = time.perf_counter()
        for d, s in pairs:
            memmove(d, s, nbytes)
        return time.perf_counter() - start

    timed = median([one_pass(size) for _ in range(reps)])
    overhead = median([one_pass(0) for _ in range(reps)])
    return {
        "copy_us": max(timed - overhead, 0.0) / n * 1e6,
        "call_us": overhead / n * 1e6,
        "copies_per_pass": n,
        "gb_per_s": size * n / max(timed - overhead, 1e-12) / 1e9,
    }


def run(sizes: dict[str, int]) -> list[dict[str, object]]:
    return [{"size": label, "bytes": size, **cold_copy_us(size)} for label, size in sizes.items()]


if __name__ == "__main__":
    for row in run({"64 B": 64, "4 KiB": 4096, "1 MiB": 1 << 20}):
        print(row)
