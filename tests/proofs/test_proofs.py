"""The CrossHair proofs (`proofs/`) hold, have teeth, and the seed agrees.

Fast tests (about a minute together) run CrossHair with small budgets; the
full `python -m proofs` run (the contracts with larger budgets, diffbehavior
on every seed/refimpl pair, the Hypothesis differential) and the searches
for a broken variant are marked `slow` (`make test-slow`). Differential
tests skip without the seed text.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from proofs import broken, lockstep, record, refring, seeddiff, seedring, steps
from refimpl import allocator

REPO = Path(__file__).resolve().parents[2]


def crosshair(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    return subprocess.run(
        [sys.executable, "-m", "crosshair", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def contract_lines(fn: object) -> list[str]:
    doc = inspect.getdoc(fn) or ""
    return [line.strip() for line in doc.splitlines() if re.match(r"\s*(pre|post)\b", line)]


needs_seed = pytest.mark.skipif(
    not seedring._seed_text_path().is_file(), reason="seed text absent (set $SHMREF_SEED)"
)


# -- the contracts -------------------------------------------------------------


def test_every_allocator_function_has_a_contract() -> None:
    for name in ("place", "next_id", "reclaim", "lap_correct", "freed_ids"):
        assert any(line.startswith("pre:") for line in contract_lines(getattr(allocator, name)))


def test_broken_variants_carry_place_contract_verbatim() -> None:
    expected = contract_lines(allocator.place)
    assert len(expected) == 10
    for variant in (broken.place_straddle, broken.place_early_wrap, broken.place_overcommit):
        assert contract_lines(variant) == expected, variant.__name__


def test_broken_step_carries_the_step_contract() -> None:
    assert contract_lines(broken.allocate_any_overcommit) == contract_lines(steps.allocate_any)


def test_allocator_contracts_hold() -> None:
    done = crosshair(
        "check",
        "--analysis_kind=PEP316",
        "--per_condition_timeout=4",
        "--report_all",
        "refimpl.allocator",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "error" not in done.stdout
    assert done.stdout.count("Confirmed over all paths") >= 15, done.stdout


FAST_STEPS = ("allocate_any", "allocate_bounds", "allocate_ids", "reclaim_any", "free_ids")


def test_unbounded_step_contracts_hold() -> None:
    """The steps CrossHair proves quickly; the list steps are `make proofs`'
    (proofs/record.json), and run on every commit at smoke budgets."""
    done = crosshair(
        "check",
        "--analysis_kind=PEP316",
        "--per_condition_timeout=10",
        "--report_all",
        *(f"proofs.steps.{name}" for name in FAST_STEPS),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "error" not in done.stdout
    assert done.stdout.count("Confirmed over all paths") == 16, done.stdout


@pytest.mark.parametrize(
    "target",
    [
        "proofs.broken.place_straddle",
        "proofs.broken.place_early_wrap",
        "proofs.broken.place_overcommit",
        "proofs.broken.allocate_any_overcommit",
    ],
)
def test_crosshair_refutes_broken_variant(target: str) -> None:
    done = crosshair("check", "--analysis_kind=PEP316", "--per_condition_timeout=5", target)
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"error: false when calling \w+\(", done.stdout), done.stdout


def test_broken_variants_are_wrong_concretely() -> None:
    """The counterexamples CrossHair reports, checked by hand."""
    assert broken.place_straddle(1, 1, 2, 2) == 1  # [1, 3) straddles a 2-byte buffer
    assert allocator.place(1, 1, 2, 2) is None
    assert broken.place_early_wrap(0, 0, 1, 1) is None  # refuses a chunk that fits
    assert allocator.place(0, 0, 1, 1) == 0
    assert broken.place_overcommit(1, 1, 2, 2) == 2  # occupies 3 bytes of 2
    assert allocator.place(1, 1, 2, 2) is None


def test_steps_hold_on_concrete_examples() -> None:
    """A sanity check of the model the contracts talk about."""
    chunks = [(20, 10), (30, 5)]  # capacity 40, start 20, end 35
    assert steps.ring_ok(20, 35, 40, chunks)
    new = steps.allocate_step(20, 35, 40, chunks, 10)  # 35 + 10 > 40: next lap
    assert new == (40, 10)
    assert steps.ring_ok(20, 50, 40, [*chunks, new])
    assert steps.allocate_step(20, 35, 40, chunks, 20) == (40, 20)  # exactly full
    assert steps.allocate_step(20, 35, 40, chunks, 21) is None
    assert steps.reclaim_step(20, 50, 40, [*chunks, new], lag=False) == (30, 50)
    assert steps.lap_step(40, 50, 40, [new]) == (0, 10, [(0, 10)])
    assert steps.free_ids(2, 2, 3, 3) == ([2, 0], 1)


# -- the differential against the seed ----------------------------------------


@needs_seed
def test_seed_docstring_scenarios_agree() -> None:
    """The seed class docstring's scenarios 1-4 (100-byte buffer)."""
    ops = [
        ("allocate", 20),
        ("allocate", 30),
        ("release", 1),
        ("release", 1),
        ("allocate", 40),
        ("allocate", 20),
    ]
    assert lockstep.run_ops(100, 2**31, ops) is None
    both = lockstep.Lockstep(100, 2**31)
    for op in ops[:2]:
        assert both.apply(op) is None
    assert (both.state.start, both.state.end) == (0, 66)
    assert both.apply(("release", 1)) is None
    assert (both.state.start, both.state.end) == (28, 66)


