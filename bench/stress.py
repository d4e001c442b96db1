"""Multi-process stress: the writer puts and evicts while four reader processes
verify checksums (issue 19).

The writer streams batches of checksummed objects to the readers without
waiting for them; when the ring is full, `put` reclaims what every reader has
read (eviction), and if nothing is reclaimable yet the writer waits for the
oldest batch's answers. Each reader reads its batch in its own random order
and reads a few handles twice, which can make an object reclaimable before a
slower reader has read it, so eviction races with reads: those reads must be
refused (`ValueError`), never torn (bytes of two objects) or foreign (another
key's object).

`run(impl_name, puts)` is used by tests/test_stress.py (a small count) and by
`python -m bench` (10**5 puts, refimpl and the seed side by side).
"""

from __future__ import annotations

import multiprocessing as mp
import random
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from shmref.impl import load_impl
from shmref.readers import ReaderProcess, checksummed

READERS = 4
BATCH = 100
IN_FLIGHT = 4  # batches a reader may have queued before the writer waits
SIZES = (16, 200, 1500, 9000)
REREAD = 0.1  # share of handles a reader reads twice
# A read refused because its chunk was reclaimed: the id check, the F2
# re-check, or an address that now falls inside another chunk.
REFUSALS = ("modified or is invalid", "no valid chunk")


@dataclass
class StressResult:
    impl: str
    puts: int
    readers: int
    reads: int = 0
    intact: int = 0
    refused: int = 0  # a clear ValueError: the handle's chunk was reclaimed meanwhile
    torn: int = 0
    foreign: int = 0
    other: int = 0
    evicted: int = 0
    waits: int = 0  # times the writer found the ring full and waited for readers
    seconds: float = 0.0
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.torn == self.foreign == self.other == 0 and self.reads == self.intact + (
            self.refused)

    def line(self) -> str:
        return (f"stress {self.impl}: {self.puts} puts, {self.readers} reader processes, "
                f"{self.reads} reads: {self.intact} intact, {self.refused} refused, "
                f"{self.torn} torn, {self.foreign} foreign, {self.other} other; "
                f"{self.evicted} evicted; {self.seconds:.1f} s")


def classify(result: StressResult, problems: list[str]) -> None:
    for problem in problems:
        if problem.endswith("torn value"):
            result.torn += 1
        elif "foreign value" in problem:
            result.foreign += 1
        elif ": ValueError: " in problem and any(text in problem for text in REFUSALS):
            result.refused += 1
            continue
        else:
            result.other += 1
        if len(result.examples) < 10:
            result.examples.append(problem)


def run(impl_name: str, puts: int, seed: int = 20261203, ring_bytes: int = 1 << 20
        ) -> StressResult:
    """Stream `puts` objects past READERS reader processes; count what they read."""
    impl = load_impl(impl_name)
    rng = random.Random(seed)
    result = StressResult(impl_name, puts, READERS)
    ring = impl.SingleWriterShmRingBuffer(ring_bytes, create=True)
    writer = impl.SingleWriterShmObjectStorage(
        64 << 10, READERS, ring, reader_lock=mp.get_context("spawn").Lock())
    readers = [ReaderProcess(impl_name, writer.handle(), timeout=600) for _ in range(READERS)]
    pending: deque[int] = deque()  # batches sent and not yet answered, per reader alike
    started = time.perf_counter()

    def collect_oldest() -> None:
        sent = pending.popleft()
        for reader in readers:
            status, answer = reader.receive()
            if status != "ok":
                raise RuntimeError(f"reader failed: {status}: {answer}")
            n_intact, problems = answer
            result.intact += n_intact
            classify(result, problems)
        result.reads += sent

    try:
        for start in range(0, puts, BATCH):
            handles = []
            for n in range(start, min(start + BATCH, puts)):
                key = f"item-{n}"
                value = checksummed(key, rng.randbytes(rng.choice(SIZES)))
                while True:
                    try:
                        address, monotonic_id = writer.put(key, value)
                        break
                    except MemoryError:
                        if not pending:
                            raise
                        result.waits += 1
                        collect_oldest()
                handles.append((address, monotonic_id, writer.get_signature(key), key))
            sent = 0
            for reader in readers:
                own = handles + rng.sample(handles, max(1, int(len(handles) * REREAD)))
                rng.shuffle(own)  # each reader in its own order: reads race evictions
                reader.send("verify", own)
                sent += len(own)
            pending.append(sent)
            while len(pending) > IN_FLIGHT:
                collect_oldest()
        while pending:
            collect_oldest()
        result.evicted = puts - len(writer.key_index)
    finally:
        for reader in readers:
            reader.stop()
        writer.close()
    result.seconds = time.perf_counter() - started
    return result


def bench_section(results: dict[str, Any], notes: list[str], quick: bool,
                  sections: set[str]) -> None:
    """`python -m bench`: refimpl and the seed, 10**5 puts each (2000 with --quick).

    The counts are in the note line (most must be 0); results.json keeps the
    line and the positive figures (bench's numbers check wants them > 0)."""
    if "store" not in sections:
        return
    from bench.common import progress

    puts = 2_000 if quick else 100_000
    found: dict[str, Any] = {}
    for name in ("refimpl", "seed"):
        progress(f"stress: {name}, {puts} puts, {READERS} reader processes")
        try:
            outcome = run(name, puts)
        except Exception as exc:  # the seed may be unavailable, or fail: reported
            notes.append(f"stress {name}: not measured ({type(exc).__name__}: {exc})")
            continue
        found[name] = {"line": outcome.line(), "ok": outcome.ok, "puts": outcome.puts,
                       "reads": outcome.reads, "seconds": outcome.seconds}
        notes.append(outcome.line())
    results["stress"] = found
