"""The bad-input fuzz (shmref/fuzzing/fuzz.py): 0 values and 0 unexpected exceptions
over >= 10**4 calls, in this process and under `python -O`; and a store that
returns a value for a bad id, or lets `struct.error` out, is caught."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import refimpl
from refimpl import ring as refimpl_ring
from shmref.fuzzing.fuzz import fuzz

REPO = Path(__file__).resolve().parents[2]
# The claim (README's Guarantees) is over >= 10**4 calls: that run is `slow`;
# `make test` runs a fifth of it in each mode.
CALLS = 10_240
SOME_CALLS = 2_048
EACH_SIZE = pytest.mark.parametrize(
    "calls", [SOME_CALLS, pytest.param(CALLS, marks=pytest.mark.slow)], ids=["some", "all"]
)


def show(capsys: pytest.CaptureFixture[str], line: str) -> None:
    with capsys.disabled():
        print(f"\n{line}")


@EACH_SIZE
def test_fuzz_gets_only_clear_errors(impl, capsys, calls):
    report = fuzz(impl, calls)
    show(capsys, report.summary())
    assert report.calls >= calls
    assert report.ok, report.details()
    assert sum(report.raised.values()) == report.calls  # every call raised


@EACH_SIZE
def test_fuzz_under_python_O(impl_name, capsys, calls):
    run = subprocess.run(
        [sys.executable, "-O", "-m", "shmref", "fuzz", "--impl", impl_name, "--calls", str(calls)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    show(capsys, run.stdout.strip().replace("\n", "; "))
    counts = re.search(r"fuzz: (\d+) calls, (\d+) values, (\d+) unexpected", run.stdout)
    assert counts, run.stdout + run.stderr
    assert "optimized: 1" in run.stdout  # the asserts really were stripped
    assert int(counts[1]) >= calls
    assert (counts[2], counts[3]) == ("0", "0"), run.stdout
    assert run.returncode == 0, run.stdout + run.stderr


# -- the fuzz must catch what it claims ---------------------------------------------


def mutant(**classes: type) -> types.ModuleType:
    """refimpl with some classes replaced."""
    module = types.ModuleType("refimpl_fuzz_mutant")
    module.__dict__.update({name: getattr(refimpl, name) for name in refimpl.__all__})
    module.__dict__.update(classes)
    return module


class LooseIdStore(refimpl.SingleWriterShmObjectStorage):
    """The seed's writer get: any number equal to the id is accepted."""

    def get(self, address, monotonic_id, signature=None, key=None):
        if self.is_writer:
            try:
                monotonic_id, address = int(monotonic_id), int(address)
            except (TypeError, ValueError):
                pass
        return super().get(address, monotonic_id, signature, key)


class UncheckedHeaderRing(refimpl.SingleWriterShmRingBuffer):
    """The seed's header read: no check that the header fits in the segment."""

    def read_header(self, address):
        return refimpl_ring.HEADER.unpack_from(self._buf(), self._offset(address))


def test_fuzz_catches_values_for_look_alike_ids():
    report = fuzz(mutant(SingleWriterShmObjectStorage=LooseIdStore), 1024)
    assert report.values
    assert any("look-alike" in value for value in report.values), report.details()


def test_fuzz_catches_struct_error_past_the_end():
    report = fuzz(mutant(SingleWriterShmRingBuffer=UncheckedHeaderRing), 1024)
    assert any("error" in line and "read_header" in line for line in report.unexpected), (
        report.details()
    )
