"""Record what an implementation does, in spec vocabulary, and check with TLC
that the recording is a behaviour of spec/ShmObjectStorage.tla.

This is trace validation (implementation -> spec), the direction opposite to
replay (spec -> implementation): `Recorder` wraps a `Driver` and logs every
call with its arguments in units and the outcome the implementation showed,
exactly as the spec's `last_action` record names them (DESIGN.md).
`validate_recording` writes the log as a TLA+ module extending
spec/TraceShmObjectStorage.tla and runs TLC on it: the log is accepted iff
some behaviour of the spec takes the logged actions, with the logged
arguments, and ends every step with the logged outcome.

    rec = Recorder(Driver(impl, 8, n_readers=2, id_max=5, max_obj=3))
    random_workload(rec, steps=120, seed=1)
    result = validate_recording(rec.recording())
    assert result.accepted, result.explain()

A recording is plain JSON, in ITF (`Recording.save_itf`, docs/itf.md) or
the older `{"constants", "log"}` form (`Recording.save`); `Recording.load`
reads both, so an implementation in another language can write one and have
it checked: `python -m shmref.itf validate FILE`. A rejected recording is
explained: the step, the `last_action` field no spec step could match, and
the value on both sides (a second TLC run asks the spec which results it
allows for that call after the matched prefix).
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shmref import itf, tlc
from shmref.driver import MD_SIZE, UNIT, Driver, Outcome
from shmref.itf_schema import ItfError

REPO = Path(__file__).resolve().parents[1]
SPEC_DIR = REPO / "spec"
TRACE_SPEC = "TraceShmObjectStorage"
SPEC_FILES = ("RingBuffer.tla", "ShmObjectStorage.tla", f"{TRACE_SPEC}.tla")
TLC_INT_MAX = 2**31 - 1

# Switches of the spec the log is checked against (see ShmObjectStorage.tla).
# Permissive where that adds no branching (clear at any time, failing
# copies). A1 = TRUE: a reader that reads a delivery twice is outside the
# protocol (and would double the search at every read). A3 = TRUE: ids must
# not wrap onto an outstanding handle (random_workload keeps to it), because
# there the spec's F2 re-check (id only) is weaker than refimpl's (id and
# size), see tests/test_trace_validation.py.
DEFAULT_SWITCHES: dict[str, Any] = {
    "CLEAR_WHEN": "any",
    "A1": True,
    "A3": True,
    "LOSSY": False,
    "COPY_FAIL": True,
    "FIXED": True,
}


@dataclass
class Recording:
    """The constants of the run and its log (one dict per call)."""

    constants: dict[str, int]  # N, ID_MAX, MAX_OBJ, R
    log: list[dict[str, Any]] = field(default_factory=list)

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps({"constants": self.constants, "log": self.log},
                                         indent=1) + "\n")

    def to_itf(self) -> dict[str, Any]:
        return itf.recording_to_itf(self.constants, self.log)

    def save_itf(self, path: Path) -> None:
        itf.write_json(self.to_itf(), Path(path))

    @classmethod
    def load(cls, path: Path) -> Recording:
        """Either form; bad input raises ValueError (ItfError) naming the
        step and the field."""
        data = itf.load_json(path)
        try:
            if isinstance(data, dict) and "states" in data:
                constants, log = itf.recording_from_itf(data)
                return cls(constants, [dict(e) for e in log])
            return cls.from_plain(data)
        except ItfError as exc:
            raise ItfError(f"{path}: {exc}") from None

    @classmethod
    def from_plain(cls, data: Any) -> Recording:
        """The `{"constants": {...}, "log": [...]}` form, schema-checked by
        going through the ITF encoder (lists become tuples)."""
        if not isinstance(data, dict) or set(data) != {"constants", "log"}:
            raise ItfError('top level: expected {"constants": {...}, "log": [...]} or an ITF '
                           "recording (docs/itf.md)")
        constants, log = data["constants"], data["log"]
        if not isinstance(constants, dict) or not isinstance(log, list):
            raise ItfError("constants must be an object and log an array")
        entries = [{k: tuple(v) if isinstance(v, list) else v for k, v in e.items()}
                   if isinstance(e, dict) else e for e in log]
        for name in ("N", "ID_MAX", "MAX_OBJ", "R"):
            if name not in constants:
                raise ItfError(f"constants: missing {name}")
        # validates every entry and constant, with "state k" = log entry k (1-based)
        doc = json.loads(json.dumps(itf.recording_to_itf(constants, entries)))
        checked, checked_log = itf.recording_from_itf(doc)
        return cls(checked, [dict(e) for e in checked_log])


class Recorder:
    """A `Driver` whose every call is logged as the spec's `last_action`."""

    def __init__(self, driver: Driver) -> None:
        if driver.writer is None:
            raise ValueError("the recorder needs a storage driver (storage=True)")
        self.driver = driver
        self.log: list[dict[str, Any]] = []
        self.open: dict[int, tuple[Any, ...]] = {}  # reader -> handle of its read in flight

    def recording(self) -> Recording:
        writer = self.driver.writer
        if writer is None:
            raise ValueError("the recorder needs a storage driver (storage=True)")
        max_obj, rest = divmod(writer.max_object_size + MD_SIZE, UNIT)
        if rest:
            raise ValueError(f"max_object_size {writer.max_object_size} is not 16*k - 8")
        constants = {"N": self.driver.n_units, "ID_MAX": int(self.driver.ring.ID_MAX),
                     "MAX_OBJ": max_obj, "R": len(self.driver.readers)}
        return Recording(constants, [dict(e) for e in self.log])

    def _add(self, name: str, outcome: Outcome, **fields: Any) -> Outcome:
        self.log.append({"name": name, **fields, "outcome": outcome.status})
        return outcome

    def _handle(self, key: str, outcome: Outcome) -> tuple[Any, ...]:
        if outcome.status != "ok":
            return ()
        address, monotonic_id = outcome.result
        return (key, address, monotonic_id)

    # -- writer ------------------------------------------------------------------

    def put(self, key: str, size: int) -> Outcome:
        outcome = self.driver.put(key, size)
        return self._add("put", outcome, key=key, size=size, handle=self._handle(key, outcome))

    def get_cached(self, key: str) -> Outcome:
        outcome = self.driver.get_cached(key)
        return self._add("get_cached", outcome, key=key, handle=self._handle(key, outcome))

    def touch(self, key: str) -> Outcome:
        return self._add("touch", self.driver.touch(key), key=key)

    def release_touches(self) -> Outcome:
        return self._add("release_touches", self.driver.release_touches())

    def free_unused(self) -> Outcome:
        metadata = getattr(self.driver.ring, "metadata", None)
        before = list(metadata) if metadata is not None else None
        outcome = self.driver.free_unused()
        if before is None:  # an implementation without the ring's metadata
            return self._add("free_unused", outcome)
        after = set(self.driver.ring.metadata)
        freed = tuple(i for i in before if i not in after)
        return self._add("free_unused", outcome, freed=freed)

    def clear(self) -> Outcome:
        return self._add("clear", self.driver.clear())

    # -- readers -----------------------------------------------------------------

    def get_begin(self, reader: int, handle: tuple[Any, ...]) -> Outcome:
        handle = tuple(handle)
        outcome = self.driver.get_begin(reader, handle)
        if outcome.status == "ok":
            self.open[reader] = handle
        return self._add("get_begin", outcome, reader=reader, handle=handle)

    def get_copy(self, reader: int, fail: bool = False) -> Outcome:
        outcome = self.driver.get_copy(reader, fail=fail)
        if fail and outcome.status == "ok":
            # the injected failure is kept for get_end (refimpl) or raised
            # now (seed composition): in the spec it happens at get_copy
            outcome = Outcome("DeserializeError")
        return self._add("get_copy", outcome, reader=reader)

    def get_end(self, reader: int) -> Outcome:
        handle = self.open.pop(reader, ())
        outcome = self.driver.get_end(reader)
        fields: dict[str, Any] = {"reader": reader, "handle": handle}
        if outcome.status == "ok":
            fields["value"] = outcome.result
        return self._add("get_end", outcome, **fields)


