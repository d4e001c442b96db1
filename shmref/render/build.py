"""Building a trace step by step from a source that drives a store: each step
as the vocabulary names it, the store's ring from what it showed (or from
the steps alone), the spec's ring where a spec state is at hand."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shmref.core import vocabulary
from shmref.render.traceformat import (
    RingTracker,
    Step,
    Trace,
    actor_of,
    show,
    spec_ring,
    step_args,
)


def result_text(name: str, outcome: str, result: Any, key: str = "") -> str:
    """A step's result, shortly: the handle a placing step returned, the key
    whose value a read returned, the ids a free returned."""
    if outcome != "ok" or result is None:
        return ""
    try:
        places = vocabulary.action(name).places
    except vocabulary.UnknownAction:
        places = False
    if places and isinstance(result, (tuple, list)) and len(result) == 2:
        return show((key, *result)) if key else show(tuple(result))
    if name in ("get_end", "writer_get"):
        return f"value {result}"
    if name in ("free_unused", "free_buf") and isinstance(result, (list, tuple)) and result:
        return "freed " + show(tuple(result))
    return ""


class Builder:
    """Collects the steps of one trace of a store with `readers` readers on a
    ring of `constants["N"]` units."""

    def __init__(
        self,
        source: str,
        title: str,
        constants: Mapping[str, Any],
        readers: Sequence[str],
        case: str = "",
    ) -> None:
        kept = {k: v for k, v in constants.items() if isinstance(v, int)}
        kept["R"] = len(readers)
        self.trace = Trace(source, title, case=case, constants=kept, readers=list(readers))
        self.tracker = RingTracker(int(kept.get("N", 0)), len(readers))

    def add(
        self,
        index: int,
        action: Mapping[str, Any],
        outcome: str,
        result: Any = None,
        observed: Mapping[str, Any] | None = None,
        *,
        expected: str | None = None,
        note: str = "",
        diverged: bool = False,
        spec_state: Mapping[str, Any] | None = None,
    ) -> Step:
        name = str(action.get("name"))
        readers = self.trace.readers
        self.tracker.follow(action, outcome, result)
        step = Step(
            index,
            actor_of(action, readers),
            name,
            step_args(action, readers),
            outcome,
            result_text(name, outcome, result, str(action.get("key", ""))),
            expected,
            note,
            diverged,
            self.tracker.ring(observed),
            spec_ring(spec_state, self.tracker.n, len(readers)) if spec_state else None,
        )
        self.trace.steps.append(step)
        return step

    def mark(self, note: str, position: int = -1) -> Trace:
        """Mark the step at `position` (default: the last) as where it went wrong."""
        if self.trace.steps:
            step = self.trace.steps[position]
            step.diverged = True
            step.note = step.note or note
        self.trace.verdict = self.trace.verdict or note
        return self.trace