@needs_seed
def test_seed_and_allocator_agree_on_random_sequences() -> None:
    assert lockstep.hypothesis_differential(300) is None


@needs_seed
@pytest.mark.parametrize(
    "place_fn, ops",
    [
        (broken._overcommit, [("allocate", 4), ("allocate", 1), ("release", 1), ("allocate", 5)]),
        (broken._straddle, [("allocate", 1), ("allocate", 1), ("release", 1), ("allocate", 5)]),
        (broken._early_wrap, [("allocate", 22)]),
    ],
)
def test_differential_notices_broken_place(place_fn: refring.PlaceFn, ops: list) -> None:
    capacity = 30
    assert lockstep.run_ops(capacity, 2**31, ops) is None
    assert lockstep.run_ops(capacity, 2**31, ops, place_fn=place_fn) is not None


@needs_seed
@pytest.mark.slow
def test_differential_searches_find_broken_place() -> None:
    assert lockstep.hypothesis_differential(1000, place_fn=broken._overcommit) is not None


@needs_seed
def test_diff_wrappers_agree_concretely() -> None:
    state = (30, 2**31, 20, 7, [9, 9], [False, True], 1)  # [20, 29) then [30, 39)
    assert seeddiff.seed_free_diff(*state, 2, 5) == seeddiff.ref_free_diff(*state, 2, 5)
    assert seeddiff.seed_allocate_diff(*state, 1) == seeddiff.ref_allocate_diff(*state, 1)


# That diffbehavior finds no difference on proofs.__main__.DIFF_PAIRS:
# `python -m proofs` runs each pair with the same 30 s budget (`make proofs`, kept in
# proofs/record.json; CI runs it at 3 s) and fails unless every pair exits 0.


