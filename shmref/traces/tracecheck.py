"""Trace validation (implementation -> spec): check with TLC that a
recording is a behaviour of spec/ShmObjectStorage.tla, and say why not.

`validate_recording` writes the log (and, if recorded, the observed states)
as a TLA+ module extending spec/TraceShmObjectStorage.tla and runs TLC on
it: the log is accepted iff some behaviour of the spec takes the logged
actions, with the logged arguments, ends every step with the logged
outcome and shows the observed variables. A rejection is explained: a
second TLC run replays the matched prefix, then the failing call with its
results left open, which yields every result the spec allows there; the
nearest is compared field by field (the step, the field or variable, and
the values on both sides).

A recording is plain JSON, in ITF (`Recording.save_itf`, docs/itf.md) or the
older `{"constants", "log"}` form (`Recording.save`); `Recording.load` reads
both, so an implementation in another language can write one and have it
checked: `python -m shmref itf validate FILE`.

One idea, judging a recording by the spec, apart from making one
(shmref.traces.recording): the TLA+ module the log becomes, TLC's verdict on
it and the diagnosis of a rejected step are one conversation with TLC, all
in the spec's terms (its module, its switches, its `last_action`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shmref import tlc
from shmref.core import vocabulary
from shmref.core.paths import SPEC_DIR
from shmref.traces.itf_schema import ItfError
from shmref.traces.recording import Recording

# -- the log as a TLA+ module, and TLC run on it --------------------------------------

TRACE_SPEC = "TraceShmObjectStorage"

# the modules TraceShmObjectStorage.tla EXTENDS / INSTANCEs, directly or not
SPEC_FILES = (
    "RingBuffer.tla",
    "StorageState.tla",
    "StorageSignatures.tla",
    "StorageAlloc.tla",
    "StorageWriter.tla",
    "StorageClear.tla",
    "StorageReader.tla",
    "StorageProperties.tla",
    "ShmObjectStorage.tla",
    "AbstractCache.tla",
    f"{TRACE_SPEC}.tla",
)

TLC_INT_MAX = 2**31 - 1

# Switches of the spec the log is checked against (see ShmObjectStorage.tla).
# Permissive where that adds no branching (clear at any time, failing
# copies). A1 = TRUE: a reader that reads a delivery twice is outside the
# protocol (and would double the search at every read). A3 = TRUE: ids must
# not wrap onto an outstanding handle (random_workload keeps to it), because
# there the spec's F2 re-check (id only) is weaker than refimpl's (id and
# size), see tests/traces/test_trace_validation.py.
DEFAULT_SWITCHES: dict[str, Any] = {
    "CLEAR_WHEN": "any",
    "A1": True,
    "A3": True,
    "LOSSY": False,
    "COPY_FAIL": True,
    "FIXED": True,
}


def tla_value(value: Any) -> str:
    """A Python value as a TLA+ expression (tuples/lists are sequences)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        if abs(value) > TLC_INT_MAX:
            raise ItfError(f"{value} does not fit TLC's 32-bit integers")
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # TLA+ strings escape like JSON's for what we write
    if isinstance(value, (tuple, list)):
        return "<<" + ", ".join(tla_value(v) for v in value) + ">>"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(tla_value(v) for v in value)) + "}"
    if isinstance(value, dict):
        return "[" + ", ".join(f"{k} |-> {tla_value(v)}" for k, v in value.items()) + "]"
    raise TypeError(f"no TLA+ form for {value!r}")


def tla_function(mapping: Mapping[Any, Any]) -> str:
    """A dict as the graph of a TLA+ function, {<<k, v>>, ...}: a literal
    TLC reads once (with :> and @@ it re-evaluates the log at every step)."""
    return tla_value({(k, v) for k, v in mapping.items()})


