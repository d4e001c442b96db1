"""The conformance runner's speed machinery, in its smallest proofs: the
shrinking budget (a failure found when nothing of the budget is left is
reported unshrunk and says so, and its replay command runs), the progress
lines (one per finished property off a terminal, a bar redrawn on one), and
the claims by which several children share a run's tests (each test run by
exactly one child). That sharding loses no property and keeps a crash to its
own property is tests/oracle/test_isolation.py's (a store that segfaults, judged
with one child and with three)."""

from __future__ import annotations

import io
import os
import subprocess
import unittest
from pathlib import Path

import pytest
from shell_support import in_a_fresh_shell

from shmref.core.levels import HARDENED, PROTOCOL, SEED
from shmref.core.suitegroups import TEST_GROUPS
from shmref.oracle.events import (
    CaseResult,
    Collected,
    Event,
    Finished,
    HazardJudged,
    Lost,
    ProgramFailed,
    Recorded,
    Started,
    encode,
    parse,
)
from shmref.oracle.progress import Progress
from shmref.oracle.report import Report
from shmref.oracle.shards import Claims, rank
from shmref.oracle.testgroups import pytest_checks
from shmref.oracle.verdict import Check
from shmref.seed.mutants import build_mutant
from shmref.session.shrinkbudget import ShrinkBudget, note_in, parse_budget

MUTANT = "free_rule_without_n_readers"
MACHINE = "test_stateful.py::test_store_machine[fixed]"


def test_budget_values(tmp_path: Path) -> None:
    assert parse_budget("0") == 0 and parse_budget("25") == 25 and parse_budget("all") is None
    for bad in ("-1", "nan", "inf", "2.5", "soon"):
        with pytest.raises(ValueError, match="not a number of examples"):
            parse_budget(bad)


