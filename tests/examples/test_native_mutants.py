"""native_store's C mutants (examples/native_store/build.py MUTANTS): each a
deliberate defect compiled from the same C source, each caught.

The slow test runs the oracle's quick run (`python -m shmref.conformance
--impl native_mutants.<name> --quick`) on the levels the store claims (every
level but seed-layout: its bytes are its own) on the store, and on each
mutant the properties listed as its killers (`--only`), and counts as a
kill a property that fails on the mutant and passes on the store itself.
The store fails nothing there.

Two defects are shown directly as well, quickly: the unchecked address
kills its process with SIGSEGV, and the racy count loses concurrent
readers' increments.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest

from shmref.core.levels import LEVELS

REPO = Path(__file__).resolve().parents[2]
NATIVE_DIR = REPO / "examples" / "native_store"
ENV = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{NATIVE_DIR}"}
PASSING = {"pass", "skip", "assumption"}

# The level native_store does not claim (its own byte layout).
UNCLAIMED = "seed-layout"

# mutant -> the layout-independent properties seen to kill it (at least one
# must), from `make native-mutants` and the oracle's quick run.
KILLED_BY: dict[str, set[str]] = {
    "free_after_one_read": {
        "test_storage.py::test_writer_with_lock_counts_its_gets_as_the_seed",
        "test_layout.py::test_same_results_as_seed",
        "test_layout.py::test_same_results_as_refimpl",
    },
    "lap_off_by_one": {
        "test_ring.py::TestBadInput::test_exactly_the_buffer",
        "trace validation",
    },
    "stale_accepted": {
        "test_storage.py::test_stale_handle_after_reuse_is_rejected",
        "test_layout.py::test_same_results_as_seed",
        "test_layout.py::test_same_results_as_refimpl",
        "hazard MCDoubleRead",
        "trace validation",
    },
    "failed_copy_uncounted": {"hazard MCCopyFail"},
    # without the modulo, an address of a later lap reads past the data: a
    # wrong header here, SIGSEGV far out (test_unchecked_address_dies_by_sigsegv)
    "unchecked_address": {
        "test_ring.py::test_address_of_a_far_lap_reads_the_same_chunk",
        "test_ring.py::test_scenario_3_wraparound_to_next_lap",
        "test_storage.py::test_put_frees_oldest_when_full",
        "test_ring.py::TestBadInput::test_address_without_a_chunk",
    },
    # increments lost between reader threads: seen through the API (what
    # free_unused reclaims), with no byte read at the seed's offsets; in
    # every run, no retry: the property makes its threads collide
    # (shmref.store.racing; docs/conformance.md, "Races")
    "racy_count": {"test_storage_readers.py::test_concurrent_reader_threads_count_exactly"},
}

# mutant -> property -> the status it must have: a store that dies is a CRASH
CRASHED_BY: dict[str, dict[str, str]] = {
    "unchecked_address": {"test_ring.py::test_address_of_a_far_lap_reads_the_same_chunk": "CRASH"},
}


def build_all() -> None:
    done = subprocess.run(
        [sys.executable, str(NATIVE_DIR / "build.py"), "--mutants"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode:
        pytest.fail(done.stderr.strip())


def failing(module: str, out: Path, only: Collection[str] = ()) -> dict[str, tuple[str, str]]:
    """The oracle's quick run on `module`, on the levels the store claims (as
    `make native-conformance`): failing property -> (its level, status). Which
    properties fail is all that is asked: no seed column, nothing shrunk.
    `only`: just these properties (`--only`), each in its own level."""
    claimed = [arg for level in LEVELS if level != UNCLAIMED for arg in ("--level", level)]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "shmref.conformance",
            "--impl",
            module,
            "--quick",
            *claimed,
            *(arg for name in sorted(only) for arg in ("--only", name)),
            "--no-baseline",
            "--no-shrink",
            "--out",
            str(out),
        ],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
    )
    report: dict[str, Any] = json.loads((out / "conformance.json").read_text())
    return {
        check["name"]: (name, check["status"])
        for name, level in report["levels"].items()
        for check in level["checks"]
        if check["status"] not in PASSING
    }


@pytest.fixture(scope="module")
def store_failures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    build_all()
    return failing("native_store", tmp_path_factory.mktemp("native_store"))


@pytest.mark.slow
def test_the_store_passes_every_level_it_claims(
    store_failures: dict[str, tuple[str, str]],
) -> None:
    assert store_failures == {}, store_failures  # seed-layout, unclaimed, is not run


@pytest.mark.slow
@pytest.mark.parametrize("mutant", sorted(KILLED_BY))
def test_each_mutant_is_caught_by_the_oracle(
    mutant: str, store_failures: dict[str, tuple[str, str]], tmp_path: Path
) -> None:
    """The run is limited to the properties KILLED_BY names for the mutant
    (`--only`): which others would fail too was never asked, and the whole
    claimed levels are the store's own run (test_the_store_passes_every_level_it_claims)."""
    found = failing(f"native_mutants.{mutant}", tmp_path, only=KILLED_BY[mutant])
    kills = {name for name, (level, _) in found.items() if level != UNCLAIMED}
    kills -= set(store_failures)
    assert kills, f"{mutant} survived the oracle (failures: {found})"
    assert kills & KILLED_BY[mutant], f"{mutant} killed by other properties: {kills}"
    for name, status in CRASHED_BY.get(mutant, {}).items():
        assert found.get(name, ("", "pass"))[1] == status, (name, found.get(name))


