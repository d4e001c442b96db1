"""put+get throughput: refimpl vs the seed vs a plain copy into shared memory.

One round: the writer puts a batch of objects (put + get_signature, i.e. a
signed handle each), sends the handles to every reader process, and the
readers `get` them all, in parallel with each other; the round ends when the
last reader is done. put+get/s = objects per round / round time. The "plain"
contender is the physical limit: the writer copies the value's bytes into a
shared-memory segment and each reader copies them out (`bytes(view)`), with
the same processes, pipes and batches, but no serialization, signature,
allocator or lock.

Contenders take turns round by round (the order rotates every repetition)
and each number is the median over repetitions, so that the noise of a
shared machine hits all of them alike.

`profile` runs the same put and get in one process under cProfile and sorts
each function's own time into serialize / copy / signatures / deserialize /
locking / other, for refimpl and the seed.
"""

from __future__ import annotations

import cProfile
import dataclasses
import inspect
import math
import multiprocessing as mp
import pstats
import resource
import signal
import statistics
import time
from collections.abc import Callable
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from multiprocessing import shared_memory
from multiprocessing.connection import Connection
from pathlib import Path
from types import ModuleType
from typing import Any

from bench import coldcopy, copies
from bench.common import load, load_native, median, progress, ratio, segment_buf

CTX = mp.get_context("spawn")
CONTENDERS = ("refimpl", "seed", "native", "plain")
MODULES = {"native": "native_store"}  # contender -> the module a reader loads
SIZES = {"64 B": 64, "4 KiB": 4096, "1 MiB": 1 << 20}
CHUNK_SLACK = 64  # header, count and msgpack framing, with room to spare


