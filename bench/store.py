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
shared machine hits all of them alike. Each repetition (`StoreConfig.setups`)
gives every contender a fresh segment, made in a rotating order: at 1 MiB
where the two rings land in memory moves the refimpl/seed ratio by up to
about 15% either way (two runs of the same code, one placement each, gave
refimpl's put 104 and 88 us, the seed's 88 and 104), so a few placements
would measure the placements, not the code.

The reader processes and the writers are `bench.storeprocs`'s; where the
time goes (cProfile) is `bench.storeprofile`'s.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from bench import coldcopy, copies
from bench.common import load, load_native, median, progress, ratio
from bench.storeprocs import PlainWriter, Readers, StoreWriter, minor_faults
from bench.storeprofile import CATEGORIES, profiles

__all__ = ["CATEGORIES", "FULL", "QUICK", "REDUCED", "StoreConfig", "measure", "run"]

CONTENDERS = ("refimpl", "seed", "native", "plain")
SIZES = {"64 B": 64, "4 KiB": 4096, "1 MiB": 1 << 20}


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
    # sets of fresh segments the repetitions are spread over: where a ring lands
    # in memory moves a 1 MiB put+get by some 10% (see the docstring), so a
    # paired ratio taken on one placement measures the placement
    setups: int = 1

    def batch(self, size: int) -> int:
        return max(self.batch_min, min(self.batch_max, self.batch_bytes // size))


FULL = StoreConfig(
    SIZES,
    (1, 3),
    reps=31,
    rounds=3,
    batch_bytes=32 << 20,  # 32 objects of 1 MiB a round: the round's messages weigh less
    batch_min=8,
    batch_max=1000,
    profile_ops=2000,
    setups=31,  # fresh segments for every repetition: a placement is one sample, not seven
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
    setups=5,
)


def _round(
    writer: Any, readers: Readers, tag: str, value: bytes, batch: int
) -> tuple[float, float, float, float, float]:
    """One round: (round seconds, writer seconds, slowest reader's seconds, CPU
    seconds of the writer's puts plus every reader's gets, page faults of the
    writer's puts plus every reader's gets)."""
    faults = minor_faults()
    start, cpu = time.perf_counter(), time.process_time()
    handles = writer.put_batch(value, batch)
    put_s, put_cpu = time.perf_counter() - start, time.process_time() - cpu
    put_faults = minor_faults() - faults
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
                samples: dict[str, list[list[float]]] = {name: [] for name in contenders}
                rep = 0
                for k, block in enumerate(_blocks(config.reps, config.setups)):
                    with ExitStack() as setup:  # fresh segments for every contender
                        first = k % len(contenders)  # made in turn first: no order bias
                        writers = _open_writers(
                            setup,
                            contenders[first:] + contenders[:first],
                            impls,
                            size,
                            batch,
                            n_readers,
                            readers,
                        )
                        # Warm-up, not measured: two rounds touch every page of the
                        # ring (batch + 2 chunks) in the writer and the readers.
                        for name in contenders:
                            for _ in range(2):
                                _round(writers[name], readers, name, value, batch)
                        for _ in range(block):
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
                            rep += 1
                            progress(
                                f"store: {n_readers} reader(s), {label}, "
                                f"repetition {rep}/{config.reps}"
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


def _blocks(reps: int, setups: int) -> list[int]:
    """Repetitions per set of segments: `reps` split into `setups` nearly equal blocks."""
    setups = max(1, min(setups, reps))
    return [reps // setups + (i < reps % setups) for i in range(setups)]


def _open_writers(
    stack: ExitStack,
    contenders: list[str],
    impls: dict[str, ModuleType | None],
    size: int,
    batch: int,
    n_readers: int,
    readers: Readers,
) -> dict[str, Any]:
    """A writer (a new segment) per contender, attached by every reader;
    `stack` detaches and closes them."""
    writers: dict[str, Any] = {}
    for name in contenders:
        impl = impls[name]
        writer = (
            PlainWriter(size, batch)
            if impl is None
            else StoreWriter(impl, size, batch, n_readers, readers.lock)
        )
        stack.callback(writer.close)
        writers[name] = writer
        readers.broadcast("attach", name, "plain" if impl is None else name, writer.reader_handle())
        stack.callback(_detach, readers, name)
    return writers


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


def run(config: StoreConfig, seed_impl: ModuleType | None) -> dict[str, Any]:
    return {
        "throughput": measure(config, seed_impl),
        "profile": profiles(
            config.sizes, config.profile_ops, config.batch_min, config.batch, seed_impl
        ),
        "copies": copies.run(seed_impl),
        "cold_copy": coldcopy.run(config.sizes),
    }


Loader = Callable[[], ModuleType]
