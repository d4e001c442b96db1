"""What the report's picture shows of a test's calls, apart from catching them
(shmref.calls.calltrace): a call as a step shows it (its arguments bound to
their names, each value a short repr, its exception one line: only text is
kept, never a reference to an argument or a result); the ring as the calls
placed it (what each returned call did to the chunks, in cells of the
picture, and the ring's own position attributes where it keeps them as plain
attributes); a state machine's falsifying example (`Drawn`: only when a
report asks for traces, the run's `trace_dir`, and Hypothesis runs the shrunk
failing example for the last time, so that the search itself pays nothing);
and the calls that outlive a crash (`Stream`, `crash_trace`).

One idea, a step of the trace format made from a call, kept apart from the
wrappers that intercept calls: the oracle's own process draws a crash from
the stream here, and the state machine draws its steps here, and neither
instruments a store.

A crash: the recorder's steps also go, one JSON line each and as they
happen, to the run's `calls_file` (shmref.core.runconfig: a conformance
run's child has one beside its event stream). A call is written before it
is made and its step after it returned, so when a store segfaults or hangs
inside a call, the oracle (which outlives its child) draws the test's calls
up to that one, marked CRASH or TIMEOUT.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import reprlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shmref.core import vocabulary
from shmref.core.runconfig import current_run
from shmref.render import sink
from shmref.render.build import Builder
from shmref.render.traceformat import FORMAT, RingTracker, Step, Trace, TraceFormatError
from shmref.store.driver import Driver, Outcome

# -- a call as a step shows it -------------------------------------------------------------

_SHORT = reprlib.Repr()
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxbytes = 22, 22, 16  # type: ignore[attr-defined]
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = 4


def short(value: Any) -> str:
    """A value as a step shows it: its repr, cut; never an error."""
    kind = type(value)
    if kind is int and -(10**15) < value < 10**15 or kind is str and len(value) <= 20:
        return repr(value)  # the common arguments, without reprlib's cost
    if inspect.isfunction(value) or inspect.ismethod(value) or inspect.isbuiltin(value):
        return value.__name__
    if getattr(kind, "__repr__", None) is object.__repr__:  # "<... at 0x...>": its class says it
        return f"<{kind.__name__}>"
    try:
        return _SHORT.repr(value)
    except Exception:
        return f"<{type(value).__name__}>"


def shown_args(bound: dict[str, Any]) -> dict[str, str]:
    """Bound arguments as a step shows them, without `self`/`cls`."""
    return {k: short(v) for k, v in bound.items() if k not in ("self", "cls")}


def first_line(exc: BaseException) -> str:
    """An exception's message as a step shows it: its first line, cut at 80 characters."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else ""
    return text if len(text) <= 80 else text[:79] + "\u2026"


@functools.lru_cache(maxsize=256)
def _parameters(fn: Callable[..., Any]) -> tuple[inspect.Signature | None, tuple[str, ...] | None]:
    """The signature, and the names plain positional calls bind to (None:
    the signature has *args, or none could be read)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None, None
    kinds = [p.kind for p in signature.parameters.values()]
    plain = inspect.Parameter.VAR_POSITIONAL not in kinds
    names = tuple(signature.parameters) if plain else None
    return signature, names


def bind(fn: Callable[..., Any], args: tuple[Any, ...], kw: dict[str, Any]) -> dict[str, Any]:
    """A call's arguments by parameter name (`argN` where the signature cannot say)."""
    signature, names = _parameters(fn)
    if names is not None and len(args) <= len(names) and not kw:  # the common call, fast
        return dict(zip(names, args, strict=False))
    if signature is not None:
        try:
            return dict(signature.bind(*args, **kw).arguments)
        except TypeError:
            pass
    return {**{f"arg{k}": v for k, v in enumerate(args)}, **kw}


# -- the ring as the calls placed it -------------------------------------------------------

MAX_CELLS = 32  # the ring is drawn in cells of 16 B, doubled until it fits


