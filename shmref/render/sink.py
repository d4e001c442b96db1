"""Where a failing check leaves its trace for the report: one JSON file per
failing case in `$SHMREF_TRACE_DIR` (a conformance run's child sets it to
DIR/timelines), named after the case. Without the variable nothing is
written, so the machines and replays cost nothing outside a report."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from shmref.render.traceformat import Trace, TraceFormatError

ENV = "SHMREF_TRACE_DIR"
FOLDER = "timelines"  # beside conformance.json


def case_of(nodeid: str) -> str:
    """A pytest node as reports name it: `.../test_x.py::test_y[p]` -> `test_x.py::test_y[p]`."""
    head, sep, tail = nodeid.partition("::")
    return head.rsplit("/", 1)[-1] + sep + tail


def current_case() -> str:
    """The running pytest test as the report names it, or "" outside pytest."""
    running = os.environ.get("PYTEST_CURRENT_TEST", "")
    node = running.rsplit(" (", 1)[0]
    return case_of(node) if node else ""


def file_name(case: str) -> str:
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", case)[-60:].strip("_.")
    return f"{readable}-{hashlib.sha256(case.encode()).hexdigest()[:10]}.json"


def save(trace: Trace, case: str = "", folder: Path | None = None) -> Path | None:
    """Write `trace` for the case (default: its own, else the running test)
    into `folder` (default: $SHMREF_TRACE_DIR; neither: nothing is written).
    The last trace of a case wins: Hypothesis runs the shrunk example last."""
    where = folder if folder is not None else os.environ.get(ENV)
    if not where:
        return None
    trace.case = case or trace.case or current_case()
    path = Path(where) / file_name(trace.case)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(trace.dumps(), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        return None  # a picture is never worth failing a check for
    return path


def load_all(folder: Path) -> tuple[dict[str, Trace], list[str]]:
    """Every trace in `folder` by its case, and one line per file that is not one."""
    traces: dict[str, Trace] = {}
    problems: list[str] = []
    if not folder.is_dir():
        return traces, problems
    for path in sorted(folder.glob("*.json")):
        try:
            trace = Trace.load(path)
        except TraceFormatError as exc:
            problems.append(f"a trace file could not be read: {exc}")
            continue
        traces[trace.case] = trace
    return traces, problems
