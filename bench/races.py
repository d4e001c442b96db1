"""How often a round of the readers' race loses an increment (issue 50): the
figure behind the miss probabilities in docs/conformance.md, "Races".

A round is what the properties of `shmref/suite/test_storage_readers.py`
repeat (`shmref.store.racing`): three reader processes released by one
barrier, each reading one object PROCESS_READS times back to back (`--across
processes`), or 16 threads of one reader, each reading it once (`--across
threads`). Each trial puts a fresh object owed exactly one round's reads,
runs one round, and then reads it serially, one read at a time, until
`free_unused` reclaims it: the serial reads it needed are the increments
the round lost. Only the API is used, so any store can be measured:

    python -m bench.races --impl seed_count_outside_lock --across processes --trials 200

A property of R rounds misses a racy store only if all R rounds lose
nothing; the barrier makes rounds independent, so the miss is p0 ** R, p0
the share of rounds that lost nothing (3 / trials, the 95 % bound, when
none did)."""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shmref.seed.impl import load_impl
from shmref.store import racing
from shmref.store.readers import CTX, ReaderProcess, receive_race

Handle = tuple[int, int, Any, str]  # address, id, signature, key
SERIAL_LIMIT = 64  # serial reads before a trial gives up: a store that never frees


@dataclass
class RaceRates:
    impl: str
    across: str
    trials: int
    lost: Counter[int]  # increments lost in a round -> rounds

    @property
    def quiet(self) -> float:
        """The share of rounds that lost nothing, or its 95 % bound if none did."""
        return max(self.lost[0], 3) / self.trials if self.trials else 1.0

    def miss(self, rounds: int) -> float:
        return self.quiet**rounds

    def line(self, rounds: int) -> str:
        seen = ", ".join(f"{n} lost: {k}" for n, k in sorted(self.lost.items()))
        bound = "" if self.lost[0] else " (bound: 3/trials)"
        return (
            f"{self.impl}, across {self.across}: {self.trials} rounds ({seen}); "
            f"rounds that lost nothing {self.lost[0] / self.trials:.2f}{bound}; "
            f"miss in {rounds} rounds {self.miss(rounds):.1e}"
        )


def _writer(impl: Any, n_readers: int) -> Any:
    ring = impl.SingleWriterShmRingBuffer(1 << 16, create=True)
    return impl.SingleWriterShmObjectStorage(
        1024, n_readers, ring, reader_lock=mp.get_context("spawn").Lock()
    )


def _serial_reads_to_free(writer: Any, key: str, read: Any) -> int:
    """Read `key` one read at a time until free_unused reclaims it."""
    extra = 0
    while True:
        writer.free_unused()
        if not writer.is_cached(key):
            return extra
        if extra == SERIAL_LIMIT:
            raise RuntimeError(f"{key} kept after {SERIAL_LIMIT} serial reads past its owed count")
        read()
        extra += 1


def _lost_per_round(
    writer: Any,
    trials: int,
    reads_each: int,
    run_round: Callable[[Handle], None],
    read: Callable[[Handle], Any],
) -> Counter[int]:
    """Each trial: a fresh object owed `reads_each` reads by each reader, one
    round of the race on it (`run_round`), then serial reads (`read`) until
    it is reclaimed; how many rounds lost how many increments."""
    lost: Counter[int] = Counter()
    for trial in range(trials):
        key = f"k{trial}"
        address, monotonic_id = writer.put(key, b"v" * 64)
        for _ in range(reads_each - 1):
            writer.get_cached(key)
        handle = (address, monotonic_id, writer.get_signature(key), key)
        run_round(handle)
        lost[_serial_reads_to_free(writer, key, functools.partial(read, handle))] += 1
    return lost


def across_processes(impl_name: str, trials: int) -> RaceRates:
    writer = _writer(load_impl(impl_name), racing.PROCESSES)
    start = CTX.Barrier(racing.PROCESSES)
    readers = [
        ReaderProcess(impl_name, writer.handle(), start=start) for _ in range(racing.PROCESSES)
    ]

    def run_round(handle: Handle) -> None:
        for reader in readers:
            reader.send("race", 1, racing.PROCESS_READS, *handle)
        answers = receive_race(readers, start)
        if any(status != "ok" for status, _ in answers):
            raise RuntimeError(f"a reader failed: {answers}")

    try:
        lost = _lost_per_round(
            writer,
            trials,
            racing.PROCESS_READS,
            run_round,
            lambda handle: readers[0].call("get", *handle),
        )
    finally:
        for reader in readers:
            reader.stop()
        writer.close()
    return RaceRates(impl_name, "processes", trials, lost)


def across_threads(impl_name: str, trials: int) -> RaceRates:
    impl = load_impl(impl_name)
    writer = _writer(impl, racing.THREADS)
    reader = impl.SingleWriterShmObjectStorage.create_from_handle(writer.handle())

    def read(handle: Handle) -> None:
        reader.get(*handle)

    try:
        lost = _lost_per_round(
            writer, trials, 1, lambda h: racing.race(racing.THREADS, 1, lambda: read(h)), read
        )
    finally:
        reader.close()
        writer.close()
    return RaceRates(impl_name, "threads", trials, lost)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.races", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--impl", required=True, help="a store module, as --impl of the oracle")
    parser.add_argument("--across", choices=("processes", "threads"), default="processes")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--rounds", type=int, help="rounds of the property (its own by default)")
    args = parser.parse_args(argv)
    default = racing.PROCESS_ROUNDS if args.across == "processes" else racing.THREAD_ROUNDS
    rounds = args.rounds or default
    measure = across_processes if args.across == "processes" else across_threads
    print(measure(args.impl, args.trials).line(rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