def tla_observation(observed: Mapping[str, Any]) -> str:
    """One observed state as a record of TraceShmObjectStorage's ObsNow."""
    fields = [
        f"{name} |-> {tla_function(v) if isinstance(v, Mapping) else tla_value(v)}"
        for name, v in sorted(observed.items())
    ]
    return "[" + ", ".join(fields) + "]"


def _entry(j: int, entry: Mapping[str, Any]) -> str:
    """Log entry j as TLA+, or an error naming its field."""
    for name, value in entry.items():
        try:
            tla_value(value)
        except (ItfError, TypeError) as exc:
            raise ItfError(f"state {j}, last_action.{name}: {exc}") from None
    return tla_value(entry)


def tla_module(recording: Recording, name: str, switches: dict[str, Any]) -> tuple[str, str]:
    """The generated module (log and constants) and its cfg."""
    c = recording.constants
    if c["R"] < 1:
        raise ItfError("the spec needs at least one reader (R >= 1)")
    if c["ID_MAX"] > TLC_INT_MAX:
        raise ItfError(f"ID_MAX {c['ID_MAX']} does not fit TLC; record with a smaller id_max")
    log = recording.log
    keys = {e["key"] for e in log if "key" in e}
    keys |= {e["handle"][0] for e in log if e.get("handle")}
    keys |= {e["value"] for e in log if "value" in e and e["value"] != "<foreign>"}
    sizes = {e["size"] for e in log if "size" in e} | {1}
    forged = {tuple(e["handle"]) for e in log if e["name"] == "get_begin"}
    issues = sum(1 for e in log if vocabulary.action(e["name"]).places)  # put, get_cached
    entries = "".join(f"\n    [] j = {j} -> {_entry(j, e)}" for j, e in enumerate(log, start=1))
    cases = "".join(
        f"\n    [] j = {j} -> {tla_observation(o)}"
        for j, o in enumerate((recording.observed or [])[1:], start=1)
    )
    observed = f"CASE j = 0 -> EmptyFn{cases}\n    [] OTHER -> EmptyFn"
    module = "\n".join(
        [
            f"---- MODULE {name} ----",
            f"\\* GENERATED by shmref.traces.tracecheck: {len(log)} log entries. Do not edit.",
            f"EXTENDS {TRACE_SPEC}",
            f"TraceKeys == {tla_value(keys or {'a'})}",
            f"TraceSizes == {tla_value(sizes)}",
            f"TraceReaders == {tla_value(set(range(c['R'])))}",
            f"TraceForged == {tla_value(forged)}",
            f'TraceLogValue(j) ==\n    CASE j = 0 -> [name |-> "none"]{entries}'
            '\n    [] OTHER -> [name |-> "none"]',
            f"TraceObsValue(j) ==\n    {observed}",
            "====",
            "",
        ]
    )
    cfg_lines = [
        "CONSTANTS",
        f"    N = {c['N']}",
        f"    ID_MAX = {c['ID_MAX']}",
        f"    MAX_OBJ = {c['MAX_OBJ']}",
        "    Keys <- TraceKeys",
        "    Sizes <- TraceSizes",
        "    Readers <- TraceReaders",
        "    Forged <- TraceForged",
        f"    MaxIssues = {issues + 1}",
        f"    TraceLen = {len(log)}",
        "    TraceLog <- TraceLogValue",
        "    TraceObs <- TraceObsValue",
    ]
    cfg_lines += [f"    {k} = {tla_value(v)}" for k, v in switches.items()]
    cfg_lines += ["INIT TraceInit", "NEXT TraceNext", "INVARIANT TraceIncomplete", ""]
    return module, "\n".join(cfg_lines)


