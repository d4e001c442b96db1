"""Instructions per put+get, counted by valgrind's callgrind: a measure that a
busy, shared machine does not disturb (wall time does; CPU time a little).

One process under callgrind runs, for every size and contender, a warm-up
(every page of the segment touched, not counted) and then `n` put+get in one
call of `functools.reduce`: callgrind counts only inside that C function
(`--toggle-collect`) and writes one profile part each time it returns
(`--dump-after`), so each part is exactly one contender's `n` put+get.

put+get = `put` + `get_signature` on the writer and `get` on a reader
storage in the same process (the reader lock is taken as in a reader
process). "plain" is the physical limit: the value's bytes written into a
segment slice and copied out with `bytes(view)`.

valgrind runs `rep movsb` (glibc's memcpy for large sizes) one byte per
step and counts each as an instruction, so at 1 MiB the copies outweigh
everything else: compare refimpl and the seed with plain, which is nothing
but the two copies. With `--cache-sim=yes` callgrind also simulates the
first-level data cache: its misses (reads and writes) per put+get say
whether one contender moves more memory than another, which instruction
counts alone do not.

    python -m bench.instructions            # table on stdout
"""

from __future__ import annotations

import functools
import json
import multiprocessing as mp
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any

from bench.common import BENCH_SERDE, REPO, load, progress, segment_buf

SIZES = {"64 B": 64, "4 KiB": 4096, "1 MiB": 1 << 20}
QUICK_SIZES = {"64 B": 64, "4 KiB": 4096, "64 KiB": 64 << 10}
CONTENDERS = ("refimpl", "seed", "plain")
BATCH = 8  # objects the ring holds (+2), as in bench/store.py
TOGGLE = "functools_reduce"  # the C function of functools.reduce in CPython


