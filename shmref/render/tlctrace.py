"""A TLC counterexample in the trace format: each state's `last_action` is a
step (DESIGN.md), each state's ring the spec's; the last step (or the step a
lasso returns to) is marked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shmref import tlc
from shmref.render.model import Step, Trace, actor_of, show, spec_ring, step_args


def spec_result(action: Mapping[str, Any]) -> str:
    """What the spec's step returned, shortly: a handle placed, a value read, ids freed."""
    name = action.get("name")
    if name in ("put", "get_cached") and action.get("handle"):
        return show(action["handle"])
    if name == "get_end" and "value" in action:
        owners = sorted({str(v) for v in action["value"]})
        return "value " + ("/".join(owners) if owners else "none")
    if action.get("freed"):
        return "freed " + show(tuple(action["freed"]))
    return ""


def from_tlc(
    trace: tlc.Trace,
    constants: Mapping[str, Any],
    *,
    title: str,
    case: str = "",
    verdict: str = "",
    source: str = "hazard",
) -> Trace:
    """The counterexample with the spec's ring at every step (`ring_label`
    "spec"): what TLC found, before any implementation ran it."""
    readers = sorted(str(r) for r in constants.get("Readers", ()))
    n = int(constants.get("N", 0))
    shown = {k: int(v) for k, v in constants.items() if isinstance(v, int) and k != "Readers"}
    shown["R"] = len(readers)
    out = Trace(
        source,
        title,
        case=case,
        verdict=verdict,
        constants=shown,
        readers=readers,
        ring_label="spec",
    )
    for state in trace.states[1:]:
        action = state.vars.get("last_action", {"name": state.action or "?"})
        out.steps.append(
            Step(
                state.index,
                actor_of(action, readers),
                str(action.get("name")),
                step_args(action, readers),
                str(action.get("outcome", "ok")),
                spec_result(action),
                ring=spec_ring(state.vars, n, len(readers)),
            )
        )
    if trace.back_to is not None:
        out.lasso = trace.back_to
    if out.steps:
        last = out.steps[-1]
        last.diverged = True
        last.note = verdict or "the property is violated in this state"
        if trace.back_to is not None:
            last.note += f" (the behaviour loops back to step {trace.back_to} for ever)"
    return out
