"""The one trace format every picture is drawn from (docs/trace-format.md).

A hazard replay, a replay divergence, a Hypothesis falsifying example and a
rejected trace-validation step each become a `Trace`: steps in the spec's
vocabulary (shmref.core.vocabulary: actor, action, arguments, outcome), each
with the ring as the store showed it after the step and, where a spec state
was compared, the spec's ring beside it. `RingTracker` turns what a source
knows (an observation in Driver.observe's variables, or only the steps
themselves) into chunks with a state, so that every source draws alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from shmref.core import vocabulary
from shmref.core.files import write_atomically

FORMAT = "shmref-trace/1"
STATES = ("live", "read", "touched", "reclaimable", "free")
SECRET_BYTES = 32  # the handle-signing secret before the data (refimpl/ring.py)


class TraceFormatError(ValueError):
    """A trace file that is not this format: one line saying where."""


@dataclass(frozen=True)
class Chunk:
    address: int  # units from the start of the data (the spec's address, modulo N)
    size: int  # units, header included
    id: int | None
    key: str = ""
    state: str = "live"  # one of STATES
    count: int | None = None  # reads counted on it (None: not observed)
    owed: int | None = None  # reads it is owed (writer_flag * R)


@dataclass(frozen=True)
class Ring:
    start: int | None  # data_buffer_start, in units (beyond N after a lap)
    end: int | None
    chunks: tuple[Chunk, ...] = ()


@dataclass
class Step:
    index: int  # the step's number in its source (TLC state, log entry, rule)
    actor: str  # "writer" or a reader's name (r1, r2, ...)
    action: str  # a name of shmref.core.vocabulary
    args: dict[str, Any] = field(default_factory=dict)
    outcome: str = "ok"
    result: str = ""  # what it returned, shortly (a handle, a value)
    expected: str | None = None  # the spec's outcome where one was compared
    note: str = ""  # why this step is marked (a divergence, a violation)
    diverged: bool = False
    ring: Ring | None = None  # the store's (or, for a TLC trace alone, the spec's)
    spec: Ring | None = None  # the spec's, beside the store's

    def call(self) -> str:
        shown = ", ".join(f"{k}={show(v)}" for k, v in self.args.items())
        return f"{self.action}({shown})"


@dataclass
class Trace:
    source: str  # hazard, replay, hypothesis, validation or calls (docs/trace-format.md)
    title: str
    case: str = ""  # the failure it belongs to (a suite node, a hazard model, a file)
    verdict: str = ""  # what went wrong, in one line
    constants: dict[str, int] = field(default_factory=dict)  # N, R, ID_MAX, MAX_OBJ, UNIT
    readers: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    lasso: int | None = None  # a liveness counterexample loops back to this step index
    ring_label: str = "store"  # what `Step.ring` shows: "store", or "spec" (a TLC trace)
    omitted: int = 0  # steps not kept (a long test keeps its first and its last calls) ...
    omitted_after: int | None = None  # ... left out after this many of `steps`

    @property
    def diverged_at(self) -> int | None:
        """The position in `steps` of the first marked step."""
        return next((k for k, s in enumerate(self.steps) if s.diverged), None)

    def to_json(self) -> dict[str, Any]:
        data = {"format": FORMAT, **asdict(self)}
        plain: dict[str, Any] = json.loads(json.dumps(data, default=_plain, sort_keys=True))
        return plain

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, data: Any) -> Trace:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise TraceFormatError(f"not a {FORMAT} trace (its 'format' field)")
        try:
            steps = [
                Step(
                    **{
                        **s,
                        "ring": _ring(s.get("ring")),
                        "spec": _ring(s.get("spec")),
                    }
                )
                for s in data["steps"]
            ]
            fields = {k: v for k, v in data.items() if k not in ("format", "steps")}
            return cls(**fields, steps=steps)
        except (KeyError, TypeError, AttributeError) as exc:
            raise TraceFormatError(f"a field is missing or wrong: {exc}") from None

    def save(self, path: Path) -> Path:
        """The one writer of a trace file: `path` replaced whole (a reader
        never sees half a trace)."""
        write_atomically(Path(path), self.dumps())
        return Path(path)

    @classmethod
    def load(cls, path: Path) -> Trace:
        try:
            return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError, TraceFormatError) as exc:
            raise TraceFormatError(f"{path}: {exc}") from None


def _ring(data: Any) -> Ring | None:
    if data is None:
        return None
    return Ring(data["start"], data["end"], tuple(Chunk(**c) for c in data["chunks"]))


def _plain(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"not JSON: {value!r}")


def show(value: Any) -> str:
    """A value as the spec prints it (a handle as <<key, address, id>>)."""
    if isinstance(value, (tuple, list)):
        return "<<" + ",".join(show(v) for v in value) + ">>"
    return str(value)


def actor_of(action: Mapping[str, Any], readers: Sequence[str]) -> str:
    """The lane of a step: a reader's own (reader actions, and the environment
    dropping a reader's delivery), else the writer's (ring and writer)."""
    reader = action.get("reader")
    if reader is None:
        return "writer"
    if isinstance(reader, int) and not isinstance(reader, bool):
        return readers[reader] if 0 <= reader < len(readers) else f"r{reader + 1}"
    return str(reader)


def step_args(action: Mapping[str, Any], readers: Sequence[str]) -> dict[str, Any]:
    """The step's arguments (shmref.core.vocabulary), without the reader (its lane)."""
    try:
        names = vocabulary.action(str(action["name"])).arguments
    except vocabulary.UnknownAction:
        names = tuple(k for k in action if k not in ("name", "outcome"))
    return {a: _json_value(action[a]) for a in names if a in action and a != "reader"}