@dataclass
class RingView:
    """One ring of the test as the picture shows it: its size in bytes, the
    drawing's unit, and what the calls placed on it."""

    size: int
    unit: int = 16
    tracker: RingTracker = field(init=False)
    positions: dict[str, Any] | None = None  # the writer's data_buffer_start/end, last seen
    source: Callable[[], Any] | None = None  # the ring object itself (a weak reference)

    def __post_init__(self) -> None:
        while self.size // self.unit > MAX_CELLS:
            self.unit *= 2
        self.cells = max(-(-self.size // self.unit), 1)
        self.tracker = RingTracker(self.cells, 0)

    def units(self, address: int, up: bool = False) -> int:
        """A logical byte address (growing over laps) in cells, laps kept;
        `up`: the cell a chunk's end falls in counts whole."""
        lap, offset = divmod(int(address), self.size) if self.size else (0, int(address))
        cells = -(-offset // self.unit) if up else offset // self.unit
        return lap * self.cells + cells

    def cell(self, address: int) -> int:
        """The cell a chunk's address falls in (its place in the segment)."""
        return (int(address) % self.size if self.size else int(address)) // self.unit


def follow(ring: RingView, name: str, bound: dict[str, Any], result: Any, lane: str) -> None:
    """What a returned call did to the ring, in cells (RingTracker's fields)."""
    tracker = ring.tracker
    placed = placed_of(result)
    if name == "allocate_buf" and placed is not None:
        address, chunk_id = placed
        size = bound.get("size")
        tracker.address[chunk_id] = ring.cell(address)
        tracker.size[chunk_id] = max(-(-int(size or 1) // ring.unit), 1)
        tracker.key[chunk_id] = ""
    elif name == "put" and placed is not None:
        address, chunk_id = placed
        tracker.address[chunk_id] = ring.cell(address)
        tracker.size[chunk_id] = 1  # until the next chunk (or the ring's end) says more
        tracker.key[chunk_id] = short(bound.get("key")).strip("'")
        tracker.issued[chunk_id], tracker.reads[chunk_id] = 1, 0
    elif name == "get_cached" and placed is not None:
        tracker.issued[placed[1]] = tracker.issued.get(placed[1], 0) + 1
    elif name == "get" and lane != "writer":
        read_id = bound.get("monotonic_id")
        if isinstance(read_id, int) and read_id in tracker.address:
            tracker.reads[read_id] = tracker.reads.get(read_id, 0) + 1
    elif name == "touch" and lane == "writer":
        tracker.touched.add(short(bound.get("key")).strip("'"))
    elif name == "release_touches":
        tracker.touched.clear()
    elif name == "clear":
        tracker.address.clear()
        tracker.touched.clear()
    elif name == "free_buf" and isinstance(result, (list, tuple)):
        for chunk_id in result:
            tracker.address.pop(chunk_id, None)
    tracker.readers = max(tracker.readers, _readers(bound))


def positions(ring: RingView) -> dict[str, Any] | None:
    """data_buffer_start/end in cells, where the ring keeps them as plain
    attributes (never a property: that could be a call into the store)."""
    if ring.source is None:
        return None
    attributes = attributes_of(ring.source())
    start, end = attributes.get("data_buffer_start"), attributes.get("data_buffer_end")
    if not (isinstance(start, int) and isinstance(end, int)):
        return None
    tracker = ring.tracker
    start_u, end_u = ring.units(start), ring.units(end, up=True)
    order = _live_ids(attributes)
    if order is not None:  # the documented id range says which chunks are live
        for chunk_id in set(tracker.address) - set(order):
            del tracker.address[chunk_id]
        _sizes_from_neighbours(tracker, [i for i in order if i in tracker.address], end_u)
    return {"data_buffer_start": start_u, "data_buffer_end": end_u, "metadata": tracker.address}


def _live_ids(attributes: dict[str, Any]) -> list[int] | None:
    """The live ids, oldest first, from monotonic_id_start/end and ID_MAX."""
    first, after = attributes.get("monotonic_id_start"), attributes.get("monotonic_id_end")
    id_max = attributes.get("ID_MAX")
    if not all(isinstance(v, int) for v in (first, after, id_max)) or not id_max:
        return None
    assert isinstance(first, int) and isinstance(after, int) and isinstance(id_max, int)
    count = (after - first) % id_max
    return [(first + k) % id_max for k in range(min(count, 4096))]


def _sizes_from_neighbours(tracker: RingTracker, order: list[int], end: int) -> None:
    """A put's chunk reaches to the next live chunk's cell (the last: the end)."""
    cells = tracker.n
    for here, after in zip(order, [*order[1:], None][: len(order)], strict=True):
        if here not in tracker.issued:
            continue  # allocate_buf's chunks know their size
        reach = tracker.address[after] if after is not None else end % cells or cells
        gap = (reach - tracker.address[here]) % cells
        tracker.size[here] = gap or 1


def attributes_of(obj: Any) -> dict[str, Any]:
    """An object's own attributes (none for one without a __dict__)."""
    try:
        attributes: dict[str, Any] = vars(obj)
        return attributes
    except TypeError:
        return {}


def _readers(bound: dict[str, Any]) -> int:
    count = bound.get("n_readers")
    return count if isinstance(count, int) and 0 < count < 64 else 0


def placed_of(result: Any) -> tuple[int, int] | None:
    """(address, id) if `result` looks like `put`'s or `allocate_buf`'s, else None."""
    if isinstance(result, tuple) and len(result) == 2 and all(isinstance(v, int) for v in result):
        return int(result[0]), int(result[1])
    return None


# -- a state machine's steps ---------------------------------------------------------------


def final_run() -> bool:
    """Hypothesis is running the (shrunk) failing example for the last time."""
    try:
        from hypothesis.control import current_build_context

        return bool(current_build_context().is_final)
    except Exception:  # outside a Hypothesis test
        return False


class Drawn:
    """The steps of one machine run, drawn if it fails."""

    def __init__(self, name: str, driver: Driver, constants: dict[str, int], readers: int):
        self.driver = driver
        self.builder: Builder | None = None
        if sink.trace_dir() and final_run():
            self.builder = Builder(
                "hypothesis",
                f"Hypothesis falsifying example ({name})",
                {**constants, "UNIT": driver.unit},
                [f"r{k + 1}" for k in range(readers)],
            )

    def step(self, name: str, args: tuple[Any, ...], real: Outcome) -> None:
        """Add one step the machine took, with the ring after it (nothing unless drawing)."""
        if self.builder is None:
            return
        arguments = dict(zip(vocabulary.action(name).arguments, args, strict=False))
        steps = self.builder.trace.steps
        self.builder.add(
            len(steps) + 1,
            {"name": name, **arguments},
            real.status,
            real.result,
            self.driver.observe(),
        )

    def teardown(self) -> None:
        """Called from the machine's teardown, which runs in the run's
        `finally`: the exception in flight is the failure."""
        failure = sys.exc_info()[1]
        if self.builder is not None and failure is not None:
            sink.save(self.builder.mark(f"{type(failure).__name__}: {failure}".splitlines()[0]))


# -- the calls that outlive a crash --------------------------------------------------------

_ENCODE = json.JSONEncoder(default=str, separators=(",", ":")).encode  # one encoder, not one a line


def streamed_to() -> str:
    """Where this run's calls are streamed ("" outside a conformance run's child)."""
    run = current_run()
    return (run.calls_file or "") if run is not None else ""


def calls_file(events: Path) -> Path:
    """Where a conformance run's child streams its calls: beside its events."""
    return events.with_suffix(".calls.jsonl")


class Stream:
    """The writing side: unbuffered appends (a crash loses no line)."""

    def __init__(self) -> None:
        self.fd: int | None = None
        self.path = ""

    def write(self, line: dict[str, Any]) -> None:
        """Append one JSON line to the run's calls file, if any; a failed write ends the stream."""
        path = streamed_to()
        if not path:
            return
        try:
            if self.fd is None or path != self.path:
                self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                self.path = path
            os.write(self.fd, (_ENCODE(line) + "\n").encode())
        except OSError:  # a picture is never worth failing a check for
            self.fd = None

    def case(self, case: str) -> None:
        """A test (or an example of it) starts: only its calls are kept."""
        if self.fd is not None:
            try:
                os.ftruncate(self.fd, 0)
            except OSError:
                self.fd = None
        self.write({"case": case})

    def call(self, action: str, actor: str, args: dict[str, str], done: str = "") -> None:
        """A call about to be made (`done`: the outcome of the one before it,
        for Hypothesis's search, which streams no steps)."""
        line = {"call": action, "actor": actor, "args": args}
        self.write({"done": done, **line} if done else line)

    def step(self, step: Step, constants: dict[str, int]) -> None:
        """A returned call, its ring as lists (cheap to write: every call of a test)."""
        ring = step.ring
        drawn = None
        if ring is not None:
            chunks = [
                [c.address, c.size, c.id, c.key, c.state, c.count, c.owed] for c in ring.chunks
            ]
            drawn = {"start": ring.start, "end": ring.end, "chunks": chunks}
        line = {
            "index": step.index,
            "actor": step.actor,
            "action": step.action,
            "args": step.args,
            "outcome": step.outcome,
            "result": step.result,
            "ring": drawn,
        }
        self.write({"step": line, "constants": constants})


def crash_trace(path: Path, case: str, status: str, detail: str) -> Trace | None:
    """The calls `case` made before its process died (or was killed), the
    call it was in marked with `status`; None when nothing was written."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    entries: list[dict[str, Any]] = []
    current = None
    for text in lines:
        try:
            entry = json.loads(text)
        except ValueError:  # a line cut short by the crash
            continue
        if not isinstance(entry, dict):
            continue
        if "case" in entry:
            current = entry["case"]
            if current == case:
                entries = []  # its last start (a new example, or a retried test)
        elif current == case:
            entries.append(entry)
    steps: list[dict[str, Any]] = []
    pending: dict[str, Any] | None = None
    for entry in entries:
        if "done" in entry and pending is not None:  # the outcome of a call of the search
            steps.append(_step(pending, len(steps) + 1, entry["done"], "", None))
            pending = None
        if "call" in entry:
            pending = entry
        elif "step" in entry:
            steps.append(_unpacked(entry["step"]))
            pending = None
    constants: dict[str, int] = next(
        (e["constants"] for e in reversed(entries) if "constants" in e), {}
    )
    why = detail.splitlines()[0] if detail else status
    if pending is not None:
        ring = steps[-1].get("ring") if steps else None
        steps.append(_step(pending, len(steps) + 1, status, "never returned", ring))
    if not steps:
        return None
    steps[-1] = {
        **steps[-1],
        "diverged": True,
        "note": f"{status} in this call: {why}" if pending else f"{status} after it: {why}",
    }
    readers = sorted({s["actor"] for s in steps if s["actor"] != "writer"})
    data = {
        "format": FORMAT,
        "source": "calls",
        "title": f"the calls of {case}, up to the {status}",
        "case": case,
        "verdict": f"{status}: {why}",
        "constants": constants,
        "readers": readers,
        "steps": steps,
    }
    try:
        return Trace.from_json(data)
    except TraceFormatError:
        return None


def _step(call: dict[str, Any], index: int, outcome: str, result: str, ring: Any) -> dict[str, Any]:
    return {
        "index": index,
        "actor": call.get("actor", "writer"),
        "action": call["call"],
        "args": call.get("args", {}),
        "outcome": outcome,
        "result": result,
        "ring": ring,
    }


def _unpacked(step: dict[str, Any]) -> dict[str, Any]:
    """A streamed step in the trace format (its chunks were written as lists)."""
    ring = step.get("ring")
    if isinstance(ring, dict) and ring.get("chunks"):
        names = ("address", "size", "id", "key", "state", "count", "owed")
        chunks = [dict(zip(names, c, strict=False)) for c in ring["chunks"]]
        step = {**step, "ring": {**ring, "chunks": chunks}}
    return step