def ops_for(size: int) -> int:
    """Enough put+get for a stable count, few enough for valgrind's pace."""
    return max(10, min(200, (8 << 20) // size))


def storage_step(impl: Any, size: int) -> tuple[Callable[[int, int], int], Callable[[], None]]:
    lock = mp.get_context("spawn").Lock()
    chunk = size + 64
    ring = impl.SingleWriterShmRingBuffer((BATCH + 2) * chunk, create=True)
    writer = impl.SingleWriterShmObjectStorage(
        chunk, 1, ring, serde_class=BENCH_SERDE, reader_lock=lock
    )
    reader = impl.SingleWriterShmObjectStorage.create_from_handle(writer.handle())
    value = bytes(range(256)) * (size // 256) + bytes(size % 256)

    def step(total: int, i: int) -> int:
        key = f"k{i}"
        address, monotonic_id = writer.put(key, value)
        signature = writer.get_signature(key)
        return total + len(reader.get(address, monotonic_id, signature, key))

    def close() -> None:
        reader.close()
        ring.close()

    return step, close


def plain_step(size: int) -> tuple[Callable[[int, int], int], Callable[[], None]]:
    memory = shared_memory.SharedMemory(create=True, size=BATCH * size)
    buf = segment_buf(memory)
    value = bytes(range(256)) * (size // 256) + bytes(size % 256)

    def step(total: int, i: int) -> int:
        offset = (i % BATCH) * size
        buf[offset : offset + size] = value
        return total + len(bytes(buf[offset : offset + size]))

    def close() -> None:
        memory.unlink()
        memory.close()

    return step, close


def child(sizes: dict[str, int]) -> None:
    """Run under callgrind: one counted `reduce` per (size, contender), in the
    order printed (JSON) on stdout."""
    from shmref.seed.build import build_seed_module

    impls = {"refimpl": load("refimpl"), "seed": build_seed_module()}
    order = []
    for label, size in sizes.items():
        n = ops_for(size)
        for name in CONTENDERS:
            step, close = plain_step(size) if name == "plain" else storage_step(impls[name], size)
            try:
                total = 0
                for i in range(2 * BATCH + 2):  # warm-up, not counted (no reduce here)
                    total = step(total, i)
                counted = functools.reduce(step, range(1000, 1000 + n), 0)
            finally:
                close()
            if counted != n * size:
                raise RuntimeError(f"{name}: read {counted} bytes, expected {n * size}")
            order.append({"size": label, "bytes": size, "contender": name, "ops": n})
    print(json.dumps(order))


_EVENTS = re.compile(r"^events:\s*(.+)$", re.MULTILINE)
_TOTALS = re.compile(r"^(?:totals|summary):\s*([\d ]+)$", re.MULTILINE)


def _part_totals(path: Path) -> dict[str, int]:
    """The event totals of one callgrind part: {"Ir": ..., "D1mr": ...}."""
    text = path.read_text(encoding="utf-8", errors="replace")
    events, totals = _EVENTS.search(text), _TOTALS.findall(text)
    if events is None or not totals:
        raise RuntimeError(f"no instruction total in {path}")
    return dict(zip(events.group(1).split(), map(int, totals[-1].split()), strict=False))


def run(quick: bool = False) -> dict[str, Any]:
    """{"rows": [...]} with instructions per put+get, or {"skipped": why}."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return {"skipped": "valgrind is not installed"}
    sizes = QUICK_SIZES if quick else SIZES
    with tempfile.TemporaryDirectory(prefix="shmref-callgrind-") as tmp:
        out = Path(tmp) / "cg.out"
        argv = [
            valgrind,
            "--tool=callgrind",
            "--collect-atstart=no",
            "--cache-sim=yes",
            f"--toggle-collect={TOGGLE}",
            f"--dump-after={TOGGLE}",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-m",
            "bench.instructions",
            "--child",
            json.dumps(sizes),
        ]
        progress("instructions: callgrind run (about a minute)")
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return {"skipped": f"callgrind run failed: {done.stderr.strip()[-400:]}"}
        order = json.loads(done.stdout.strip().splitlines()[-1])
        parts = sorted(Path(tmp).glob("cg.out.*"), key=lambda p: int(p.name.rsplit(".", 1)[1]))
        if len(parts) < len(order):
            return {"skipped": f"callgrind wrote {len(parts)} parts for {len(order)} runs"}
        rows = []
        for entry, part in zip(order, parts[-len(order) :], strict=True):
            totals = _part_totals(part)
            entry["instructions_per_op"] = totals["Ir"] / entry["ops"]
            if "D1mr" in totals:
                misses = totals["D1mr"] + totals.get("D1mw", 0)
                entry["d1_misses_per_op"] = misses / entry["ops"]
            rows.append(entry)
    by = {(r["size"], r["contender"]): r["instructions_per_op"] for r in rows}
    for row in rows:
        for other in ("seed", "plain"):
            base = by.get((row["size"], other))
            if base and other != row["contender"]:
                row[f"vs_{other}"] = row["instructions_per_op"] / base
    return {"rows": rows}


def table(result: dict[str, Any]) -> list[str]:
    if "rows" not in result:
        return [f"instructions not counted: {result.get('skipped', 'no result')}"]
    by = {(r["size"], r["contender"]): r for r in result["rows"]}
    lines = [
        "| value | refimpl instr./op | seed instr./op | plain instr./op "
        "| refimpl / seed | refimpl / plain | L1d misses/op refimpl / seed / plain |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for size in dict.fromkeys(r["size"] for r in result["rows"]):
        ref, seed, plain = (by.get((size, c)) for c in CONTENDERS)
        if ref is None:
            continue
        lines.append(
            f"| {size} | {ref['instructions_per_op']:,.0f} | "
            + (f"{seed['instructions_per_op']:,.0f}" if seed else "-")
            + " | "
            + (f"{plain['instructions_per_op']:,.0f}" if plain else "-")
            + " | "
            + (f"**{ref['vs_seed']:.3f}**" if "vs_seed" in ref else "-")
            + " | "
            + (f"{ref['vs_plain']:.2f}" if "vs_plain" in ref else "-")
            + " | "
            + " / ".join(
                f"{r['d1_misses_per_op']:,.0f}" if r and "d1_misses_per_op" in r else "-"
                for r in (ref, seed, plain)
            )
            + " |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        child(json.loads(args[1]))
        return 0
    result = run(quick="--quick" in args)
    print("\n".join(table(result)))
    return 0 if "rows" in result else 1


if __name__ == "__main__":
    raise SystemExit(main())