def random_workload(rec: Recorder, steps: int, seed: int,
                    keys: tuple[str, ...] = ("a", "b", "c", "d", "e"),
                    copy_failures: bool = True, keep_a3: bool = True) -> None:
    """A seeded random run that keeps to A1 (each delivery is read at most
    once by each reader): puts (some too large), get_cached, touch,
    release_touches, free_unused, clear (even with reads in flight),
    three-step reads interleaved with the writer, and drains (every idle
    reader reads all its mail, so that the ring can empty)."""
    rng = random.Random(seed)
    driver = rec.driver
    writer = driver.writer
    if writer is None:
        raise ValueError("the workload needs a storage driver (storage=True)")
    readers = range(len(driver.readers))
    inbox: dict[int, list[tuple[Any, ...]]] = {r: [] for r in readers}
    stage: dict[int, str] = {r: "idle" for r in readers}
    flight: dict[int, tuple[Any, ...]] = {}  # reader -> handle of its read in flight
    max_obj = rec.recording().constants["MAX_OBJ"]

    def deliver(outcome: Outcome, key: str) -> None:
        if outcome.status == "ok":
            for r in readers:
                inbox[r].append((key, *outcome.result))

    for _ in range(steps):
        roll = rng.random()
        cached = [k for k in keys if writer.is_cached(k)]
        if roll < 0.22:
            key = rng.choice(keys)
            size = rng.randint(1, max_obj + 1)
            next_id = getattr(driver.ring, "monotonic_id_end", None)
            outstanding = {h[2] for r in readers for h in inbox[r]}
            outstanding |= {h[2] for h in flight.values()}
            if not keep_a3 or next_id not in outstanding:
                deliver(rec.put(key, size), key)
        elif roll < 0.30 and cached:
            key = rng.choice(cached)
            deliver(rec.get_cached(key), key)
        elif roll < 0.36:
            rec.touch(rng.choice(cached or list(keys)))
        elif roll < 0.40:
            rec.release_touches()
        elif roll < 0.48:
            rec.free_unused()
        elif roll < 0.50:
            rec.clear()
        elif roll < 0.56:  # every idle reader reads all its mail: the ring can empty
            for r in readers:
                while stage[r] == "idle" and inbox[r]:
                    if rec.get_begin(r, inbox[r].pop(0)).status == "ok":
                        rec.get_copy(r)
                        rec.get_end(r)
        else:
            r = rng.choice(list(readers))
            if stage[r] == "idle" and inbox[r]:
                handle = inbox[r].pop(rng.randrange(len(inbox[r])))
                stage[r] = "open" if rec.get_begin(r, handle).status == "ok" else "idle"
                if stage[r] == "open":
                    flight[r] = handle
            elif stage[r] == "open":
                rec.get_copy(r, fail=copy_failures and rng.random() < 0.05)
                stage[r] = "copied"
            elif stage[r] == "copied":
                rec.get_end(r)
                stage[r] = "idle"
                flight.pop(r)
    for r in readers:  # finish the reads in flight
        if stage[r] == "open":
            rec.get_copy(r)
            stage[r] = "copied"
        if stage[r] == "copied":
            rec.get_end(r)


