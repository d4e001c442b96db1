"""A shrinking budget counted in examples, not seconds, so that a failing
test's counterexample is the same on every machine and every run.

Hypothesis shrinks each failing test until it gives up (500 successful
shrinks, or `MAX_SHRINKING_SECONDS`: 300 s); each example it tries is a run
of the test, a whole state machine for most of the suite, so a store that
fails several state machines spent minutes shrinking where finding the
failures took seconds. A bound in seconds (this module's first form) made
how far a counterexample got depend on the machine's speed and load.
`ShrinkBudget(examples)` instead lets each failing test try at most that
many examples while shrinking: with the suite's derandomized profiles the
same examples are tried in the same order everywhere, so the counterexample
is the same too. A test whose shrinking the budget stopped keeps its
counterexample as far as it got (unshrunk at 0) and is named by `cut_short`.

The oracle (shmref.oracle.conformance_run) splits one budget for the whole
run among the properties that failed, which it knows only once they have
all run: its first pass saves each failing test's example (`save_to`)
instead of shrinking it, its second replays the saved ones (`replay_from`)
and shrinks them, each within its share. Shrinking never decides a status:
the first pass's statuses are the run's.

The hooks wrap private methods of Hypothesis's engine, looked up by their
known names; a Hypothesis without them gets `MAX_SHRINKS` (successful
shrinks per test, also a count) set to the budget instead, never an error.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ALL = "all"  # no budget of ours: Hypothesis's own limits (the report's replay commands)
NOTE = (
    "shrinking stopped by the shrink budget ({budget} examples tried while shrinking this "
    "test): this counterexample may not be the shortest (--shmref-shrink-budget all "
    "shrinks it as far as Hypothesis does)"
)


def note_in(text: str) -> str:
    """The budget's note in a failed test's output ("" if its shrinking ran to the end)."""
    found = re.search(r"^shmref: (shrinking stopped by the shrink budget[^\n]*)", text, re.M)
    return found.group(1) if found else ""


def parse_budget(text: str) -> int | None:
    """A number of examples (0: no shrinking), or None for `all` (Hypothesis's
    own limits); ValueError with one line otherwise."""
    if text.strip().lower() == ALL:
        return None
    if not text.strip().isdigit():
        raise ValueError(f"{text!r} is not a number of examples (0 or more, or '{ALL}')")
    return int(text)


class ShrinkBudget:
    """How many examples each failing test of this process may try while
    shrinking (None: as many as Hypothesis would), and which tests it stopped.
    With `save_to`, failing examples are saved there and not shrunk; with
    `replay_from`, a test whose examples were saved there replays them
    instead of generating new ones (shmref.oracle.conformance_run's two passes)."""

    def __init__(self, examples: int | None) -> None:
        self.examples = examples
        self.test: str = ""  # the running test (set by the caller's hooks)
        self.cut: set[str] = set()
        self.save_to: Path | None = None
        self.replay_from: Path | None = None
        self._lock = threading.Lock()

    def cut_short(self, test: str) -> bool:
        """Whether the budget stopped `test`'s shrinking."""
        return test in self.cut

    def note(self) -> str:
        """The line that tells a reader a counterexample may not be the shortest."""
        return NOTE.format(budget=self.examples)

    def install(self) -> None:
        """Make this the budget of every shrink in this process from now on."""
        global _active
        _active = self
        _wrap_once()

    def _stopped(self) -> None:
        with self._lock:
            self.cut.add(self.test)


_active: ShrinkBudget | None = None


def active() -> ShrinkBudget | None:
    """The budget installed in this process, if any."""
    return _active


def example_file(folder: Path, test: str) -> Path:
    """Where a test's failing examples are saved (one file per test id)."""
    return folder / (hashlib.sha256(test.encode()).hexdigest()[:24] + ".json")


def saved_tests(folder: Path) -> list[str]:
    """The tests whose failing examples a first pass saved in `folder`."""
    tests = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            tests.append(str(json.loads(path.read_text())["test"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a file cut short by a crash: that test is not shrunk
    return sorted(tests)


# Hypothesis's engine steps, by version (the shrinking step was renamed once)
SHRINK_STEPS = ("shrink_interesting_examples", "shrink_interesting_test_cases")
_SHRINKING = "_shmref_shrinking"  # attribute on a runner: examples tried while shrinking


def _wrap_once() -> None:
    """Wrap Hypothesis's shrinking step, its test calls and its generation
    (once per process) to follow `_active`."""
    from hypothesis import Phase
    from hypothesis.internal.conjecture import engine

    runner = engine.ConjectureRunner
    step = next((name for name in SHRINK_STEPS if hasattr(runner, name)), None)
    codec = _choice_codec()
    max_shrinks = getattr(engine.ExitReason, "max_shrinks", None)
    needed = (step, getattr(runner, "test_function", None), codec, max_shrinks)
    if any(part is None for part in needed) or not hasattr(runner, "generate_new_examples"):
        if _active is not None and _active.examples is not None:
            engine.MAX_SHRINKS = max(1, _active.examples)
        return
    assert step is not None and codec is not None
    original_shrink: Callable[[Any], None] = getattr(runner, step)
    if getattr(original_shrink, "_shmref_wrapped", False):
        return
    original_call: Callable[[Any, Any], None] = runner.test_function
    original_generate: Callable[[Any], None] = runner.generate_new_examples
    to_bytes, from_bytes = codec

    def shrink_within_budget(self: Any) -> None:
        budget = _active
        if budget is None or Phase.shrink not in self.settings.phases:
            return original_shrink(self)  # (which then does nothing: no shrink phase)
        if self.interesting_examples and (budget.save_to is not None or budget.examples == 0):
            if budget.save_to is not None:  # the first pass: saved for the second, not shrunk
                _save(budget.save_to, budget.test, self.interesting_examples.values(), to_bytes)
            budget._stopped()
            return None
        setattr(self, _SHRINKING, 0)
        try:
            return original_shrink(self)
        finally:
            delattr(self, _SHRINKING)

    def counted_call(self: Any, data: Any) -> None:
        tried = getattr(self, _SHRINKING, None)
        budget = _active
        if tried is not None and budget is not None and budget.examples is not None:
            if tried >= budget.examples:
                budget._stopped()
                self.exit_with(max_shrinks)  # raises: the run ends with what it has
            setattr(self, _SHRINKING, tried + 1)
        return original_call(self, data)

    def generate_or_replay(self: Any) -> None:
        budget = _active
        if budget is None or budget.replay_from is None:
            return original_generate(self)
        for choices in _load(budget.replay_from, budget.test, from_bytes):
            self.cached_test_function(choices)
            if self.interesting_examples:
                return None  # shrunk next; if none fails again, the test passes here
        return None

    shrink_within_budget._shmref_wrapped = True  # type: ignore[attr-defined]
    setattr(runner, step, shrink_within_budget)
    runner.test_function = counted_call  # type: ignore[method-assign]
    runner.generate_new_examples = generate_or_replay  # type: ignore[method-assign]


def _choice_codec() -> tuple[Callable[..., bytes], Callable[[bytes], Any]] | None:
    """Hypothesis's own encoding of an example's choices (6.12x and later)."""
    try:
        from hypothesis.database import choices_from_bytes, choices_to_bytes
    except ImportError:
        return None
    return choices_to_bytes, choices_from_bytes


def _save(folder: Path, test: str, examples: Any, to_bytes: Callable[..., bytes]) -> None:
    """The failing examples of `test`, smallest first, for the second pass."""
    encoded = sorted((to_bytes(example.choices) for example in examples), key=len)
    if not encoded:
        return
    folder.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"test": test, "examples": [e.hex() for e in encoded]})
    path = example_file(folder, test)
    path.with_suffix(".tmp").write_text(body)
    path.with_suffix(".tmp").replace(path)  # whole or absent, whatever kills the process


def _load(folder: Path, test: str, from_bytes: Callable[[bytes], Any]) -> Sequence[Any]:
    """The saved examples of `test` (none if there are none or they no longer decode)."""
    try:
        saved = json.loads(example_file(folder, test).read_text())
    except (OSError, ValueError):
        return []
    decoded = (from_bytes(bytes.fromhex(text)) for text in saved.get("examples", []))
    return [choices for choices in decoded if choices is not None]
