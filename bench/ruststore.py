"""put+get rate of the Rust store (examples/rust_store) against the seed,
measured two ways side by side.

`python -m bench.ruststore [--quick]` (after `make rust`).

At its own pace (the protocol's bench request, shmref.process.benchcheck):
the program is given a storage, runs the put+get loop itself (put, its
signed handle, a reader's get) and times it by its own clock; reference
readers (refimpl's) in another process then check that every object it
reported is in its segment. The seed answers the same request behind
`python -m bench.serveseed` (shmref.process.serve on the seed: the same
loop in Python, shmref.process.benchloop), so the two rates are of one loop.

Through the pipe: one round, as in bench/store.py: the writer puts a batch
(put + get_signature: a signed handle each), sends the handles to R reader
processes running the seed's code, and they `get` them all; put+get/s =
objects / round time. The Rust writer is driven through the process
protocol's proxy (`exec:PROGRAM`, shmref.process): every put crosses a pipe
as JSON with base64 bytes, which is the cost being measured beside the
store's own. The seed writer runs in the bench's process.

Contenders alternate round by round; each figure is the median over
repetitions, and Rust / seed at own pace is the median of the ratio within
each repetition (they ran back to back).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, load, progress
from bench.storeprocs import Readers, StoreWriter
from bench.tables import rust_tables

BIN = REPO / "examples" / "rust_store" / "target" / "release" / "rust_store"
SIZES = {"64 B": 64, "4 KiB": 4096, "64 KiB": 64 << 10}
OWN_SIZES = {**SIZES, "1 MiB": 1 << 20}  # no pipe to cross: the large value too
SEED_PROGRAM = [sys.executable, "-m", "bench.serveseed"]


def writers() -> dict[str, Any]:
    """contender -> the writer's module: the seed, and the Rust program over the protocol."""
    from shmref.seed.impl import load_impl

    return {"seed": load("seed"), "rust": load_impl(f"exec:{BIN}")}


def one_round(writer: StoreWriter, readers: Readers, tag: str, value: bytes, batch: int) -> float:
    """Seconds for one batch put by `writer` and read by every reader."""
    start = time.perf_counter()
    handles = writer.put_batch(value, batch)
    readers.broadcast("get", tag, handles)
    return time.perf_counter() - start


def measure(n_readers: int, reps: int, batch_bytes: int) -> dict[str, dict[str, float]]:
    """size label -> contender -> median put+get/s."""
    impls = writers()
    results: dict[str, dict[str, float]] = {}
    readers = Readers(n_readers)
    try:
        for label, size in SIZES.items():
            batch = max(8, min(500, batch_bytes // size))
            value = bytes(range(256)) * (size // 256) or b"x" * size
            samples: dict[str, list[float]] = {name: [] for name in impls}
            opened: dict[str, StoreWriter] = {}
            try:
                for name, impl in impls.items():
                    opened[name] = StoreWriter(impl, size, batch, n_readers, readers.lock)
                    readers.broadcast("attach", name, "seed", opened[name].reader_handle())
                for rep in range(reps):
                    order = list(impls) if rep % 2 == 0 else list(reversed(impls))
                    for name in order:
                        seconds = one_round(opened[name], readers, name, value, batch)
                        samples[name].append(batch / seconds)
            finally:
                for name, writer in opened.items():
                    readers.broadcast("detach", name)
                    writer.close()
            results[label] = {name: statistics.median(s) for name, s in samples.items()}
    finally:
        readers.close()
    return results


def own_pace(reps: int, budget: int, max_count: int) -> dict[str, Any]:
    """size label -> {count, rust, seed (median put+get/s by each one's clock),
    paired (median Rust / seed within a repetition), quartiles, rust_round_trip
    (put+get/s with the request and its reply)}; or {why_not}."""
    from shmref.process.benchcheck import CAPABILITY, Bench, Checkers, UncheckedWork
    from shmref.process.channel import Program
    from shmref.process.messages import ProgramFailure

    programs: dict[str, Program] = {}
    checkers = Checkers(1)
    try:
        programs["rust"] = Program([str(BIN)], f"exec:{BIN.relative_to(REPO)}")
        if CAPABILITY not in programs["rust"].capabilities:
            return {"why_not": f"{BIN.relative_to(REPO)} does not offer the bench request"}
        programs["seed"] = Program(SEED_PROGRAM, "exec:python -m bench.serveseed")
        rows: dict[str, dict[str, Any]] = {}
        for label, size in OWN_SIZES.items():
            count = max(16, min(max_count, budget // size))
            rates: dict[str, list[float]] = {name: [] for name in programs}
            trips: list[float] = []
            benches: dict[str, Bench] = {}
            try:
                for name, started in programs.items():
                    benches[name] = Bench(started, size, count, checkers)
                    benches[name].run(f"{label}.warm.")  # not measured: maps every page
                for rep in range(reps):
                    order = list(programs) if rep % 2 == 0 else list(reversed(programs))
                    for name in order:
                        done = benches[name].run(f"{label}.{rep}.")
                        rates[name].append(done.rate)
                        if name == "rust":
                            trips.append(count / done.round_trip)
                    progress(f"rust: own pace, {label}, repetition {rep + 1}/{reps}")
            finally:
                for bench in benches.values():
                    bench.close()
            paired = sorted(r / s for r, s in zip(rates["rust"], rates["seed"], strict=True))
            rows[label] = {
                "count": count,
                "rust": statistics.median(rates["rust"]),
                "seed": statistics.median(rates["seed"]),
                "paired": statistics.median(paired),
                "quartiles": _quartiles(paired),
                "rust_round_trip": statistics.median(trips),
            }
        return {"reps": reps, "checked_by": checkers.readers, "sizes": rows}
    except (UncheckedWork, ProgramFailure) as exc:  # the table says why, the rest is measured
        return {"why_not": str(exc).splitlines()[0]}
    finally:
        for started in programs.values():
            started.close()
        checkers.close()


def _quartiles(values: list[float]) -> list[float]:
    if len(values) < 2:
        return [values[0], values[0]]
    q1, _q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return [q1, q3]


def run(quick: bool, n_readers: int = 1) -> dict[str, Any]:
    """`python -m bench`'s `rust` section: {readers, reps, rate, own_pace}, or {why_not}."""
    if not BIN.exists():
        return {"why_not": f"{BIN.relative_to(REPO)} not built (`make rust` needs cargo)"}
    reps = 3 if quick else 11
    load = [os.getloadavg()[0]]
    rate = measure(n_readers, reps, (1 << 20) if quick else (8 << 20))
    pace = own_pace(reps, (2 << 20) if quick else (32 << 20), 5000 if quick else 20000)
    load.append(os.getloadavg()[0])  # the machine's other work: rates swing with it, ratios less
    return {"readers": n_readers, "reps": reps, "rate": rate, "own_pace": pace, "load": load}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ruststore", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few repetitions")
    parser.add_argument("--readers", type=int, default=1)
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    if not BIN.exists():
        print(f"bench.ruststore: {BIN} not built: run `make rust` (needs cargo)", file=sys.stderr)
        return 2
    if importlib.util.find_spec("shmref.process") is None:
        print(
            "bench.ruststore: no process protocol proxy (shmref.process): not run", file=sys.stderr
        )
        return 0
    section = run(args.quick, args.readers)
    print("\n".join(rust_tables(section)))
    if args.out:
        args.out.write_text(json.dumps(section))
    return 0


if __name__ == "__main__":
    sys.exit(main())
