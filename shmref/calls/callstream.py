"""A failing property's calls that outlive a crash: the recorder's steps
also go, one JSON line each and as they happen, to the run's `calls_file`
(shmref.core.runconfig: a conformance run's child has one beside its
event stream). A call is
written before it is made and its step after it returned, so when a store
segfaults or hangs inside a call, the oracle (which outlives its child)
draws the test's calls up to that one, marked CRASH or TIMEOUT.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from shmref.core.runconfig import current_run
from shmref.render.traceformat import FORMAT, Step, Trace, TraceFormatError

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