def _json_value(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_json_value(v) for v in value]
    return value


# -- rings -------------------------------------------------------------------------------------


def function(value: Any) -> dict[Any, Any]:
    """A TLA+ function as a dict (TLC prints a function on 1..n as a sequence)."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple):
        return {i + 1: v for i, v in enumerate(value)}
    return {}


def cell_function(value: Any) -> dict[int, Any]:
    """A function on cells 0..N-1 (printed 1-based as a sequence when 0 is absent)."""
    if isinstance(value, tuple):
        return dict(enumerate(value))
    return function(value)


def chunk_state(touched: bool, count: int | None, owed: int | None) -> str:
    if touched:
        return "touched"
    if count is not None and owed is not None and count >= owed:
        return "reclaimable"
    if count:
        return "read"
    return "live"


def spec_ring(state: Mapping[str, Any], n: int, readers: int) -> Ring:
    """The ring of a TLC state of the storage (or ring) spec."""
    metadata = function(state.get("metadata", ()))
    sizes = cell_function(state.get("hdr_size", ()))
    counts = cell_function(state.get("count", ()))
    flags = function(state.get("writer_flag", ()))
    keys = function(state.get("id_index", ()))
    touched = set(state.get("touched", ()))
    storage = "writer_flag" in state
    chunks = []
    for chunk_id, address in sorted(metadata.items(), key=lambda kv: str(kv[0])):
        cell = address % n if n else address
        count = counts.get(cell) if storage else None
        owed = flags.get(chunk_id, 0) * readers if storage else None
        chunks.append(
            Chunk(
                cell,
                max(int(sizes.get(cell, 1) or 1), 1),
                chunk_id,
                str(keys.get(chunk_id, "")),
                chunk_state(chunk_id in touched, count, owed),
                count,
                owed,
            )
        )
    return Ring(state.get("data_buffer_start"), state.get("data_buffer_end"), _ordered(chunks))


def _ordered(chunks: Sequence[Chunk]) -> tuple[Chunk, ...]:
    return tuple(sorted(chunks, key=lambda c: (c.address, -1 if c.id is None else c.id)))


class RingTracker:
    """What a source that is not the spec knows of the ring, step by step:
    sizes, keys, hand-outs and counted reads from the steps themselves, the
    rest from an observation (Driver.observe's variables) where there is one."""

    def __init__(self, n: int, readers: int) -> None:
        self.n, self.readers = n, readers
        self.size: dict[int, int] = {}  # id -> units
        self.key: dict[int, str] = {}
        self.address: dict[int, int] = {}  # live ids the steps placed
        self.issued: dict[int, int] = {}  # id -> hand-outs (put, get_cached)
        self.reads: dict[int, int] = {}  # id -> reads that ended on its handle
        self.touched: set[str] = set()
        self.marked: set[int] = set()  # ring model: ids marked free
        self.open: dict[Any, Sequence[Any]] = {}  # reader -> handle of its read in flight

    def follow(self, action: Mapping[str, Any], outcome: str, result: Any = None) -> None:
        """Learn from one step (`result`: (address, id) for a placing step)."""
        name = action.get("name")
        placed = _pair(result) if outcome == "ok" else None
        if name in ("put", "allocate_buf") and placed is not None:
            address, chunk_id = placed
            self.size[chunk_id] = int(action.get("size", 1))
            self.key[chunk_id] = str(action.get("key", ""))
            self.address[chunk_id] = address
            self.issued[chunk_id] = 1 if name == "put" else 0
            self.reads[chunk_id] = 0
            self.marked.discard(chunk_id)
        elif name == "get_cached" and placed is not None:
            self.issued[placed[1]] = self.issued.get(placed[1], 0) + 1
        elif name == "get_begin" and outcome == "ok":
            self.open[action.get("reader")] = action.get("handle") or ()
        elif name == "get_end":
            opened = self.open.pop(action.get("reader"), ())
            handle: Sequence[Any] = action.get("handle") or opened
            if outcome == "ok" and len(handle) == 3 and self.address.get(handle[2]) == handle[1]:
                self.reads[handle[2]] = self.reads.get(handle[2], 0) + 1
        elif name == "touch":
            self.touched.add(str(action.get("key")))
        elif name == "release_touches":
            self.touched.clear()
        elif name == "mark_free":
            self.marked.add(int(action.get("id", -1)))
        elif name == "clear" and outcome == "ok":
            self.address.clear()
            self.open.clear()
            self.touched.clear()
            self.marked.clear()
        for chunk_id in action.get("freed", ()) or ():
            self.address.pop(chunk_id, None)

    def ring(self, observed: Mapping[str, Any] | None = None) -> Ring:
        """The ring after the steps followed so far; `observed` (if any)
        decides which chunks are live and where, and their counts."""
        observed = observed or {}
        live = dict(observed.get("metadata", self.address))
        counts = observed.get("counts")
        key_of = {i: k for k, (_a, i) in observed.get("key_index", {}).items()}
        touched_ids = {i for i, k in {**self.key, **key_of}.items() if k in self.touched}
        storage = "key_index" in observed or bool(self.issued)
        chunks = []
        for chunk_id, address in live.items():
            count = counts.get(chunk_id) if counts is not None else self.reads.get(chunk_id)
            owed = self.issued.get(chunk_id, 0) * self.readers if storage else None
            state = chunk_state(chunk_id in touched_ids, count if storage else None, owed)
            if not storage and chunk_id in self.marked:
                state = "reclaimable"
            chunks.append(
                Chunk(
                    address % self.n if self.n else address,
                    self.size.get(chunk_id, 1),
                    chunk_id,
                    key_of.get(chunk_id, self.key.get(chunk_id, "")),
                    state,
                    count if storage else None,
                    owed,
                )
            )
        ordered = _ordered(chunks)
        start = observed.get("data_buffer_start")
        end = observed.get("data_buffer_end")
        if start is None and ordered:  # no position attributes: the chunks' own span
            start, end = ordered[0].address, ordered[-1].address + ordered[-1].size
        return Ring(start, end, ordered)


def _pair(result: Any) -> tuple[int, int] | None:
    if isinstance(result, (tuple, list)) and len(result) == 2:
        return int(result[0]), int(result[1])
    if isinstance(result, (tuple, list)) and len(result) == 3:  # a handle (key, address, id)
        return int(result[1]), int(result[2])
    return None