def run_log(
    recording: Recording,
    switches: dict[str, Any],
    folder: Path | None,
    timeout: float,
    extra_args: tuple[str, ...] = (),
) -> tlc.TlcRun:
    """TLC on TraceShmObjectStorage with this log, in `folder` (kept) or a
    temporary folder (removed)."""
    keep = folder is not None
    where = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix="shmref-trace-"))
    where.mkdir(parents=True, exist_ok=True)
    try:
        for name in SPEC_FILES:
            shutil.copyfile(SPEC_DIR / name, where / name)
        module, cfg = tla_module(recording, "TraceRun", switches)
        (where / "TraceRun.tla").write_text(module)
        (where / "TraceRun.cfg").write_text(cfg)
        return tlc.run_tlc(
            where / "TraceRun.tla",
            where / "TraceRun.cfg",
            workers=1,
            short=True,
            extra_args=("-deadlock", *extra_args),
            timeout=timeout,
            log_path=where / "tlc.out" if keep else None,
        )
    finally:
        if not keep:
            shutil.rmtree(where, ignore_errors=True)


# -- TLC's verdict -----------------------------------------------------------------


@dataclass
class Validation:
    """The verdict of TLC on one recording."""

    accepted: bool
    matched: int  # entries matched by the longest behaviour found
    total: int
    switches: dict[str, Any]
    first_unmatched: dict[str, Any] | None
    run: tlc.TlcRun
    directory: Path | None
    diagnosis: str | None = None  # rejected: which field no spec step could match

    def explain(self) -> str:
        if self.accepted:
            return (
                f"accepted: all {self.total} log entries are a behaviour of "
                f"ShmObjectStorage ({_switch_text(self.switches)})"
            )
        text = (
            f"REJECTED: entries 1..{self.matched} of {self.total} match a behaviour of "
            f"ShmObjectStorage ({_switch_text(self.switches)}), entry {self.matched + 1} "
            f"matches no enabled action: {self.first_unmatched}"
        )
        return text + (f"\n{self.diagnosis}" if self.diagnosis else "")


def _switch_text(switches: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in switches.items())


def validate_recording(
    recording: Recording,
    *,
    switches: dict[str, Any] | None = None,
    out_dir: Path | None = None,
    timeout: float = 300,
    diagnose: bool = True,
) -> Validation:
    """Run TLC on TraceShmObjectStorage with this log. `out_dir` keeps the
    generated module, cfg and TLC output (default: a temporary folder).
    A rejection is diagnosed (one more TLC run) unless `diagnose` is False."""
    chosen = {**DEFAULT_SWITCHES, **(switches or {})}
    run = run_log(recording, chosen, out_dir, timeout)
    folder = Path(out_dir) if out_dir is not None else None
    total = len(recording.log)
    if run.outcome == "invariant" and run.violated == "TraceIncomplete":
        return Validation(True, total, total, chosen, None, run, folder)
    if run.outcome == "ok" and run.depth is not None:
        matched = max(run.depth - 1, 0)
        entry = recording.log[matched] if matched < total else None
        text = None
        if diagnose and entry is not None:
            text = explain_step(
                recording, matched, chosen, timeout, folder / "diagnosis" if folder else None
            )
        return Validation(False, matched, total, chosen, entry, run, folder, text)
    raise tlc.TlcError(f"trace validation: unexpected TLC result: {run.summary()}")


def validate_either(
    recording: Recording, *, out_dir: Path | None = None, timeout: float = 300
) -> Validation:
    """Accepted by the spec of refimpl's protocol (FIXED) or by the seed's;
    a rejection is diagnosed against the one that matched more steps."""
    folder = Path(out_dir) if out_dir is not None else None
    tries = []
    for fixed in (True, False):
        result = validate_recording(
            recording,
            switches={"FIXED": fixed},
            timeout=timeout,
            out_dir=folder / f"fixed-{fixed}" if folder else None,
            diagnose=False,
        )
        if result.accepted:
            return result
        tries.append(result)
    best = max(tries, key=lambda r: r.matched)
    if best.first_unmatched is not None:
        best.diagnosis = explain_step(
            recording,
            best.matched,
            best.switches,
            timeout,
            best.directory / "diagnosis" if best.directory else None,
        )
    return best


# -- why a step matched nothing ------------------------------------------------------

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
