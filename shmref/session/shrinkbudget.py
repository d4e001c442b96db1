"""One shrinking budget for a whole test session, not five minutes per test.

Hypothesis shrinks each failing test for up to
`hypothesis.internal.conjecture.engine.MAX_SHRINKING_SECONDS` (300 s); a store
that fails every state machine then spends quarter hours shrinking, where
finding the failures took seconds. `ShrinkBudget.install()` lowers that bound
before each shrink to what is left of the session's budget, so that a
failing session is at most `seconds` longer than a passing one. A test whose
shrinking was stopped by the budget keeps its counterexample as far as it
got (unshrunk when nothing was left) and is named by `cut_short`.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any

NOTE = (
    "shrinking stopped by the shrink budget ({budget:g} s in all): this counterexample may "
    "not be the shortest (a larger --shmref-shrink-budget shrinks it further)"
)
_HYPOTHESIS_WARNING = "WARNING: Hypothesis has spent more than five minutes"


def note_in(text: str) -> str:
    """The budget's note in a failed test's output ("" if its shrinking ran to the end)."""
    found = re.search(r"^shmref: (shrinking stopped by the shrink budget[^\n]*)", text, re.M)
    return found.group(1) if found else ""


def parse_budget(text: str) -> float:
    """A budget in seconds (0: no shrinking at all); ValueError with one line otherwise."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (0 <= value < float("inf")):
        raise ValueError(f"{text!r} is not a number of seconds (0 or more)")
    return value


class ShrinkBudget:
    """What is left of `seconds` of shrinking in this process, and which
    tests had their shrinking stopped by it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.spent = 0.0
        self.test: str = ""  # the running test (set by the caller's hooks)
        self.cut: set[str] = set()
        self._lock = threading.Lock()

    @property
    def left(self) -> float:
        """Seconds of shrinking this process has left."""
        return max(0.0, self.seconds - self.spent)

    def cut_short(self, test: str) -> bool:
        """Whether the budget stopped `test`'s shrinking."""
        return test in self.cut

    def note(self) -> str:
        """The line that tells a reader a counterexample may not be the shortest."""
        return NOTE.format(budget=self.seconds)

    def install(self) -> None:
        """Make this the budget of every shrink in this process from now on."""
        global _active
        _active = self
        _wrap_once()


_active: ShrinkBudget | None = None


def active() -> ShrinkBudget | None:
    """The budget installed in this process, if any."""
    return _active


# Hypothesis's shrinking step, by version (6.100-6.15x, then renamed)
SHRINK_STEPS = ("shrink_interesting_examples", "shrink_interesting_test_cases")


def _wrap_once() -> None:
    """Wrap Hypothesis's shrinking step (once per process) to stay within
    `_active`. Private API, so looked up by its known names: a Hypothesis
    where none is found gets a bound per test instead (MAX_SHRINKING_SECONDS
    set to the whole budget), never an error."""
    from hypothesis.internal.conjecture import engine

    runner = engine.ConjectureRunner
    step = next((name for name in SHRINK_STEPS if hasattr(runner, name)), None)
    if step is None:
        if _active is not None and hasattr(engine, "MAX_SHRINKING_SECONDS"):
            engine.MAX_SHRINKING_SECONDS = _active.seconds  # type: ignore[assignment]
        return
    original: Callable[[Any], None] = getattr(runner, step)
    if getattr(original, "_shmref_wrapped", False):
        return
    loud = getattr(engine, "report", None)
    quiet_report = _without_hypothesis_warning(loud) if loud is not None else None
    slow = getattr(getattr(engine, "ExitReason", None), "very_slow_shrinking", None)

    def shrink_within_budget(self: Any) -> None:
        budget = _active
        if budget is None:
            return original(self)
        engine.MAX_SHRINKING_SECONDS = budget.left  # type: ignore[assignment]
        if quiet_report is not None:  # our NOTE replaces its "five minutes" warning
            engine.report = quiet_report  # type: ignore[attr-defined]
        start = time.perf_counter()
        try:
            original(self)
        finally:
            with budget._lock:
                budget.spent += time.perf_counter() - start
                if slow is not None and getattr(self, "exit_reason", None) == slow:
                    budget.cut.add(budget.test)

    shrink_within_budget._shmref_wrapped = True  # type: ignore[attr-defined]
    setattr(runner, step, shrink_within_budget)


def _without_hypothesis_warning(report: Callable[..., Any]) -> Callable[..., Any]:
    def quiet(value: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(value, str) and value.startswith(_HYPOTHESIS_WARNING):
            return None
        return report(value, *args, **kwargs)

    return quiet