# -- TLA+ -------------------------------------------------------------------------


def tla_value(value: Any) -> str:
    """A Python value as a TLA+ expression (tuples/lists are sequences)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        if abs(value) > TLC_INT_MAX:
            raise ValueError(f"{value} does not fit TLC's 32-bit integers")
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


def tla_module(recording: Recording, name: str, switches: dict[str, Any]) -> tuple[str, str]:
    """The generated module (log and constants) and its cfg."""
    c = recording.constants
    if c["R"] < 1:
        raise ValueError("the spec needs at least one reader")
    if c["ID_MAX"] > TLC_INT_MAX:
        raise ValueError(f"ID_MAX {c['ID_MAX']} does not fit TLC; record with a smaller id_max")
    log = recording.log
    keys = {e["key"] for e in log if "key" in e}
    keys |= {e["handle"][0] for e in log if e.get("handle")}
    keys |= {e["value"] for e in log if "value" in e and e["value"] != "<foreign>"}
    sizes = {e["size"] for e in log if "size" in e} | {1}
    forged = {tuple(e["handle"]) for e in log if e["name"] == "get_begin"}
    issues = sum(1 for e in log if e["name"] in ("put", "get_cached"))
    entries = ",\n    ".join(tla_value(e) for e in log)
    module = "\n".join([
        f"---- MODULE {name} ----",
        f"\\* GENERATED by shmref.recorder: {len(log)} log entries. Do not edit.",
        f"EXTENDS {TRACE_SPEC}",
        f"TraceKeys == {tla_value(keys or {'a'})}",
        f"TraceSizes == {tla_value(sizes)}",
        f"TraceReaders == {tla_value(set(range(c['R'])))}",
        f"TraceForged == {tla_value(forged)}",
        f"TraceLogValue == <<\n    {entries}>>",
        "====",
        "",
    ])
    cfg_lines = ["CONSTANTS", f"    N = {c['N']}", f"    ID_MAX = {c['ID_MAX']}",
                 f"    MAX_OBJ = {c['MAX_OBJ']}", "    Keys <- TraceKeys",
                 "    Sizes <- TraceSizes", "    Readers <- TraceReaders",
                 "    Forged <- TraceForged", f"    MaxIssues = {issues + 1}",
                 "    TraceLog <- TraceLogValue"]
    cfg_lines += [f"    {k} = {tla_value(v)}" for k, v in switches.items()]
    cfg_lines += ["INIT TraceInit", "NEXT TraceNext", "INVARIANT TraceIncomplete", ""]
    return module, "\n".join(cfg_lines)


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
            return (f"accepted: all {self.total} log entries are a behaviour of "
                    f"ShmObjectStorage ({_switch_text(self.switches)})")
        text = (f"REJECTED: entries 1..{self.matched} of {self.total} match a behaviour of "
                f"ShmObjectStorage ({_switch_text(self.switches)}), entry {self.matched + 1} "
                f"matches no enabled action: {self.first_unmatched}")
        return text + (f"\n{self.diagnosis}" if self.diagnosis else "")


def _switch_text(switches: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in switches.items())


def _run_log(recording: Recording, switches: dict[str, Any], folder: Path | None,
             timeout: float, extra_args: tuple[str, ...] = ()) -> tlc.TlcRun:
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
        return tlc.run_tlc(where / "TraceRun.tla", where / "TraceRun.cfg", workers=1,
                           extra_args=("-deadlock", *extra_args), timeout=timeout,
                           log_path=where / "tlc.out" if keep else None)
    finally:
        if not keep:
            shutil.rmtree(where, ignore_errors=True)


def validate_recording(recording: Recording, *, switches: dict[str, Any] | None = None,
                       out_dir: Path | None = None, timeout: float = 300,
                       diagnose: bool = True) -> Validation:
    """Run TLC on TraceShmObjectStorage with this log. `out_dir` keeps the
    generated module, cfg and TLC output (default: a temporary folder).
    A rejection is diagnosed (one more TLC run) unless `diagnose` is False."""
    chosen = {**DEFAULT_SWITCHES, **(switches or {})}
    run = _run_log(recording, chosen, out_dir, timeout)
    folder = Path(out_dir) if out_dir is not None else None
    total = len(recording.log)
    if run.outcome == "invariant" and run.violated == "TraceIncomplete":
        return Validation(True, total, total, chosen, None, run, folder)
    if run.outcome == "ok" and run.depth is not None:
        matched = max(run.depth - 1, 0)
        entry = recording.log[matched] if matched < total else None
        text = None
        if diagnose and entry is not None:
            text = explain_step(recording, matched, chosen, timeout,
                                folder / "diagnosis" if folder else None)
        return Validation(False, matched, total, chosen, entry, run, folder, text)
    raise tlc.TlcError(f"trace validation: unexpected TLC result: {run.summary()}")


# -- why a step matched nothing ------------------------------------------------------

CALL_FIELDS = ("name", "key", "size", "reader")
ABSENT = "(absent)"


def call_of(entry: dict[str, Any]) -> dict[str, Any]:
    """The call an entry records, without its results (a get_begin's handle
    is an argument; every other handle is a result)."""
    call = {f: entry[f] for f in CALL_FIELDS if f in entry}
    if entry["name"] == "get_begin":
        call["handle"] = entry["handle"]
    return call


def _spec_results(trace: tlc.Trace, call: dict[str, Any]) -> dict[str, Any]:
    """The results the spec gave the probed call, in the recording's form."""
    last, before = trace.states[-1].vars, trace.states[-2].vars
    if {k: v for k, v in last.items() if k != "i"} == {k: v for k, v in before.items()
                                                       if k != "i"}:
        # a no-op: the spec leaves the call out (TraceShmObjectStorage's NoOp)
        results: dict[str, Any] = {"outcome": "KeyError" if call["name"] == "get_cached"
                                   else "ok"}
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
    for f in sorted(set(entry) | set(results)):
        if f in CALL_FIELDS or (f == "handle" and entry["name"] == "get_begin"):
            continue
        if f == "freed" and f not in entry:  # optional in recordings
            continue
        mine, theirs = entry.get(f, ABSENT), results.get(f, ABSENT)
        if isinstance(mine, list):
            mine = tuple(mine)
        if mine != theirs:
            diffs.append((f, mine, theirs))
    return diffs