@dataclass(frozen=True)
class StoreConfig:
    sizes: dict[str, int]
    readers: tuple[int, ...]
    reps: int  # samples per contender (median taken)
    rounds: int  # rounds per sample
    batch_bytes: int  # objects per round = batch_bytes / size, clamped
    batch_min: int
    batch_max: int
    profile_ops: int  # objects put and read per size under cProfile

    def batch(self, size: int) -> int:
        return max(self.batch_min, min(self.batch_max, self.batch_bytes // size))


FULL = StoreConfig(
    SIZES,
    (1, 3),
    reps=21,
    rounds=3,
    batch_bytes=32 << 20,  # 32 objects of 1 MiB a round: the round's messages weigh less
    batch_min=8,
    batch_max=1000,
    profile_ops=2000,
)
QUICK = StoreConfig(
    {"64 B": 64, "4 KiB": 4096, "64 KiB": 64 << 10},
    (1, 2),
    reps=2,
    rounds=1,
    batch_bytes=256 << 10,
    batch_min=4,
    batch_max=100,
    profile_ops=100,
)
# A shared machine's check of the native store at the full sizes: one reader,
# few repetitions (`python -m bench --reduced`).
REDUCED = StoreConfig(
    SIZES,
    (1,),
    reps=5,
    rounds=1,
    batch_bytes=16 << 20,
    batch_min=8,
    batch_max=500,
    profile_ops=500,
)

# -- reader processes ------------------------------------------------------------


def reader_main(conn: Connection, lock: Any) -> None:
    """Serve commands on `conn`: attach a contender, read a batch, detach.

    The reader lock cannot travel through a pipe, so every storage shares the
    one this process inherited. Ctrl-C is the parent's to handle: it stops us.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    attached: dict[str, Any] = {}
    try:
        while True:
            try:
                command = conn.recv()
            except EOFError:
                break
            verb = command[0]
            if verb == "exit":
                break
            try:
                if verb == "attach":
                    _, tag, impl_name, handle = command
                    attached[tag] = _attach(impl_name, handle, lock)
                    conn.send(("ok", None))
                elif verb == "get":
                    _, tag, handles = command
                    conn.send(("ok", _read_batch(attached[tag], handles)))
                elif verb == "detach":
                    _close(attached.pop(command[1]))
                    conn.send(("ok", None))
                else:
                    conn.send(("error", f"unknown command {verb!r}"))
            except Exception as exc:  # reported to the parent, which stops the bench
                conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        for reader in attached.values():
            with suppress(Exception):
                _close(reader)


def _attach(impl_name: str, handle: Any, lock: Any) -> Any:
    if impl_name == "plain":
        from refimpl.segment import attach_untracked

        return attach_untracked(handle)
    impl = load(MODULES.get(impl_name, impl_name))
    return impl.SingleWriterShmObjectStorage.create_from_handle(
        dataclasses.replace(handle, reader_lock=lock)
    )


def _close(reader: Any) -> None:
    reader.close()


def _minor_faults() -> int:
    """Page faults of this process so far that needed no disk (a fresh page
    mapped or zeroed): the cost that CPU time shows and instructions do not."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _read_batch(reader: Any, handles: list[Any]) -> tuple[float, int, float, int]:
    """Read every handle; returns (seconds, total bytes read, CPU seconds, page faults)."""
    total = 0
    faults = _minor_faults()
    start, cpu = time.perf_counter(), time.process_time()
    if isinstance(reader, shared_memory.SharedMemory):
        buf = segment_buf(reader)
        for offset, size in handles:
            total += len(bytes(buf[offset : offset + size]))
    else:
        get = reader.get
        for address, monotonic_id, signature, key in handles:
            total += len(get(address, monotonic_id, signature, key))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return seconds, total, cpu, _minor_faults() - faults


class Readers:
    """R reader processes, stopped (and killed if need be) on close."""

    def __init__(self, count: int) -> None:
        self.lock = CTX.Lock()
        self.conns: list[Connection] = []
        self.procs: list[Any] = []
        try:
            for _ in range(count):
                parent, child = CTX.Pipe()
                proc = CTX.Process(target=reader_main, args=(child, self.lock), daemon=True)
                proc.start()
                child.close()
                self.conns.append(parent)
                self.procs.append(proc)
        except BaseException:
            self.close()
            raise

    def broadcast(self, *command: Any) -> list[Any]:
        for conn in self.conns:
            conn.send(command)
        answers = []
        for conn, proc in zip(self.conns, self.procs, strict=True):
            while not conn.poll(0.5):
                if not proc.is_alive():
                    raise RuntimeError(f"reader process exited with code {proc.exitcode}")
            status, payload = conn.recv()
            if status != "ok":
                raise RuntimeError(f"reader failed: {payload}")
            answers.append(payload)
        return answers

    def close(self) -> None:
        for conn in self.conns:
            with suppress(Exception):
                conn.send(("exit",))
        for proc in self.procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        for conn in self.conns:
            conn.close()


# -- writers ---------------------------------------------------------------------


class StoreWriter:
    """A writer storage of `impl` holding `batch` objects of `size` bytes."""

    def __init__(self, impl: ModuleType, size: int, batch: int, n_readers: int, lock: Any) -> None:
        chunk = size + CHUNK_SLACK
        self.ring = impl.SingleWriterShmRingBuffer((batch + 2) * chunk, create=True)
        self.writer = impl.SingleWriterShmObjectStorage(
            chunk, n_readers, self.ring, reader_lock=lock
        )
        self.counter = 0

    def reader_handle(self) -> Any:
        return dataclasses.replace(self.writer.handle(), reader_lock=None)

    def put_batch(self, value: bytes, batch: int) -> list[Any]:
        put, sign = self.writer.put, self.writer.get_signature
        handles = []
        for _ in range(batch):
            key = f"k{self.counter}"
            self.counter += 1
            address, monotonic_id = put(key, value)
            handles.append((address, monotonic_id, sign(key), key))
        return handles

    def close(self) -> None:
        self.ring.close()


class PlainWriter:
    """The physical limit: the value's bytes copied into a segment, no more."""

    def __init__(self, size: int, batch: int) -> None:
        self.memory = shared_memory.SharedMemory(create=True, size=batch * size)
        self.size = size

    def reader_handle(self) -> str:
        return self.memory.name

    def put_batch(self, value: bytes, batch: int) -> list[Any]:
        buf, size = segment_buf(self.memory), self.size
        handles = []
        for i in range(batch):
            buf[i * size : (i + 1) * size] = value
            handles.append((i * size, size))
        return handles

    def close(self) -> None:
        with suppress(FileNotFoundError):
            self.memory.unlink()
        self.memory.close()


def _round(
    writer: Any, readers: Readers, tag: str, value: bytes, batch: int
) -> tuple[float, float, float, float, float]:
    """One round: (round seconds, writer seconds, slowest reader's seconds, CPU
    seconds of the writer's puts plus every reader's gets, page faults of the
    writer's puts plus every reader's gets)."""
    faults = _minor_faults()
    start, cpu = time.perf_counter(), time.process_time()
    handles = writer.put_batch(value, batch)
    put_s, put_cpu = time.perf_counter() - start, time.process_time() - cpu
    put_faults = _minor_faults() - faults
    answers = readers.broadcast("get", tag, handles)
    round_s = time.perf_counter() - start
    for _seconds, total, _cpu, _faults in answers:
        if total != batch * len(value):
            raise RuntimeError(f"{tag}: a reader read {total} bytes, expected {batch * len(value)}")
    return (
        round_s,
        put_s,
        max(answer[0] for answer in answers),
        put_cpu + sum(answer[2] for answer in answers),
        put_faults + sum(answer[3] for answer in answers),
    )


def measure(config: StoreConfig, seed_impl: ModuleType | None) -> list[dict[str, Any]]:
    """Every (readers, size, contender): median put+get/s, MB/s and ratios."""
    impls: dict[str, ModuleType | None] = {
        "refimpl": load("refimpl"),
        "seed": seed_impl,
        "native": load_native()[0],
        "plain": None,
    }
    contenders = [c for c in CONTENDERS if c == "plain" or impls[c] is not None]
    rows: list[dict[str, Any]] = []
    for n_readers in config.readers:
        progress(f"store: starting {n_readers} reader process(es)")
        with ExitStack() as stack:
            readers = Readers(n_readers)
            stack.callback(readers.close)
            for label, size in config.sizes.items():
                batch = config.batch(size)
                value = bytes(range(256)) * (size // 256) + bytes(size % 256)
                writers: dict[str, Any] = {}
                with ExitStack() as per_size:
                    for name in contenders:
                        impl = impls[name]
                        writer = (
                            PlainWriter(size, batch)
                            if impl is None
                            else StoreWriter(impl, size, batch, n_readers, readers.lock)
                        )
                        per_size.callback(writer.close)
                        writers[name] = writer
                        readers.broadcast(
                            "attach",
                            name,
                            "plain" if impl is None else name,
                            writer.reader_handle(),
                        )
                        per_size.callback(_detach, readers, name)
                    samples: dict[str, list[list[float]]] = {name: [] for name in contenders}
                    # Warm-up, not measured: two rounds touch every page of the
                    # ring (batch + 2 chunks) in the writer and the readers.
                    for name in contenders:
                        for _ in range(2):
                            _round(writers[name], readers, name, value, batch)
                    for rep in range(config.reps):
                        order = (
                            contenders[rep % len(contenders) :]
                            + contenders[: rep % len(contenders)]
                        )
                        for name in order:
                            total = [0.0, 0.0, 0.0, 0.0, 0.0]
                            for _ in range(config.rounds):
                                for i, part in enumerate(
                                    _round(writers[name], readers, name, value, batch)
                                ):
                                    total[i] += part
                            samples[name].append(total)
                        progress(
                            f"store: {n_readers} reader(s), {label}, "
                            f"repetition {rep + 1}/{config.reps}"
                        )
                    ops = batch * config.rounds
                    for name in contenders:
                        rounds = [s[0] for s in samples[name]]
                        rows.append(
                            {
                                "readers": n_readers,
                                "size": label,
                                "bytes": size,
                                "contender": name,
                                "batch": batch,
                                "samples": len(rounds),
                                "ops_per_s": ops / median(rounds),
                                "mb_per_s": ops * size / median(rounds) / 1e6,
                                "put_us": median([s[1] for s in samples[name]]) / ops * 1e6,
                                "get_us": median([s[2] for s in samples[name]]) / ops * 1e6,
                                # CPU time of one put and its n_readers gets: what a
                                # busy machine's time-slicing does not inflate
                                "cpu_us": median([s[3] for s in samples[name]]) / ops * 1e6,
                                "faults_per_op": median([s[4] for s in samples[name]]) / ops,
                                # spread: fastest over slowest sample
                                "spread": min(rounds) / max(rounds),
                                "round_s": rounds,  # per repetition, for paired ratios
                            }
                        )
    _add_ratios(rows)
    return rows


def _detach(readers: Readers, tag: str) -> None:
    with suppress(Exception):
        readers.broadcast("detach", tag)


def _add_ratios(rows: list[dict[str, Any]]) -> None:
    """Ratios of medians, and the paired ratio: in each repetition the
    contenders ran back to back, so the ratio of their rates in that
    repetition shares its load; its median and quartiles over the
    repetitions say how sure the comparison is."""
    by_key = {(r["readers"], r["size"], r["contender"]): r for r in rows}
    for row in rows:
        key = (row["readers"], row["size"])
        for other in ("seed", "plain"):
            base = by_key.get((*key, other))
            if base is not None and other != row["contender"]:
                row[f"vs_{other}"] = ratio(row["ops_per_s"], base["ops_per_s"])
                row[f"cpu_vs_{other}"] = ratio(base["cpu_us"], row["cpu_us"])
                paired = sorted(
                    ratio(theirs, ours)
                    for ours, theirs in zip(row["round_s"], base["round_s"], strict=True)
                )
                row[f"paired_vs_{other}"] = median(paired)
                row[f"paired_vs_{other}_quartiles"] = _quartiles(paired)


def _quartiles(values: list[float]) -> list[float]:
    """First and third quartile (the middle half of the values lies between)."""
    if len(values) < 2:
        return [values[0], values[0]] if values else [math.nan, math.nan]
    q1, _q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return [q1, q3]


# -- where the time goes ----------------------------------------------------------

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
        impl.MsgpackSerde,
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


def profiles(config: StoreConfig, seed_impl: ModuleType | None) -> list[dict[str, Any]]:
    rows = []
    native = load_native()[0]
    impls = (
        [("refimpl", load("refimpl"))]
        + ([("seed", seed_impl)] if seed_impl else [])
        + ([("native", native)] if native else [])
    )
    for label, size in config.sizes.items():
        ops = min(config.profile_ops, max(config.batch_min, (64 << 20) // size))
        for name, impl in impls:
            shares = profile(impl, size, ops, config.batch(size))
            rows.append({"size": label, "contender": name, "ops": ops, "shares": shares})
        progress(f"store: profiled {label}")
    return rows


def run(config: StoreConfig, seed_impl: ModuleType | None) -> dict[str, Any]:
    return {
        "throughput": measure(config, seed_impl),
        "profile": profiles(config, seed_impl),
        "copies": copies.run(seed_impl),
        "cold_copy": coldcopy.run(config.sizes),
    }


Loader = Callable[[], ModuleType]
