"""Each finding that a test demonstrates on the seed's code, drawn from that
test's calls: docs/pictures/finding-ID.json (the trace format, committed)
and finding-ID.svg, shown under the finding in FINDINGS.md.

`make findings` runs the findings' first seed tests once, in one pytest
under shmref.calls.calltrace (the seed's classes instrumented, a passing
test's calls kept), when the seed is at hand; else the committed JSON stays.
Segment names, signatures and object addresses are made neutral, so the
same code records the same file. A test that makes no call on the store in
its own process (one that runs `python -O` in a subprocess) has no picture.
The check needs no seed: every SVG must be what its JSON draws, and every
picture must have its place in FINDINGS.md. The findings drawn from TLC
(shmref.docgen.pictures) are not drawn again here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shmref.core.runconfig import RunConfig
from shmref.render import sink, svg
from shmref.render.traceformat import Trace, TraceFormatError

PREFIX = "finding-"
NEUTRAL = (
    (re.compile(r"psm_[0-9a-f]+"), "psm_\u2026"),
    (re.compile(r"\[(?:\d+, ){4}\.\.\.\]"), "[\u2026]"),  # an HMAC signature
    (re.compile(r"0x[0-9a-f]{6,}"), "0x\u2026"),
)


@dataclass(frozen=True)
class CallPicture:
    finding: str
    test: str  # tests/FILE.py::test_name
    title: str

    @property
    def name(self) -> str:
        return self.test.rsplit("::", 1)[-1]


def wanted(findings: Iterable[Any], drawn_by_tlc: set[str]) -> list[CallPicture]:
    """A picture per finding with a seed test and no TLC picture."""
    out = []
    for finding in findings:
        tests = [t for t in finding.seed_tests if t.endswith("_seed")]
        if finding.id not in drawn_by_tlc and tests:
            out.append(CallPicture(finding.id, tests[0], finding.title))
    return out


def json_path(ident: str, folder: Path) -> Path:
    return folder / f"{PREFIX}{ident}.json"


def committed(folder: Path) -> dict[str, Path]:
    """The findings with a committed picture, by id."""
    return {p.stem[len(PREFIX) :]: p for p in sorted(folder.glob(f"{PREFIX}*.json"))}


def neutral(trace: Trace) -> Trace:
    text = trace.dumps()
    for pattern, replacement in NEUTRAL:
        text = pattern.sub(replacement, text)
    return Trace.from_json(json.loads(text))


def record(pictures: list[CallPicture], repo: Path) -> dict[str, Trace]:
    """Each picture's test run on the seed, its calls as a trace (by finding)."""
    if not pictures:
        return {}
    with tempfile.TemporaryDirectory(prefix="shmref-findings-") as work:
        where = Path(work) / "traces"  # every test's calls kept (shmref.core.runconfig)
        run = RunConfig(trace_dir=str(where), trace_passed=True).write(Path(work) / "run.json")
        nodes = sorted({p.test for p in pictures})
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
            + ["-p", "shmref.calls.calltrace", "--shmref-run", str(run), *nodes],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=900,
        )
        traces, _problems = sink.load_all(where)
    found: dict[str, Trace] = {}
    for picture in pictures:
        file = Path(picture.test.split("::", 1)[0]).name
        cases = sorted(c for c in traces if c.split("[", 1)[0] == f"{file}::{picture.name}")
        if not cases or len(traces[cases[0]].steps) < 2:
            continue
        trace = neutral(traces[cases[0]])
        trace.title = f"finding {picture.finding}: {picture.name}, the seed's calls"
        trace.verdict = f"finding {picture.finding}: {picture.title}".replace("`", "")
        trace.steps[-1].note = "the finding shows here"
        found[picture.finding] = trace
    return found


def refresh(pictures: list[CallPicture], folder: Path, repo: Path) -> list[str]:
    """Record the pictures afresh and write their JSON; one line per change."""
    notes = []
    found = record(pictures, repo)
    if not found:
        return ["finding pictures: kept as committed (the seed's tests could not run)"]
    for ident, trace in found.items():
        path = json_path(ident, folder)
        if not path.is_file() or path.read_text(encoding="utf-8") != trace.dumps():
            trace.save(path)
            notes.append(f"{path.name} recorded")
    for ident, path in committed(folder).items():
        if ident not in found:
            path.unlink()
            path.with_suffix(".svg").unlink(missing_ok=True)
            notes.append(f"{path.name} removed (its test draws nothing now)")
    return notes


def drawings(folder: Path) -> dict[Path, str]:
    out = {}
    for path in committed(folder).values():
        try:
            out[path.with_suffix(".svg")] = svg.render(Trace.load(path))
        except TraceFormatError as exc:
            raise ValueError(str(exc)) from None
    return out


def sections(folder: Path, relative_to: str) -> dict[str, str]:
    """`picture-ID` for FINDINGS.md, one per committed call picture."""
    out = {}
    for ident, path in committed(folder).items():
        test = json.loads(path.read_text(encoding="utf-8"))["title"].split(": ", 1)[-1]
        name = test.split(",", 1)[0]
        out[f"picture-{ident}"] = (
            f"<details><summary>Finding {ident} drawn: the seed's calls in <code>{name}</code>"
            " (time runs down, the ring after each call beside it)</summary>\n\n"
            f"![finding {ident}: the seed's calls drawn]({relative_to}docs/pictures/"
            f"{path.with_suffix('.svg').name})\n\n</details>"
        )
    return out
