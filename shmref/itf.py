"""TLC traces and recordings in the Informal Trace Format (ITF), the JSON
trace format of the TLA+ tool ecosystem (Apalache ADR-015, Quint).

Why: an implementation in C or Rust has no Python bindings to the replayer
or the recorder; with ITF it reads our traces and writes its recordings as
plain JSON. The schema (which variables, their types, the `last_action`
record) is docs/itf.md; this module is its executable form: every value is
encoded and decoded by its declared type, so TLC's ambiguities (the empty
function prints as `<<>>`, a function on 1..n as a sequence) never reach
the file, and bad input gets one message naming the state and the field.

    python -m shmref.itf export MCDoubleRead --out build/itf/doubleread.itf.json
    python -m shmref.itf export MCStorage --simulate 5 --depth 30 --out build/itf/sim
    python -m shmref.itf check FILE          # schema check, exit 2 on bad input
    python -m shmref.itf replay FILE --impl refimpl   # an ITF trace on a module
    python -m shmref.itf validate FILE       # a recording, by TLC (exit 0/1/2)

(itf-py on PyPI is not used here: it decodes records to namedtuples, always
writes integers as #bigint and does not validate, so a malformed file ends
in a KeyError, and types are what we need. tests/test_itf.py uses it to
check that our files read and write the same with the ecosystem's reader.)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shmref import tlc
from shmref.itf_schema import (
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
    source: str = "shmref.recorder",
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


def export_model(
    model: str,
    out: Path,
    simulate: tuple[int, int, int] | None = None,
    spec_dir: Path | None = None,
) -> list[Path]:
    """Run TLC on spec/MODEL and write its counterexample, or `simulate`'s
    traces (num, depth, seed), as ITF files; returns the files written."""
    from shmref.manifest import ManifestError, model_files
    from shmref.paths import SPEC_DIR
    from shmref.replay import read_constants

    folder = spec_dir or SPEC_DIR
    try:  # the manifest names the model's module (shared by several models)
        tla, cfg = model_files(model, folder)
    except ManifestError as exc:
        raise ItfError(f"no model {model}: {exc}") from None
    if not tla.is_file() or not cfg.is_file():
        raise ItfError(f"no model {model}: {tla.name}/{cfg.name} not in {folder}")
    constants = read_constants(cfg)
    if simulate is not None:
        with tempfile.TemporaryDirectory(prefix="shmref-itf-") as tmp:
            run = tlc.run_tlc(
                tla, cfg, workers=1, simulate=simulate, simulate_dir=Path(tmp) / "traces"
            )
            if run.outcome not in ("ok", "invariant"):
                raise tlc.TlcError(f"simulating {model}: {run.summary()}")
            traces = tlc.read_simulation_traces(Path(tmp) / "traces")
        written = []
        for k, trace in enumerate(traces):
            path = Path(out) / f"{model}-{k:03d}.itf.json"
            write_json(trace_to_itf(trace, constants, f"{model}.tla simulation #{k}"), path)
            written.append(path)
        return written
    run = tlc.run_tlc(tla, cfg, workers=1)
    if run.trace is None:
        raise ItfError(
            f"{model}: TLC found no counterexample ({run.summary()}); "
            f"export simulation traces with --simulate NUM"
        )
    what = f"{model}.tla counterexample: {run.outcome} {run.violated or ''}".rstrip()
    write_json(trace_to_itf(run.trace, constants, what), Path(out))
    return [Path(out)]


def replay_file(path: Path, impl: Any, name: str | None = None) -> Any:
    """Replay an ITF trace on a Python implementation with shmref.replay
    (the constants come from the file, written as a model cfg)."""
    from shmref.recorder import tla_value
    from shmref.replay import Replayer

    trace, constants = read_trace(path)
    with tempfile.TemporaryDirectory(prefix="shmref-itf-") as tmp:
        cfg = Path(tmp) / "constants.cfg"
        cfg.write_text("".join(f"{k} = {tla_value(v)}\n" for k, v in constants.items()))
        replayer = Replayer(impl, cfg)
    return replayer.replay(trace, name or str(path))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shmref.itf",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    export = sub.add_parser("export", help="TLC counterexample or simulation traces -> ITF")
    export.add_argument("model", help="a model of spec/, e.g. MCDoubleRead or MCStorage")
    export.add_argument(
        "--out", type=Path, required=True, help="the file (counterexample) or folder (--simulate)"
    )
    export.add_argument("--simulate", type=int, metavar="NUM", help="NUM simulation traces")
    export.add_argument("--depth", type=int, default=40)
    export.add_argument("--seed", type=int, default=20261202)
    check = sub.add_parser("check", help="schema-check an ITF trace or recording")
    check.add_argument("file", type=Path)
    replay = sub.add_parser("replay", help="replay an ITF trace on a Python implementation")
    replay.add_argument("file", type=Path)
    replay.add_argument("--impl", default="refimpl", help="module name, or 'seed'")
    validate = sub.add_parser("validate", help="trace-validate an ITF recording with TLC")
    validate.add_argument("file", type=Path)
    validate.add_argument("--out", type=Path, help="keep the generated module and TLC's output")
    validate.add_argument(
        "--spec",
        choices=("either", "fixed", "seed"),
        default="either",
        help="the protocol of refimpl (FIXED), of the seed, or either",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "export":
            sim = (args.simulate, args.depth, args.seed) if args.simulate else None
            for path in export_model(args.model, args.out, sim):
                print(path)
            return 0
        if args.command == "check":
            doc = load_json(args.file)
            kind = doc.get("#meta", {}).get("kind") if isinstance(doc, dict) else None
            if kind == "recording":
                _constants, log, _observed = recording_from_itf(doc)
                print(f"{args.file}: a valid recording of {len(log)} calls")
            else:
                trace, _constants = trace_from_itf(doc)
                print(f"{args.file}: a valid trace of {len(trace.states)} states")
            return 0
        if args.command == "replay":
            from shmref.impl import load_impl

            try:
                module = load_impl(args.impl)
            except ImportError as exc:
                raise ItfError(f"--impl {args.impl}: cannot import: {exc}") from None
            report = replay_file(args.file, module)
            print(report.table())
            return 0 if report.ok else 1
        from shmref.tracecheck import Recording, validate_either, validate_recording

        recording = Recording.load(args.file)
        if args.spec == "either":
            result = validate_either(recording, out_dir=args.out)
        else:
            result = validate_recording(
                recording, switches={"FIXED": args.spec == "fixed"}, out_dir=args.out
            )
        print(result.explain())
        return 0 if result.accepted else 1
    except ItfError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except tlc.TlcError as exc:
        print(f"TLC: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
