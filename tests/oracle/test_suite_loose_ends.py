"""Two behaviours of the seed the suite once left unchecked (issue 41), each
with a store that gets it wrong and passed every level before:

- a reader made from the writer's own `handle()` (as vLLM's tests make
  them) reads what the writer put: `tests/stores/seed_handle_without_lock.py`
  drops the readers' lock from the handle;
- a correct signature given as a tuple or as bytes is a ValueError:
  `tests/stores/seed_signature_any_sequence.py` takes it.

In `make test`: the two suite tests pass the seed, refimpl and refimpl behind
the process protocol, and fail each broken store. `slow`: each broken store
fails exactly its test in the whole seed-compatible level."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from shmref.seed.build import SeedError
from shmref.seed.impl import load_impl

REPO = Path(__file__).resolve().parents[2]
STORES = Path(__file__).resolve().parents[1] / "stores"
SUITE = "shmref/suite/test_storage.py"
OWN_HANDLE = "test_a_reader_made_from_the_writers_own_handle_reads"
OTHER_TYPE = "test_a_correct_signature_of_another_type_is_refused"
BROKEN = {
    "seed_handle_without_lock": {OWN_HANDLE},
    "seed_signature_any_sequence": {f"{OTHER_TYPE}[tuple]", f"{OTHER_TYPE}[bytes]"},
}


@pytest.fixture(scope="module")
def seed_built() -> Iterator[None]:
    """The broken stores are the seed's text edited: skipped without the seed file."""
    try:
        load_impl("seed")
    except SeedError as exc:
        pytest.skip(str(exc))
    yield


def failing(impl: str, *selection: str) -> tuple[set[str], str]:
    """`pytest --shmref-impl IMPL SELECTION`, the broken stores importable:
    (the failed or erroring tests' names with their parameters, the output)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), str(STORES), env.get("PYTHONPATH", "")) if p
    )
    command = [sys.executable, "-m", "pytest", "-q", "-rfE", "-n", "0", "-p", "no:cacheprovider"]
    command += ["--rootdir", str(REPO), "--shmref-impl", impl, "--shmref-profile"]
    command += ["shmref-quick-baseline", *selection]
    run = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    failed = {
        line.split("::")[-1].split()[0]
        for line in run.stdout.splitlines()
        if line.startswith(("FAILED ", "ERROR "))
    }
    assert run.returncode in (0, 1) and " passed" in run.stdout, run.stdout[-3000:] + run.stderr
    return failed, run.stdout[-3000:]


@pytest.mark.parametrize(
    "impl",
    [
        "seed",
        "refimpl",
        "exec:python3 -m shmref.process.serve refimpl",
        *BROKEN,
    ],
)
def test_the_two_behaviours_pass_the_seed_and_fail_the_broken_stores(seed_built, impl):
    failed, out = failing(impl, f"{SUITE}::{OWN_HANDLE}", f"{SUITE}::{OTHER_TYPE}")
    assert failed == BROKEN.get(impl, set()), out


@pytest.mark.slow
@pytest.mark.parametrize("store", sorted(BROKEN))
def test_the_broken_store_fails_only_its_test_in_seed_compatible(seed_built, store):
    """Everything else of the level passes, as on the seed: the new test is
    what tells this store from the seed."""
    failed, out = failing(store, "--pyargs", "shmref.suite", "-m", "seed_compatible")
    assert failed == BROKEN[store], out
