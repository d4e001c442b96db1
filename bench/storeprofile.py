"""Where a put+get's time goes: the same put and get as `bench.store` in one
process under cProfile, each function's own time sorted into serialize /
copy into shm / signatures / deserialize / reader lock / C core / other, for
refimpl, the seed and native_store."""

from __future__ import annotations

import cProfile
import inspect
import pstats
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.common import BENCH_SERDE, load, load_native, progress
from bench.storeprocs import CTX, StoreWriter

CATEGORIES = (
    "serialize",
    "copy into shm",
    "signatures",
    "deserialize",
    "reader lock",
    "C core",
    "other",
)
_SIGNATURE_METHODS = {
    "_make_signature",
    "verify_signature",
    "_verify_reader_signature",
    "get_signature",
    "get_auth_secret",
}


def _method_ranges(impl: ModuleType) -> list[tuple[str, int, int, str]]:
    """(file, first line, last line, method name) of the storage's, ring's and
    serde's methods, to find which method a profiled line belongs to."""
    ranges = []
    for cls in (
        impl.SingleWriterShmObjectStorage,
        impl.SingleWriterShmRingBuffer,
        BENCH_SERDE,
    ):
        members = {n: m for klass in reversed(cls.__mro__) for n, m in vars(klass).items()}
        for name, member in members.items():  # inherited too (native_store binds subclasses)
            func = getattr(member, "__func__", member)
            func = getattr(func, "__wrapped__", func)
            if not inspect.isfunction(func):
                continue
            lines, first = inspect.getsourcelines(func)
            ranges.append((inspect.getsourcefile(func) or "", first, first + len(lines) - 1, name))
    return ranges


def _category(file: str, line: int, func: str, ranges: list[tuple[str, int, int, str]]) -> str:
    if func.startswith("<built-in method _ns_"):  # native_store's C calls (copies included)
        return "C core"
    if func.startswith("<method 'unpack' of '_cffi_backend."):
        return "deserialize"  # native_store's copy out of the segment (cffi's memcpy)
    if "SemLock" in func:
        return "reader lock"
    if "packb" in func or "Packer" in func:
        return "serialize"
    if "Unpacker" in func or "unpackb" in func:
        return "deserialize"
    if (
        Path(file).name in ("hmac.py", "hashlib.py")
        or "_hashlib" in func
        or "compare_digest" in func
        or "openssl" in func
    ):
        return "signatures"
    method = next((name for f, lo, hi, name in ranges if f == file and lo <= line <= hi), None)
    if method in _SIGNATURE_METHODS or func == "signature_bytes":
        return "signatures"
    if method == "serialize":
        return "serialize"
    if method == "deserialize":
        return "deserialize"
    if method in ("put", "copy_to_buffer") and func in ("put", "copy_to_buffer"):
        return "copy into shm"
    return "other"


def profile(impl: ModuleType, size: int, ops: int, batch: int) -> dict[str, float]:
    """Share of put+get time per category (cProfile self time, one process)."""
    lock = CTX.Lock()
    writer = StoreWriter(impl, size, batch, 1, lock)
    reader = impl.SingleWriterShmObjectStorage.create_from_handle(writer.writer.handle())
    value = bytes(size)
    profiler = cProfile.Profile()
    try:
        for address, monotonic_id, signature, key in writer.put_batch(value, batch):
            reader.get(address, monotonic_id, signature, key)  # warm-up, not profiled
        done = 0
        while done < ops:
            n = min(batch, ops - done)
            profiler.enable()
            handles = writer.put_batch(value, n)
            for address, monotonic_id, signature, key in handles:
                reader.get(address, monotonic_id, signature, key)
            profiler.disable()
            done += n
    finally:
        reader.close()
        writer.close()
    ranges = _method_ranges(impl)
    shares = dict.fromkeys(CATEGORIES, 0.0)
    stats: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    for (file, line, func), (_cc, _nc, tottime, _ct, _callers) in stats.items():
        shares[_category(file, line, func, ranges)] += tottime
    total = sum(shares.values()) or 1.0
    return {name: seconds / total for name, seconds in shares.items()}


def profiles(
    sizes: dict[str, int],
    profile_ops: int,
    batch_min: int,
    batch: Callable[[int], int],
    seed_impl: ModuleType | None,
) -> list[dict[str, Any]]:
    """`profile` at every size for every contender there is: at most
    `profile_ops` objects (fewer for large ones), in batches of `batch(size)`."""
    rows = []
    native = load_native()[0]
    impls = (
        [("refimpl", load("refimpl"))]
        + ([("seed", seed_impl)] if seed_impl else [])
        + ([("native", native)] if native else [])
    )
    for label, size in sizes.items():
        ops = min(profile_ops, max(batch_min, (64 << 20) // size))
        for name, impl in impls:
            shares = profile(impl, size, ops, batch(size))
            rows.append({"size": label, "contender": name, "ops": ops, "shares": shares})
        progress(f"store: profiled {label}")
    return rows
