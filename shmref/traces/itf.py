"""TLC traces and recordings in the Informal Trace Format (ITF), the JSON
trace format of the TLA+ tool ecosystem (Apalache ADR-015, Quint).

Why: an implementation in C or Rust has no Python bindings to the replayer
or the recorder; with ITF it reads our traces and writes its recordings as
plain JSON. The schema (which variables, their types, the `last_action`
record) is docs/itf.md; this module is its executable form: every value is
encoded and decoded by its declared type, so TLC's ambiguities (the empty
function prints as `<<>>`, a function on 1..n as a sequence) never reach
the file, and bad input gets one message naming the state and the field.
The command line (`python -m shmref itf`) is shmref/traces/itf_cli.py.

(itf-py on PyPI is not used here: it decodes records to namedtuples, always
writes integers as #bigint and does not validate, so a malformed file ends
in a KeyError, and types are what we need. tests/traces/test_itf.py uses it to
check that our files read and write the same with the ecosystem's reader.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shmref import tlc
from shmref.traces.itf_schema import (
    INT,
    OBSERVABLE,
    RING_VARS,
    STORAGE_VARS,
    STR,
    Action,
    ItfError,
    Type,
    set_of,
)

__all__ = [
    "ItfError",
    "SCHEMA",
    "read_recording",
    "read_trace",
    "recording_to_itf",
    "trace_to_itf",
    "write_json",
]

SCHEMA = "shmref-itf/1"
TLC_INT_MAX = 2**31 - 1
ADR = "https://apalache-mc.org/docs/adr/015adr-trace.html"
RING_PARAMS: dict[str, Type] = {"N": INT, "ID_MAX": INT}
STORAGE_PARAMS: dict[str, Type] = {**RING_PARAMS, "MAX_OBJ": INT, "Readers": set_of(STR)}
RECORDING_PARAMS: dict[str, Type] = {"N": INT, "ID_MAX": INT, "MAX_OBJ": INT, "R": INT}
RECORDING_ACTION = Action(recording=True)


def _meta(kind: str, source: str, var_types: Mapping[str, Type], **extra: Any) -> dict[str, Any]:
    return {
        "format": "ITF",
        "format-description": ADR,
        "schema": SCHEMA,
        "kind": kind,
        "source": source,
        "varTypes": {n: t.text for n, t in var_types.items()},
        **extra,
    }


# -- traces (spec -> implementation) ------------------------------------------------


def trace_vars(trace: tlc.Trace) -> dict[str, Type]:
    """The schema of a trace: the storage's variables if it has them."""
    names = set(trace.states[0].vars) if trace.states else set()
    schema = STORAGE_VARS if "key_index" in names else RING_VARS
    missing = sorted(set(schema) - names)
    if missing:
        raise ItfError(f"state 0: the trace lacks variable(s) {', '.join(missing)}")
    return schema


def trace_to_itf(trace: tlc.Trace, constants: Mapping[str, Any], source: str) -> dict[str, Any]:
    """A parsed TLC trace and its model's constants as an ITF document."""
    schema = trace_vars(trace)
    params = STORAGE_PARAMS if schema is STORAGE_VARS else RING_PARAMS
    extra: dict[str, Any] = {}
    if trace.stuttering:
        extra["stuttering"] = True
    if trace.back_to_action:
        extra["loopAction"] = trace.back_to_action
    doc: dict[str, Any] = {
        "#meta": _meta("trace", source, schema, **extra),
        "params": list(params),
        "vars": list(schema),
        "states": [],
    }
    for k, state in enumerate(trace.states):
        meta: dict[str, Any] = {"index": k}
        if state.action is not None:
            meta["action"] = state.action
        out: dict[str, Any] = {"#meta": meta}
        if k == 0:
            for name, typ in params.items():
                if name not in constants:
                    raise ItfError(f"params: the model has no constant {name}")
                out[name] = typ.encode(constants[name], f"params: {name}")
        for name, typ in schema.items():
            out[name] = typ.encode(state.vars[name], f"state {k}, variable {name}")
        doc["states"].append(out)
    if trace.back_to is not None:
        doc["loop"] = trace.back_to - 1
    return doc