def _show(value: Any) -> str:
    return value if value == ABSENT else json.dumps(value)


def explain_step(recording: Recording, index: int, switches: dict[str, Any],
                 timeout: float = 300, folder: Path | None = None) -> str:
    """Why log entry `index` (0-based) matches no spec step: ask TLC which
    results the spec allows for the same call after the matched prefix,
    and name the `last_action` fields that differ, with both values."""
    entry = recording.log[index]
    call = call_of(entry)
    step = f"step {index + 1} ({describe_call(call)})"
    probe = Recording(recording.constants, [*recording.log[:index], call])
    run = _run_log(probe, switches, folder, timeout, ("-continue",))
    traces = [t for t in tlc.parse_traces(run.messages) if len(t.states) >= 2]
    if not traces:
        return (f"{step}: the spec cannot take this call at all after step {index}: "
                f"no spec step performs {describe_call(call)} there "
                f"(e.g. a reader with no read open, or an unknown handle)")
    options: list[tuple[dict[str, Any], list[tuple[str, Any, Any]]]] = []
    for trace in traces:
        results = _spec_results(trace, call)
        if results not in [o[0] for o in options]:
            options.append((results, _differences(entry, results)))
    options.sort(key=lambda o: len(o[1]))
    best = options[0][1]
    if not best:
        return f"{step}: the spec allows exactly the recorded results {options[0][0]}"
    parts = [f"last_action.{f}: recording {_show(a)}, spec {_show(b)}" for f, a, b in best]
    text = f"{step}: no spec step could match " + "; ".join(parts)
    if len(options) > 1:
        text += (f" (the spec allows {len(options)} results here; shown: the nearest; "
                 f"all: {[o[0] for o in options]})")
    return text


def describe_call(call: dict[str, Any]) -> str:
    args = ", ".join(f"{k}={json.dumps(v)}" for k, v in call.items() if k != "name")
    return f"{call['name']}({args})"
