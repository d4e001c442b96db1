"""A TLC counterexample in the trace format: each state's `last_action` is a
step (DESIGN.md), each state's ring the spec's; the last step (or the step a
lasso returns to) is marked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shmref import tlc
from shmref.render.traceformat import Chunk, Ring, Step, Trace, actor_of, show, spec_ring, step_args


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


def from_hotkey(
    trace: tlc.Trace, constants: Mapping[str, Any], *, title: str, case: str = "", verdict: str = ""
) -> Trace:
    """spec/HotKey.tla's abstract counterexample (a FIFO of at most CAP chunks
    of one size, each with its pending deliveries per reader) as steps: the
    reader of a read and the chunk handed out again are read off the change
    between two states; a chunk's id is the number of its put."""
    readers = sorted(str(r) for r in constants.get("Readers", ()))
    cap = int(constants.get("CAP", 0))
    out = Trace(
        "hazard",
        title,
        case=case,
        verdict=verdict,
        constants={"N": cap, "R": len(readers), "CAP": cap},
        readers=readers,
        ring_label="spec",
    )
    ids: list[int] = []
    puts = 0
    before: tuple[Any, ...] = ()
    for state in trace.states[1:]:
        ring = tuple(state.vars.get("ring", ()))
        last = str(state.vars.get("last", "?"))
        action: dict[str, Any] = {"name": "put"}
        outcome, result = "ok", ""
        if last in ("put_ok", "put_failed"):
            dropped = len(before) - (len(ring) - (last == "put_ok"))
            ids = ids[dropped:]
            if last == "put_ok":
                ids.append(puts)
                result = f"id {puts}"
                puts += 1
            else:
                outcome = "MemoryError"
            action["key"] = f"k{puts}"
        elif last == "get_cached":
            grown = [i for i, c in enumerate(ring) if i < len(before) and c != before[i]]
            action = {"name": "get_cached", "key": f"id {ids[grown[0]]}" if grown else "?"}
        elif last == "read":
            action = {"name": "get_end", "reader": "?"}
            for i, chunk in enumerate(ring):
                for r in readers:
                    if i < len(before) and chunk["pend"][r] < before[i]["pend"][r]:
                        action = {"name": "get_end", "reader": r, "handle": ("", i, ids[i])}
        out.steps.append(
            Step(
                state.index,
                actor_of(action, readers),
                str(action["name"]),
                {k: v for k, v in action.items() if k in ("key",)},
                outcome,
                result,
                ring=_hotkey_ring(ring, ids),
            )
        )
        before = ring
    out.lasso = trace.back_to
    if out.steps:
        out.steps[-1].diverged = True
        out.steps[-1].note = verdict + (
            f" (the behaviour loops back to step {trace.back_to} for ever)"
            if trace.back_to is not None
            else ""
        )
    return out


def _hotkey_ring(ring: tuple[Any, ...], ids: list[int]) -> Ring:
    chunks = []
    for i, chunk in enumerate(ring):
        pending = sum(int(v) for v in chunk["pend"].values())
        state = "live" if pending else "reclaimable"
        chunks.append(Chunk(i, 1, ids[i] if i < len(ids) else None, "", state, None, None))
    return Ring(0, len(ring), tuple(chunks))