# -- shown directly, in a child process -------------------------------------------------------

WRITER_GET = """
    import native_store, importlib
    impl = importlib.import_module({module!r})
    ring = impl.SingleWriterShmRingBuffer(4096, create=True)
    print("segment", ring.handle()[1], flush=True)
    writer = impl.SingleWriterShmObjectStorage(1024, 1, ring)
    writer.put("k", b"value")
    try:
        writer.get(2**40 + 3, 0)  # no chunk there: a clear ValueError, or a crash
    except ValueError as exc:
        print("ValueError:", exc)
    finally:
        ring.close()
"""


def run_child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


@pytest.fixture(scope="module")
def built() -> None:
    build_all()


def test_unchecked_address_dies_by_sigsegv(built: None) -> None:
    """The bounds check's deliberately broken input: without it, an address
    far outside the ring kills the process; with it, a ValueError."""
    ok = run_child(WRITER_GET.format(module="native_store"))
    assert ok.returncode == 0 and "ValueError: " in ok.stdout, ok.stderr
    crashed = run_child(WRITER_GET.format(module="native_mutants.unchecked_address"))
    assert crashed.returncode == -signal.SIGSEGV, (crashed.returncode, crashed.stderr[-500:])
    # the crashed child's resource tracker unlinks its segment
    segment = Path("/dev/shm", crashed.stdout.split()[1])
    for _ in range(50):
        if not segment.exists():
            break
        time.sleep(0.1)
    assert not segment.exists()


CONCURRENT_READS = """
    import importlib, multiprocessing as mp
    from shmref.store import racing
    impl = importlib.import_module({module!r})
    ring = impl.SingleWriterShmRingBuffer(4096, create=True)
    writer = impl.SingleWriterShmObjectStorage(1024, 256, ring, reader_lock=mp.Lock())
    reader = impl.SingleWriterShmObjectStorage.create_from_handle(writer.handle())
    try:
        address, mid = writer.put("k", list(range(50)))
        signature = writer.get_signature("k")
        # 16 threads x 16 rounds, each round released together and
        # interleaved line by line: the 256 reads owed, reclaimed if all counted
        racing.race(16, 16, lambda: reader.get(address, mid, signature, "k"))
        writer.free_unused()
        print("cached" if writer.is_cached("k") else "reclaimed")
    finally:
        reader.close()
        writer.close()
"""


def test_racy_count_loses_concurrent_increments(built: None) -> None:
    """Through the API only: 256 reads owed, 256 made by 16 threads; the store
    reclaims the object, the racy mutant keeps it (lost increments pin it),
    in one run: the threads are made to collide (shmref.store.racing)."""
    store = run_child(CONCURRENT_READS.format(module="native_store"))
    assert store.stdout.split() == ["reclaimed"], store.stderr[-1000:]
    racy = run_child(CONCURRENT_READS.format(module="native_mutants.racy_count"))
    assert racy.stdout.split() == ["cached"], (racy.stdout, racy.stderr[-1000:])