def _header(doc: Any, kind: str) -> tuple[list[Any], list[str], list[str]]:
    if not isinstance(doc, dict):
        raise ItfError(f"top level: expected a JSON object, got {_kind(doc)}")
    meta = doc.get("#meta", {})
    if not isinstance(meta, dict):
        raise ItfError("#meta: expected a JSON object")
    if meta.get("kind", kind) != kind:
        raise ItfError(f"#meta.kind: expected {kind!r}, got {meta.get('kind')!r}")
    for field_name, want in (("vars", list), ("states", list)):
        if not isinstance(doc.get(field_name), want):
            raise ItfError(f"{field_name}: expected a JSON array, got {_kind(doc.get(field_name))}")
    params = doc.get("params", [])
    if not isinstance(params, list) or not all(isinstance(p, str) for p in params):
        raise ItfError("params: expected an array of names")
    if not all(isinstance(v, str) for v in doc["vars"]):
        raise ItfError("vars: expected an array of names")
    if not doc["states"]:
        raise ItfError("states: a trace needs at least the initial state (index 0)")
    for k, state in enumerate(doc["states"]):
        if not isinstance(state, dict):
            raise ItfError(f"state {k}: expected a JSON object, got {_kind(state)}")
        index = (
            state.get("#meta", {}).get("index", k) if isinstance(state.get("#meta"), dict) else k
        )
        if index != k:
            raise ItfError(f"state {k}: #meta.index is {index!r}, expected {k}")
    return doc["states"], doc["vars"], params


def _check_names(k: int, state: dict[str, Any], expected: set[str]) -> None:
    present = set(state) - {"#meta"}
    if expected - present:
        raise ItfError(f"state {k}: missing variable {sorted(expected - present)[0]}")
    if present - expected:
        raise ItfError(
            f"state {k}: unknown variable {sorted(present - expected)[0]} "
            f"(the schema has {', '.join(sorted(expected))})"
        )


def trace_from_itf(doc: Any) -> tuple[tlc.Trace, dict[str, Any]]:
    """An ITF document as the Trace the replayer consumes, and the constants."""
    states, names, params = _header(doc, "trace")
    schema = STORAGE_VARS if "key_index" in names else RING_VARS
    param_types = STORAGE_PARAMS if schema is STORAGE_VARS else RING_PARAMS
    if set(names) != set(schema):
        extra, lack = set(names) - set(schema), set(schema) - set(names)
        what = (
            f"unknown variable {sorted(extra)[0]}"
            if extra
            else f"missing variable {sorted(lack)[0]}"
        )
        raise ItfError(f"vars: {what}")
    if set(params) != set(param_types):
        raise ItfError(f"params: expected {sorted(param_types)}, got {sorted(params)}")
    constants = {
        n: t.decode(states[0].get(n), f"state 0, param {n}") for n, t in param_types.items()
    }
    out: list[tlc.State] = []
    for k, state in enumerate(states):
        _check_names(k, state, set(schema) | (set(param_types) if k == 0 else set()))
        values = {n: t.decode(state[n], f"state {k}, variable {n}") for n, t in schema.items()}
        action = state.get("#meta", {}).get("action")
        out.append(tlc.State(k + 1, action if isinstance(action, str) else None, values))
    loop = doc.get("loop")
    if loop is not None and (not isinstance(loop, int) or not 0 <= loop < len(out)):
        raise ItfError(f"loop: expected a state index in 0..{len(out) - 1}, got {loop!r}")
    meta = doc.get("#meta", {})
    trace = tlc.Trace(
        out,
        back_to=None if loop is None else loop + 1,
        stuttering=bool(meta.get("stuttering", False)),
        back_to_action=meta.get("loopAction"),
    )
    return trace, constants


def read_trace(path: Path) -> tuple[tlc.Trace, dict[str, Any]]:
    return trace_from_itf(load_json(path))


# -- recordings (implementation -> spec) ---------------------------------------------