@needs_seed
@pytest.mark.slow
def test_diffbehavior_finds_the_straddle() -> None:
    """The differential as `python -m proofs` runs it on DIFF_PAIRS (the
    seed's side first) tells the straddling place from the seed's.
    diffbehavior spends its whole budget whatever it finds, half on each
    order of the pair, counted in CPU seconds (CrossHair's process_time);
    the straddle shows 8-10 CPU s into the second half on a quiet machine.
    A CPU second does less work on a loaded one (the two cores share
    caches): with 15 s a half it was missed once while both cores were
    busy (2026-12-07), so each half gets 25 s, 2.5 times what it needs."""
    done = crosshair(
        "diffbehavior",
        "--per_condition_timeout=50",
        "proofs.seeddiff.seed_allocate_diff",
        "proofs.broken.ref_allocate_straddle_diff",
        timeout=900,  # wall seconds: room for a loaded machine
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Given:" in done.stdout


@pytest.mark.slow
def test_python_m_proofs_passes_end_to_end_at_smoke_budgets() -> None:
    """`python -m proofs` passes end to end on every commit: every contract
    and every seed/refimpl pair of `crosshair diffbehavior`
    (proofs.__main__.DIFF_PAIRS), at budgets that only run the command (2 s
    per condition, 3 s per pair, 100 sequences). What the budgets find on
    these files is proofs/record.json's, made at the full ones and bound to
    the files by SHA-256 (the next test): a search that cannot finish finds
    the same nothing on the same files at any budget, and the conditions
    CrossHair proves in seconds are proved again in `make test`
    (test_allocator_contracts_hold, test_unbounded_step_contracts_hold)."""
    from proofs.__main__ import DIFF_PAIRS

    assert ("proofs.seeddiff.seed_free_diff", "proofs.seeddiff.ref_free_diff") in DIFF_PAIRS
    smoke = ["--per-condition-timeout", "2", "--diff-timeout", "3", "--examples", "100"]
    done = subprocess.run(
        [sys.executable, "-m", "proofs", *smoke],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "contracts: " in done.stdout and " 0 counterexamples" in done.stdout, done.stdout
    if seedring._seed_text_path().is_file():  # the differential ran, not skipped
        assert "SKIPPED: seed text not found" not in done.stdout, done.stdout[-3000:]
        assert done.stdout.count("No differences found") == len(DIFF_PAIRS), done.stdout


def test_the_full_budget_record_is_of_these_files() -> None:
    """proofs/record.json, written by `make proofs` when `python -m proofs`
    passed at its full budgets (20 s per condition, 30 s per pair, 2000
    sequences, the seed's differential run), is of the files the proofs
    read now: a change to any of them makes it stale until `make proofs`."""
    done = subprocess.run(
        [sys.executable, "-m", "proofs", "--check-record"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    from proofs.__main__ import DIFF_PAIRS

    data = json.loads(record.RECORD.read_text())
    full = {"per_condition_timeout": 20.0, "diff_timeout": 30.0, "examples": 2000}
    assert data["budgets"] == full
    summary = data["summary"]
    assert any(line.startswith("contracts:") and " 0 counterexamples" in line for line in summary)
    assert sum("No differences found" in line for line in summary) == len(DIFF_PAIRS)


def test_a_changed_input_or_seed_makes_the_record_stale(tmp_path: Path) -> None:
    """The broken inputs of the record's check: an allocator edited in a copy,
    a new module in proofs/, another seed text."""
    copy = tmp_path / "repo"
    for path in record.inputs():
        target = copy / path.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    seed = seedring._seed_text_path()
    seed_here = seed if seed.is_file() else None
    assert record.problem(seed_here, root=copy) == ""
    allocator_copy = copy / "refimpl" / "allocator.py"
    allocator_copy.write_text(allocator_copy.read_text() + "\n# edited\n")
    assert "refimpl/allocator.py changed" in record.problem(seed_here, root=copy)
    allocator_copy.write_bytes((REPO / "refimpl" / "allocator.py").read_bytes())
    (copy / "proofs" / "extra.py").write_text("X = 1\n")
    assert "proofs/extra.py changed" in record.problem(seed_here, root=copy)
    (copy / "proofs" / "extra.py").unlink()
    other_seed = tmp_path / "seed.txt"
    other_seed.write_text("another seed text\n")
    assert "another seed text" in record.problem(other_seed, root=copy)
