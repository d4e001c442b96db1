"""The markers `slow` and `tlc` select what they claim (`make test` runs
`-m "not slow"`, `make test-slow` runs `-m slow`, `-m "not tlc"` runs
without Java). This is about pytest's command line itself, so it runs two
collections (no test runs) of three files as subprocesses: each expression
keeps the tests it names and leaves out the others."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

QUICK_TLC = "tests/test_tlc.py::test_passing_model"
SLOW_TLC = "tests/test_conformance.py::TestCli::test_refimpl_passes_every_level"
PURE = "tests/test_tlc.py::test_frozen_dict"
SLOW_PURE = "tests/test_fuzz.py::test_fuzz_gets_only_clear_errors[all]"
QUICK_PURE = "tests/test_fuzz.py::test_fuzz_gets_only_clear_errors[some]"
# files collected with or without Java (test_check and test_deep skip as modules without it)
FILES = ["tests/test_tlc.py", "tests/test_conformance.py", "tests/test_fuzz.py"]


def collected(expression: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + ["-p", "no:xdist", "-m", expression, *FILES],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return {line for line in done.stdout.splitlines() if "::" in line}


def test_tlc_and_slow_select_what_they_claim() -> None:
    tlc_quick = collected("tlc and not slow")
    assert QUICK_TLC in tlc_quick, sorted(tlc_quick)
    assert not {SLOW_TLC, PURE, QUICK_PURE, SLOW_PURE} & tlc_quick
    # SLOW_TLC is a TLC test: it is here only for its `slow`; QUICK_TLC is not slow
    slow_or_pure = collected("slow or not tlc")
    assert {SLOW_TLC, SLOW_PURE, PURE, QUICK_PURE} <= slow_or_pure, sorted(slow_or_pure)
    assert QUICK_TLC not in slow_or_pure