def recording_to_itf(
    constants: Mapping[str, int],
    log: Sequence[Mapping[str, Any]],
    observed: Sequence[Mapping[str, Any]] | None = None,
    source: str = "shmref.traces.recording",
) -> dict[str, Any]:
    """A recording (the constants and one `last_action` per call) as ITF:
    state 0 is `init`, state i is the i-th call; `observed` (optional, one
    per state, state 0 included) adds the implementation's state."""
    names = sorted(observed[0]) if observed else []
    if observed is not None and len(observed) != len(log) + 1:
        raise ItfError(
            f"observed: {len(observed)} states for {len(log)} calls "
            f"(expected one per call plus the initial state)"
        )
    unknown = sorted(set(names) - set(OBSERVABLE))
    if unknown:
        raise ItfError(
            f"observed: unknown variable {unknown[0]} (the schema has {', '.join(OBSERVABLE)})"
        )
    types: dict[str, Type] = {"last_action": RECORDING_ACTION, **{n: OBSERVABLE[n] for n in names}}
    states: list[dict[str, Any]] = []
    entries: list[Mapping[str, Any]] = [{"name": "init", "outcome": "ok"}, *log]
    for k, entry in enumerate(entries):
        state: dict[str, Any] = {"#meta": {"index": k}}
        if k == 0:
            for name, typ in RECORDING_PARAMS.items():
                state[name] = typ.encode(constants[name], f"params: {name}")
            state["last_action"] = dict(entry)
        else:
            state["last_action"] = RECORDING_ACTION.encode(entry, f"state {k}, last_action")
        for name in names:
            if observed is None or name not in observed[k]:
                raise ItfError(f"state {k}: missing variable {name}")
            state[name] = OBSERVABLE[name].encode(observed[k][name], f"state {k}, variable {name}")
        states.append(state)
    return {
        "#meta": _meta("recording", source, types),
        "params": list(RECORDING_PARAMS),
        "vars": ["last_action", *names],
        "states": states,
    }


def recording_from_itf(
    doc: Any,
) -> tuple[dict[str, int], list[dict[str, Any]], list[dict[str, Any]] | None]:
    """The constants, the log and the observed states (None if the file
    has none) of an ITF recording, schema-checked."""
    states, names, params = _header(doc, "recording")
    if not names or names[0] != "last_action" or len(set(names)) != len(names):
        raise ItfError(
            f'vars: a recording has "last_action" first, then observed variables; got {names}'
        )
    unknown = sorted(set(names[1:]) - set(OBSERVABLE))
    if unknown:
        raise ItfError(
            f"vars: unknown variable {unknown[0]} (a recording may observe {', '.join(OBSERVABLE)})"
        )
    if set(params) != set(RECORDING_PARAMS):
        raise ItfError(f"params: expected {sorted(RECORDING_PARAMS)}, got {sorted(params)}")
    constants = {
        n: t.decode(states[0].get(n), f"state 0, param {n}") for n, t in RECORDING_PARAMS.items()
    }
    for name in ("N", "ID_MAX", "MAX_OBJ", "R"):
        if not 1 <= constants[name] <= TLC_INT_MAX:
            raise ItfError(
                f"state 0, param {name}: must be in 1..{TLC_INT_MAX} (TLC's "
                f"integers), got {constants[name]}"
            )
    _check_names(0, states[0], {*names, *RECORDING_PARAMS})
    first = states[0]["last_action"]
    if first != {"name": "init", "outcome": "ok"}:
        raise ItfError(
            f"state 0, variable last_action: expected the init record "
            f'{{"name": "init", "outcome": "ok"}}, got {json.dumps(first)}'
        )
    log = []
    for k, state in enumerate(states[1:], start=1):
        _check_names(k, state, set(names))
        entry = dict(RECORDING_ACTION.decode(state["last_action"], f"state {k}, last_action"))
        if "reader" in entry and not 0 <= entry["reader"] < constants["R"]:
            raise ItfError(
                f"state {k}, last_action.reader: {entry['reader']} is not a reader "
                f"index in 0..{constants['R'] - 1}"
            )
        log.append(entry)
    observed = None
    if len(names) > 1:
        observed = [
            {n: OBSERVABLE[n].decode(state[n], f"state {k}, variable {n}") for n in names[1:]}
            for k, state in enumerate(states)
        ]
    return constants, log, observed


def read_recording(
    path: Path,
) -> tuple[dict[str, int], list[dict[str, Any]], list[dict[str, Any]] | None]:
    return recording_from_itf(load_json(path))


# -- files and CLI -----------------------------------------------------------------------


def _kind(value: Any) -> str:
    return {
        dict: "an object",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def load_json(path: Path) -> Any:
    """The JSON of a file, or an ItfError that says what is wrong where."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ItfError(f"{path}: cannot read: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ItfError(
            f"{path}: not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None


def write_json(doc: Mapping[str, Any], path: Path) -> None:
    """One state per line: diffable, and readable without a JSON viewer."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    head = {k: v for k, v in doc.items() if k != "states"}
    lines = [json.dumps(s, separators=(", ", ": ")) for s in doc["states"]]
    text = json.dumps(head, indent=1)[:-2] + ',\n "states": [\n  ' + ",\n  ".join(lines)
    path.write_text(text + "\n ]\n}\n", encoding="utf-8")
