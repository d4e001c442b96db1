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

A recording is plain JSON (`Recording.save` / `Recording.load`), so an
implementation in another language can write one and have it checked:
`python -m shmref.conformance --validate-trace FILE`.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shmref import tlc
from shmref.driver import MD_SIZE, UNIT, Driver, Outcome

REPO = Path(__file__).resolve().parents[1]
SPEC_DIR = REPO / "spec"
TRACE_SPEC = "TraceShmObjectStorage"
SPEC_FILES = ("RingBuffer.tla", "ShmObjectStorage.tla", "AbstractCache.tla", f"{TRACE_SPEC}.tla")
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

    @classmethod
    def load(cls, path: Path) -> Recording:
        data = json.loads(Path(path).read_text())
        log = [{k: tuple(v) if isinstance(v, list) else v for k, v in e.items()}
               for e in data["log"]]
        return cls({k: int(v) for k, v in data["constants"].items()}, log)


class Recorder:
    """A `Driver` whose every call is logged as the spec's `last_action`."""

    def __init__(self, driver: Driver) -> None:
        if driver.writer is None:
            raise ValueError("the recorder needs a storage driver (storage=True)")
        self.driver = driver
        self.log: list[dict[str, Any]] = []
        self.open: dict[int, tuple] = {}  # reader -> handle of its read in flight

    def recording(self) -> Recording:
        writer = self.driver.writer
        max_obj, rest = divmod(writer.max_object_size + MD_SIZE, UNIT)
        if rest:
            raise ValueError(f"max_object_size {writer.max_object_size} is not 16*k - 8")
        constants = {"N": self.driver.n_units, "ID_MAX": int(self.driver.ring.ID_MAX),
                     "MAX_OBJ": max_obj, "R": len(self.driver.readers)}
        return Recording(constants, [dict(e) for e in self.log])

    def _add(self, name: str, outcome: Outcome, **fields: Any) -> Outcome:
        self.log.append({"name": name, **fields, "outcome": outcome.status})
        return outcome

    def _handle(self, key: str, outcome: Outcome) -> tuple:
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

    def get_begin(self, reader: int, handle: tuple) -> Outcome:
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
    readers = range(len(driver.readers))
    inbox: dict[int, list[tuple]] = {r: [] for r in readers}
    stage: dict[int, str] = {r: "idle" for r in readers}
    flight: dict[int, tuple] = {}  # reader -> handle of its read in flight
    max_obj = rec.recording().constants["MAX_OBJ"]

    def deliver(outcome: Outcome, key: str) -> None:
        if outcome.status == "ok":
            for r in readers:
                inbox[r].append((key, *outcome.result))

    for _ in range(steps):
        roll = rng.random()
        cached = [k for k in keys if driver.writer.is_cached(k)]
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

    def explain(self) -> str:
        if self.accepted:
            return (f"accepted: all {self.total} log entries are a behaviour of "
                    f"ShmObjectStorage ({_switch_text(self.switches)})")
        return (f"REJECTED: entries 1..{self.matched} of {self.total} match a behaviour of "
                f"ShmObjectStorage ({_switch_text(self.switches)}), entry {self.matched + 1} "
                f"matches no enabled action: {self.first_unmatched}")


def _switch_text(switches: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in switches.items())


def validate_recording(recording: Recording, *, switches: dict[str, Any] | None = None,
                       out_dir: Path | None = None, timeout: float = 300) -> Validation:
    """Run TLC on TraceShmObjectStorage with this log. `out_dir` keeps the
    generated module, cfg and TLC output (default: a temporary folder)."""
    chosen = {**DEFAULT_SWITCHES, **(switches or {})}
    keep = out_dir is not None
    folder = Path(out_dir) if keep else Path(tempfile.mkdtemp(prefix="shmref-trace-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        for name in SPEC_FILES:
            shutil.copyfile(SPEC_DIR / name, folder / name)
        module, cfg = tla_module(recording, "TraceRun", chosen)
        (folder / "TraceRun.tla").write_text(module)
        (folder / "TraceRun.cfg").write_text(cfg)
        run = tlc.run_tlc(folder / "TraceRun.tla", folder / "TraceRun.cfg", workers=1,
                          extra_args=("-deadlock",), timeout=timeout,
                          log_path=folder / "tlc.out" if keep else None)
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    total = len(recording.log)
    if run.outcome == "invariant" and run.violated == "TraceIncomplete":
        return Validation(True, total, total, chosen, None, run, folder if keep else None)
    if run.outcome == "ok" and run.depth is not None:
        matched = max(run.depth - 1, 0)
        entry = recording.log[matched] if matched < total else None
        return Validation(False, matched, total, chosen, entry, run, folder if keep else None)
    raise tlc.TlcError(f"trace validation: unexpected TLC result: {run.summary()}")
