"""Where a failing check leaves its trace for the report: one JSON file per
failing case in the run's `trace_dir` (shmref.core.runconfig: a conformance
run tells its children DIR/timelines), named after the case. Outside such a
run nothing is written, so the machines and replays cost nothing outside a
report."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from shmref.core.runconfig import current_run
from shmref.render.traceformat import Trace, TraceFormatError

FOLDER = "timelines"  # beside conformance.json


def trace_dir() -> str | None:
    """Where this run's failing checks leave their traces (None: nowhere)."""
    run = current_run()
    return run.trace_dir if run is not None else None


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
    into `folder` (default: the run's `trace_dir`; neither: nothing is written).
    The last trace of a case wins: Hypothesis runs the shrunk example last."""
    where = folder if folder is not None else trace_dir()
    if not where:
        return None
    trace.case = case or trace.case or current_case()
    path = Path(where) / file_name(trace.case)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        trace.save(path)
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
