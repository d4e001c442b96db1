"""put+get rate of the Rust store (examples/rust_store) as a writer beside
the seed's readers, against the seed's own writer beside the same readers.

`python -m bench.ruststore [--quick]` (after `make rust`). One round, as in
bench/store.py: the writer puts a batch (put + get_signature: a signed
handle each), sends the handles to R reader processes running the seed's
code, and they `get` them all; put+get/s = objects / round time. The Rust
writer is driven through the process protocol's proxy (`exec:PROGRAM`,
shmref.process): every put crosses a pipe as JSON with base64 bytes, which
is the cost being measured beside the store's own. Contenders alternate
round by round; each figure is the median over repetitions.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, load
from bench.storeprocs import Readers, StoreWriter

BIN = REPO / "examples" / "rust_store" / "target" / "release" / "rust_store"
SIZES = {"64 B": 64, "4 KiB": 4096, "64 KiB": 64 << 10}


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


def run(quick: bool, n_readers: int = 1) -> dict[str, Any]:
    """`python -m bench`'s `rust` section: {readers, reps, rate}, or {why_not}."""
    if not BIN.exists():
        return {"why_not": f"{BIN.relative_to(REPO)} not built (`make rust` needs cargo)"}
    reps = 3 if quick else 11
    rate = measure(n_readers, reps, (1 << 20) if quick else (8 << 20))
    return {"readers": n_readers, "reps": reps, "rate": rate}


def table(results: dict[str, dict[str, float]], n_readers: int) -> str:
    lines = [
        f"| value | rust writer put+get/s | seed writer put+get/s | rust / seed "
        f"(seed readers: {n_readers}) |",
        "| --- | --- | --- | --- |",
    ]
    for label, row in results.items():
        ratio = row["rust"] / row["seed"]
        lines.append(f"| {label} | {row['rust']:,.0f} | {row['seed']:,.0f} | {ratio:.2f} |")
    return "\n".join(lines)


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
    print(table(section["rate"], args.readers))
    if args.out:
        args.out.write_text(json.dumps(section))
    return 0


if __name__ == "__main__":
    sys.exit(main())