def test_the_plugin_refuses_a_nonsense_budget_in_one_line() -> None:
    proc = subprocess.run(
        ["python3", "-m", "pytest", "--shmref-impl", "refimpl", "--shmref-shrink-budget", "x"],
        capture_output=True,
        text=True,
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr  # pytest's usage error
    assert proc.stderr.strip().splitlines() == [
        "ERROR: --shmref-shrink-budget: 'x' is not a number of examples (0 or more, or 'all')"
    ]


def test_a_budget_too_small_keeps_the_unshrunk_counterexample_and_says_so() -> None:
    """The report's note and replay command for a case whose shrinking the
    budget stopped; the command, pasted into a fresh shell with no budget at
    all, fails on the broken store with a counterexample and the same note."""
    module = build_mutant(MUTANT)
    group = next(g for g in TEST_GROUPS if g.label == MACHINE)
    budget = ShrinkBudget(0)
    text = "E   AssertionError: counts\n\nshmref: " + budget.note()
    case = {"node": MACHINE, "status": "fail", "text": text}
    (check,) = pytest_checks(module.__name__, [group], [case], module)
    (failure,) = check.failures
    assert failure["note"] == note_in(text) == budget.note()
    assert "--shmref-shrink-budget all" in failure["command"], "the replay shrinks to the end"
    markdown = Report(module.__name__, False, [check], 1.0, []).markdown()
    assert f"Note: {budget.note()}." in markdown
    command = failure["command"].replace("--shmref-shrink-budget all", "--shmref-shrink-budget 0")
    fresh = in_a_fresh_shell(command)
    output = fresh.stdout[-6000:] + fresh.stderr[-2000:]
    assert fresh.returncode == 1, command + "\n" + output
    assert "Falsifying example" in output and "shrinking stopped by the shrink budget" in output
    assert "five minutes" not in output, "Hypothesis's own warning is replaced by ours"


A, B = "test_ring.py::test_a", "test_ring.py::test_b[1]"
RUN: list[Event] = [
    Collected((A, B)),
    Collected((A, B)),
    Started(A, (SEED, A)),
    CaseResult(A, "pass", ""),
    Finished(A),
    Started(B, (SEED, "test_ring.py::test_b")),
    CaseResult(B, "fail", "E boom"),
    Finished(B),
    Recorded(Path("r1.json"), None),
    HazardJudged((PROTOCOL, "hazard MCX"), Check(PROTOCOL, "hazard MCX", "", "assumption")),
    # a store program's proxy says why it stops (shmref.process): the child's event, which
    # finishes nothing; the parent's Lost, with the property, follows it
    ProgramFailed("ERROR", "shmref.process: a line that is not JSON"),
    Lost((HARDENED, "test_ring.py::TestBadInput::t"), "CRASH", None),
]
OTHERS = {(PROTOCOL, "trace validation"): 1, (PROTOCOL, "hazard MCX"): 1}


def test_progress_off_a_terminal_is_one_line_per_finished_property() -> None:
    stream = io.StringIO()
    progress = Progress(stream, OTHERS, clock=lambda: 0.0, tty=False)
    for event in RUN:
        progress.event(parse(encode(event)))  # as the oracle reads them from a child
    progress.close()
    assert stream.getvalue().splitlines() == [
        "shmref: [1/4] seed-compatible: test_ring.py::test_a: pass (0 s)",
        "shmref: [2/4] seed-compatible: test_ring.py::test_b: FAIL (0 s)",
        "shmref: [3/4] protocol-safe: trace validation: recorded (0 s)",
        "shmref: [4/4] protocol-safe: hazard MCX: assumption (0 s)",
        "shmref: [5/5] hardened: test_ring.py::TestBadInput::t: CRASH (0 s)",
    ]


def test_progress_on_a_terminal_is_one_line_redrawn() -> None:
    stream = io.StringIO()
    times = iter([0.0] + [75.0] * 100)
    progress = Progress(stream, OTHERS, clock=lambda: next(times), tty=True)
    for event in RUN:
        progress.event(event)
    progress.close()
    text = stream.getvalue()
    assert "\n" not in text and text.count("\r\x1b[K") > len(RUN) // 2
    assert "5/5 1 min 15 s, 2 failing" in text and text.endswith("\r\x1b[K")


def test_each_claim_is_won_by_exactly_one_child(tmp_path: Path) -> None:
    first, second = Claims(tmp_path / "claims"), Claims(tmp_path / "claims")
    assert first.claim("test_ring.py::test_a")
    assert not second.claim("test_ring.py::test_a")
    assert second.claim("test_ring.py::test_b") and first.claimed("test_ring.py::test_b")


def test_the_longest_tests_are_claimed_first() -> None:
    every_edge = "test_replay.py::test_allocator_state_graph_every_edge"
    assert rank(every_edge) < rank(MACHINE) < rank("test_layout.py::x") < rank("test_ring.py::x")


def test_the_budget_reaches_this_hypothesis() -> None:
    """The budget wraps the installed Hypothesis's shrinking step (a private
    API, renamed once): a failing test with no examples to try is cut short,
    one with a few is cut short after exactly those (the same counterexample
    on every run), and one without a budget of ours is not."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=200, database=None, derandomize=True)
    @given(st.lists(st.integers(0, 1000), min_size=5))
    def fails(xs: list[int]) -> None:
        assert sum(xs) < 1000

    from shmref.session import shrinkbudget

    previous = shrinkbudget.active()
    found: dict[int | None, list[str]] = {}
    for examples, cut in ((0, True), (5, True), (5, True), (None, False)):
        budget = ShrinkBudget(examples)
        budget.install()
        budget.test = "fails"
        try:
            with pytest.raises(AssertionError) as failure:
                fails()
        finally:
            shrinkbudget._active = previous  # this session's own budget again
        assert budget.cut_short("fails") is cut, examples
        said = [note for note in getattr(failure.value, "__notes__", []) if "xs=" in note]
        assert found.setdefault(examples, said) == said, "the same counterexample each time"
    assert found[0] != found[5] != found[None], "a budget of 5 shrinks some, not all the way"


def test_a_saved_example_is_replayed_and_shrunk_within_its_share(tmp_path: Path) -> None:
    """The oracle's two passes in one process: the first saves the failing
    example unshrunk (and says it was not shrunk), the second replays it
    without generating and shrinks it within its share, to the same
    counterexample every time; a test without a saved example is skipped
    there (nothing is generated), so it cannot fail the second pass."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from shmref.session import shrinkbudget
    from shmref.session.shrinkbudget import saved_tests

    calls: list[list[int]] = []

    @settings(max_examples=200, database=None, derandomize=True)
    @given(st.lists(st.integers(0, 1000), min_size=5))
    def fails(xs: list[int]) -> None:
        calls.append(xs)
        assert sum(xs) < 1000

    def run(budget: ShrinkBudget, test: str) -> list[str]:
        budget.install()
        budget.test = test
        try:
            with pytest.raises(AssertionError) as failure:
                fails()
        finally:
            shrinkbudget._active = previous
        return [note for note in getattr(failure.value, "__notes__", []) if "xs=" in note]

    previous = shrinkbudget.active()
    first = ShrinkBudget(0)
    first.save_to = tmp_path
    unshrunk = run(first, "fails")
    assert first.cut_short("fails") and saved_tests(tmp_path) == ["fails"]
    found = []
    for _ in range(2):
        second = ShrinkBudget(5)
        second.replay_from = tmp_path
        calls.clear()
        found.append(run(second, "fails"))
        assert second.cut_short("fails")
        assert len(calls) <= 1 + 5 + 1, "the replay, its share, the final report: nothing generated"
    assert found[0] == found[1] != unshrunk
    second = ShrinkBudget(5)
    second.replay_from = tmp_path
    second.install()
    second.test = "never failed"
    try:
        with pytest.raises((pytest.skip.Exception, unittest.SkipTest), match="no examples"):
            fails()  # no saved example: nothing is generated
    finally:
        shrinkbudget._active = previous
