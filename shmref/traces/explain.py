"""Why a recorded step matched no step of the spec: TLC asked which results
the spec allows for the same call after the matched prefix, and the nearest
compared field by field."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shmref import tlc
from shmref.core import vocabulary
from shmref.traces.recording import Recording
from shmref.traces.tlamodule import run_log

ABSENT = "(absent)"


def call_fields(name: str) -> tuple[str, ...]:
    """The fields of a recorded call that are its arguments (shmref.core.vocabulary:
    a get_begin's handle is an argument, every other handle a result)."""
    return ("name", *vocabulary.action(name).arguments)


def call_of(entry: dict[str, Any]) -> dict[str, Any]:
    """The call an entry records, without its results."""
    return {f: entry[f] for f in call_fields(entry["name"]) if f in entry}


def _function(value: Any) -> dict[Any, Any]:
    """A TLA+ function as TLC printed it (<<>> when empty, a sequence on 1..n)."""
    if isinstance(value, Mapping):
        return {k: tuple(v) if isinstance(v, tuple) else v for k, v in value.items()}
    return {i + 1: v for i, v in enumerate(value)}


def spec_observation(state: Mapping[str, Any], n: int) -> dict[str, Any]:
    """TraceShmObjectStorage's ObsNow of a TLC state, in Python."""
    metadata, count = _function(state["metadata"]), _function(state["count"])
    return {
        "data_buffer_start": state["data_buffer_start"],
        "data_buffer_end": state["data_buffer_end"],
        "monotonic_id_start": state["monotonic_id_start"],
        "monotonic_id_end": state["monotonic_id_end"],
        "metadata": metadata,
        "key_index": _function(state["key_index"]),
        "writer_flag": _function(state["writer_flag"]),
        "touched": frozenset(state["touched"]),
        "counts": {i: count[a % n] for i, a in metadata.items()},
    }


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return frozenset(value)
    return value


def _spec_results(trace: tlc.Trace, call: dict[str, Any]) -> dict[str, Any]:
    """The results the spec gave the probed call, in the recording's form."""
    last, before = trace.states[-1].vars, trace.states[-2].vars
    if {k: v for k, v in last.items() if k != "i"} == {k: v for k, v in before.items() if k != "i"}:
        # a no-op: the spec leaves the call out (TraceShmObjectStorage's NoOp)
        results: dict[str, Any] = {"outcome": "KeyError" if call["name"] == "get_cached" else "ok"}
        if call["name"] == "free_unused":
            results["freed"] = ()
        return results
    action = dict(last["last_action"])
    results = {k: v for k, v in action.items() if k not in call}
    if "value" in results:
        cells = results.pop("value")
        if action["outcome"] == "ok":
            owners = set(cells)
            results["value"] = next(iter(owners)) if len(owners) == 1 else "<foreign>"
    return results


def _differences(entry: dict[str, Any], results: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    diffs = []
    arguments = call_fields(entry["name"])
    for f in sorted(set(entry) | set(results)):
        if f in arguments:
            continue
        if f == "freed" and f not in entry:  # optional in recordings
            continue
        mine, theirs = entry.get(f, ABSENT), results.get(f, ABSENT)
        if isinstance(mine, list):
            mine = tuple(mine)
        if mine != theirs:
            diffs.append((f"last_action.{f}", mine, theirs))
    return diffs


def _show(value: Any) -> str:
    if value == ABSENT:
        return ABSENT
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_show(k)}: {_show(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, frozenset):
        return "{" + ", ".join(_show(v) for v in sorted(value)) + "}"
    return json.dumps(value)


def explain_step(
    recording: Recording,
    index: int,
    switches: dict[str, Any],
    timeout: float = 300,
    folder: Path | None = None,
) -> str:
    """Why log entry `index` (0-based) matches no spec step: ask TLC which
    results the spec allows for the same call after the matched prefix,
    and name the `last_action` fields and observed variables that differ,
    with both values."""
    entry = recording.log[index]
    call = call_of(entry)
    step = f"step {index + 1} ({describe_call(call)})"
    seen = recording.observed[: index + 1] if recording.observed is not None else None
    probe = Recording(recording.constants, [*recording.log[:index], call], seen)
    run = run_log(probe, switches, folder, timeout, ("-continue",))
    traces = [t for t in tlc.parse_traces(run.messages) if len(t.states) >= 2]
    if not traces:
        return (
            f"{step}: the spec cannot take this call at all after step {index}: "
            f"no spec step performs {describe_call(call)} there "
            f"(e.g. a reader with no read open, or an unknown handle)"
        )
    shown = recording.observed[index + 1] if recording.observed is not None else {}
    options: list[tuple[dict[str, Any], list[tuple[str, Any, Any]]]] = []
    for trace in traces:
        results = _spec_results(trace, call)
        diffs = _differences(entry, results)
        state = spec_observation(trace.states[-1].vars, recording.constants["N"])
        diffs += [
            (name, _plain(value), state[name])
            for name, value in sorted(shown.items())
            if _plain(value) != state[name]
        ]
        if (results, diffs) not in options:
            options.append((results, diffs))
    options.sort(key=lambda o: len(o[1]))
    best = options[0][1]
    if not best:
        return f"{step}: the spec allows exactly the recorded results {options[0][0]}"
    parts = [f"{name}: recording {_show(a)}, spec {_show(b)}" for name, a, b in best]
    text = f"{step}: no spec step could match " + "; ".join(parts)
    if len(options) > 1:
        text += f" (nearest of the {len(options)} steps the spec allows here)"
    return text


def describe_call(call: dict[str, Any]) -> str:
    args = ", ".join(f"{k}={json.dumps(v)}" for k, v in call.items() if k != "name")
    return f"{call['name']}({args})"
