"""CPU time per put+get in one process, refimpl, the seed and native_store
taking turns.

The same put+get as `bench.instructions` (writer and reader storage in one
process, no pipes, no reader processes): what is left is the work itself.
Each repetition runs a batch of every contender back to back (the order
rotates), timed with `time.process_time`, so a time slice lost to another
process does not count; the seed's CPU over refimpl's (and over
native_store's, the issue-24 goal of 3x measured without the reader
process's hand-off) in the same repetition is the paired ratio, whose
median and quartiles are reported.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from bench.common import load, load_native, median, progress
from bench.instructions import plain_step, storage_step

CONTENDERS = ("refimpl", "seed", "native", "plain")  # native: only when it is built


@dataclass(frozen=True)
class CpuConfig:
    sizes: dict[str, int]
    reps: int
    batch_bytes: int  # put+get per batch = batch_bytes / size, clamped to [8, 400]

    def batch(self, size: int) -> int:
        return max(8, min(400, self.batch_bytes // size))


FULL = CpuConfig({"64 B": 64, "4 KiB": 4096, "1 MiB": 1 << 20}, reps=41, batch_bytes=16 << 20)
QUICK = CpuConfig({"64 B": 64, "64 KiB": 64 << 10}, reps=3, batch_bytes=1 << 20)


def _quartiles(values: list[float]) -> list[float]:
    if len(values) < 2:
        return [values[0], values[0]]
    q1, _q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return [q1, q3]


def measure(size: int, reps: int, batch: int, impls: dict[str, ModuleType]) -> dict[str, Any]:
    steps: dict[str, tuple[Callable[[int, int], int], Callable[[], None]]] = {}
    try:
        for name in CONTENDERS:
            if name == "plain":
                steps[name] = plain_step(size)
            elif name in impls:
                steps[name] = storage_step(impls[name], size)
        i = 0
        for step, _close in steps.values():  # warm-up: every page of each ring touched
            for _ in range(40):
                step(0, i)
                i += 1
        cpu: dict[str, list[float]] = {name: [] for name in steps}
        order = list(steps)
        for _ in range(reps):
            order = order[1:] + order[:1]
            for name in order:
                step = steps[name][0]
                start = time.process_time()
                for _ in range(batch):
                    step(0, i)
                    i += 1
                cpu[name].append((time.process_time() - start) / batch * 1e6)
    finally:
        for _step, close in steps.values():
            close()
    paired = sorted(s / r for r, s in zip(cpu["refimpl"], cpu["seed"], strict=True) if r > 0)
    found: dict[str, Any] = {
        "cpu_us": {name: median(values) for name, values in cpu.items()},
        "seed_over_refimpl": median(paired),
        "seed_over_refimpl_quartiles": _quartiles(paired),
        "plain_over_refimpl": median(cpu["plain"]) / median(cpu["refimpl"]),
        "reps": reps,
        "batch": batch,
    }
    if "native" in cpu:
        native = sorted(s / n for n, s in zip(cpu["native"], cpu["seed"], strict=True) if n > 0)
        found["seed_over_native"] = median(native)
        found["seed_over_native_quartiles"] = _quartiles(native)
    return found


def run(quick: bool, seed_impl: ModuleType | None) -> list[dict[str, Any]]:
    if seed_impl is None:
        return []
    config = QUICK if quick else FULL
    impls = {"refimpl": load("refimpl"), "seed": seed_impl}
    native = load_native()[0]
    if native is not None:
        impls["native"] = native
    rows = []
    for label, size in config.sizes.items():
        row = {"size": label, "bytes": size}
        row.update(measure(size, config.reps, config.batch(size), impls))
        rows.append(row)
        progress(
            f"cpu: {label}: seed CPU / refimpl CPU {row['seed_over_refimpl']:.3f}"
            + (f", / native CPU {row['seed_over_native']:.2f}" if "seed_over_native" in row else "")
        )
    return rows


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The section's table; native_store's columns only in results that measured it."""
    native = any("seed_over_native" in r for r in rows)
    lines = [
        "| value | CPU µs refimpl / seed / plain | seed CPU / refimpl CPU (paired) "
        "| refimpl / plain (CPU rate) |"
        + (" native CPU µs | seed CPU / native CPU (paired) |" if native else ""),
        "| --- | --- | --- | --- |" + (" --- | --- |" if native else ""),
    ]
    for r in rows:
        cpu = r["cpu_us"]
        low, high = r["seed_over_refimpl_quartiles"]
        line = (
            f"| {r['size']} | {cpu['refimpl']:.1f} / {cpu['seed']:.1f} / {cpu['plain']:.1f} "
            f"| **{r['seed_over_refimpl']:.3f}** [{low:.3f}–{high:.3f}] "
            f"| {r['plain_over_refimpl']:.3f} |"
        )
        if "seed_over_native" in r:
            n_low, n_high = r["seed_over_native_quartiles"]
            line += (
                f" {cpu['native']:.1f} | **{r['seed_over_native']:.2f}** "
                f"[{n_low:.2f}–{n_high:.2f}] |"
            )
        elif native:
            line += " - | - |"
        lines.append(line)
    return lines
