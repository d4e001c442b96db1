"""DIR/conformance.html: the report as one page that opens from the file
system with no network (styles, scripts and pictures inline), drawn from the
run's conformance.json and the traces its checks left in DIR/timelines.

    python -m shmref render DIR     (re)write DIR/conformance.html

At the top the levels, then what differs: every property whose result is
not the seed's or not what the expectations file (--expect) says, each
linked to its drawing; then a grid of every property (those first), the
implementation's status beside the seed's, an expected failure marked apart
from an unexpected one, filterable by level and status; below, every
failing property (those that differ first) with each failure's trace
drawn as a timeline over the ring (shmref.render.svg), its text, and its
replay command with a copy button.
What cannot be drawn (no trace recorded, a trace file that cannot be read)
is said in one line on the page and on the terminal, never a broken page.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

import jinja2

from shmref.core.files import write_atomically
from shmref.core.levels import (
    ASSUMPTION,
    BAD,
    NOT_RUN,
    PASS,
    SEED_SILENT,
    SHOWN_FAILURES,
    SKIP,
)
from shmref.render import sink, svg
from shmref.render.traceformat import Trace

PAGE = "conformance.html"
STATUS_ORDER = (*BAD, ASSUMPTION, PASS, SKIP, NOT_RUN)  # the page's order: failures first


@dataclass
class Failure:
    case: str
    text: str
    command: str
    picture: str = ""  # inline SVG
    notice: str = ""  # why there is no picture, or what it leaves out


@dataclass
class Property:
    anchor: str
    level: str
    name: str
    what: str
    status: str
    seed: str
    cases: str
    detail: str
    failures: list[Failure] = field(default_factory=list)
    more: list[str] = field(default_factory=list)  # failing cases beyond SHOWN_FAILURES
    open: bool = False  # shown open on load (the first drawn failure)
    expected: str = ""  # what the expectations file says of it ("" if it is not listed)
    surprise: str = ""  # the results the file does not expect: 'new failure', ...

    @property
    def headline(self) -> str:
        """What went wrong, in one line for the table (its first failure's
        message): read where the property is listed, not one click away."""
        said = failure_headline(self.failures[0].text) if self.failures else ""
        return "" if said in self.detail else said

    @property
    def differs(self) -> bool:
        """Its result is not the seed's."""
        return self.seed not in SEED_SILENT and self.status != self.seed

    @property
    def leads(self) -> bool:
        return self.differs or bool(self.surprise)


@dataclass
class Page:
    impl: str
    quick: bool
    seconds: float
    ok: bool
    levels: list[dict[str, Any]]
    properties: list[Property]
    not_run: list[str]
    notices: list[str]  # page-wide problems, each one line
    expectations: str = ""  # the file the results were judged by ("" if none)
    segments: str = ""  # which /dev/shm the run used (shmref.oracle.privateshm)

    @property
    def has_seed(self) -> bool:
        """Some property has the seed's result beside it (the baseline ran)."""
        return any(p.seed not in SEED_SILENT for p in self.properties)

    @property
    def leading(self) -> list[Property]:
        """What differs from the expectations, then from the seed."""
        return sorted((p for p in self.properties if p.leads), key=lambda p: not p.surprise)

    def mark(self, prop: Property) -> str:
        """'expected' or 'unexpected' for a failure judged by a file, else ''."""
        if not self.expectations or prop.status not in BAD:
            return ""
        return "unexpected" if prop.surprise else "expected"

    @property
    def statuses(self) -> list[str]:
        present = {p.status for p in self.properties}
        return [s for s in STATUS_ORDER if s in present] + sorted(present - set(STATUS_ORDER))


def build_page(report: dict[str, Any], traces: dict[str, Trace], notices: list[str]) -> Page:
    """The page's content from conformance.json's data and the traces by case."""
    properties: list[Property] = []
    levels = []
    missing: list[str] = []  # failing cases with no recorded trace
    long: list[str] = []  # those drawn in part
    judged = report.get("expectations") or {}
    expected, surprises = judgements(judged)
    for level, data in report.get("levels", {}).items():
        checks = data.get("checks", [])
        failing = sum(1 for c in checks if c.get("status") in BAD)
        levels.append({"name": level, **data, "failing": failing, "count": len(checks)})
        for check in checks:
            prop = property_from(check, level, f"p{len(properties) + 1}")
            prop.expected = " or ".join(expected.get(prop.name, []))
            prop.surprise = "; ".join(surprises.get(prop.name, []))
            failures = check.get("failures") or []
            for raw in failures[:SHOWN_FAILURES]:
                prop.failures.append(drawn_failure(raw, traces, missing, long))
            prop.more = [str(f.get("case", "")) for f in failures[SHOWN_FAILURES:]]
            properties.append(prop)
    properties.sort(key=lambda p: not p.leads)  # what differs first, each in level order
    drawn = [p for p in properties if any(f.picture for f in p.failures)]
    first = drawn or [p for p in properties if p.failures]
    if first:
        first[0].open = True
    notices += drawing_notices(missing, long)
    return Page(
        str(report.get("impl", "?")),
        bool(report.get("quick")),
        float(report.get("seconds", 0)),
        bool(report.get("ok")),
        levels,
        properties,
        [str(n) for n in report.get("not_run", [])],
        notices,
        str(judged.get("file", "")),
        segments_line(report.get("segments")),
    )


def judgements(judged: dict[str, Any]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """By property: the statuses the expectations file allows, and the
    results it does not expect (each with its case)."""
    expected: dict[str, list[str]] = {}
    for entry in judged.get("expected", []):
        statuses = expected.setdefault(str(entry.get("property", "")), [])
        statuses += [s for s in entry.get("status", []) if s not in statuses]
    surprises: dict[str, list[str]] = {}
    for found in judged.get("surprises", []):
        case = f" ({found['case']})" if found.get("case") else ""
        surprises.setdefault(str(found.get("property", "")), []).append(found["kind"] + case)
    return expected, surprises


def property_from(check: dict[str, Any], level: str, anchor: str) -> Property:
    return Property(
        anchor,
        level,
        str(check.get("name", "?")),
        str(check.get("what", "")),
        str(check.get("status", "?")),
        str(check.get("seed", "")),
        str(check.get("cases", "")),
        str(check.get("detail", "")),
    )


HEADLINE = 200  # characters of a failure's message shown in the table
# a line that names what failed: an exception, pytest's Failed, the process layer's
NAMED = re.compile(r"^(?:[\w.]*(?:Error|Exception|Exit|Interrupt)|Failed|shmref\.\w+): ")


def failure_headline(text: str) -> str:
    """A failure's message: the last line that names an exception or a
    pytest failure (`E   ...` lines taken without their mark), else the
    first line that says something."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    said = [line[1:].strip() if line.startswith("E ") else line for line in lines]
    named = [line for line in said if NAMED.match(line)]
    found = named[-1] if named else (said[0] if said else "")
    return found if len(found) <= HEADLINE else found[: HEADLINE - 3] + "..."


def drawn_failure(
    raw: dict[str, Any], traces: dict[str, Trace], missing: list[str], long: list[str]
) -> Failure:
    """A failure with its trace drawn, or a notice of why not or of what the
    drawing leaves out (its case added to `missing` or `long`)."""
    failure = Failure(
        str(raw.get("case", "")), str(raw.get("trace", "")), str(raw.get("command", ""))
    )
    trace = traces.get(failure.case)
    if trace is None:
        failure.notice = "no trace to draw for this failure: its text is below"
        if expects_trace(failure.text):
            failure.notice = "the trace of this failure was not recorded: its text is below"
            missing.append(failure.case)
        return failure
    failure.picture = svg.render(trace)
    left = svg.shown_steps(trace).left_out
    if left:
        total = len(trace.steps) + trace.omitted
        failure.notice = (
            f"this trace has {total} steps: its start and its "
            f"divergence are drawn, {left} steps in between are left out"
        )
        long.append(failure.case)
    return failure


def drawing_notices(missing: list[str], long: list[str]) -> list[str]:
    """The page-wide lines on failures not drawn or drawn in part."""
    notices = []
    if missing:
        notices.append(
            f"{len(missing)} failing case(s) whose steps were not recorded (text only): "
            + ", ".join(missing[:6])
            + (", ..." if len(missing) > 6 else "")
        )
    if long:
        notices.append(
            f"{len(long)} trace(s) too long to draw whole (start and divergence drawn): "
            + ", ".join(long[:6])
        )
    return notices


def segments_line(segments: Any) -> str:
    """The report's `segments` as one line ("" for a report without it)."""
    if not isinstance(segments, dict):
        return ""
    return f"{segments.get('way', '?')}, {segments.get('detail', '')}"


SEQUENCES = ("Falsifying example", "state = ", "replay of ", "TLC counterexample", "REJECTED")


def expects_trace(text: str) -> bool:
    """A failure whose text tells a sequence of steps (a falsifying example,
    a replay, a counterexample, a rejected recording) should have been drawn;
    a single call's check has nothing to draw."""
    return any(marker in text for marker in SEQUENCES)


def environment() -> jinja2.Environment:
    loader = jinja2.FunctionLoader(
        lambda name: (files("shmref.render") / "templates" / name).read_text(encoding="utf-8")
    )
    return jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined)


def page_html(page: Page) -> str:
    template = environment().get_template("report.html.j2")
    return template.render(page=page, colours=svg.COLOURS, meaning=svg.MEANING, bad=BAD) + "\n"


def write_report(out: Path, quiet: bool = False) -> Path | None:
    """Write out/conformance.html from out/conformance.json and out/timelines;
    each problem is one line on stderr (and on the page if there is one).
    Returns the page's path, or None if it could not be written."""
    notices: list[str] = []
    source = out / "conformance.json"
    try:
        report = json.loads(source.read_text(encoding="utf-8"))
        if not isinstance(report, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        report = {"impl": "?", "levels": {}}
        notices.append(f"{source} could not be read ({_reason(exc)}): no properties to show")
    traces, problems = sink.load_all(out / sink.FOLDER)
    notices += problems
    page = build_page(report, traces, notices)
    path = out / PAGE
    for notice in page.notices:
        if not quiet:
            print(f"shmref: {PAGE}: {notice}", file=sys.stderr)
    try:
        write_atomically(path, page_html(page))
    except OSError as exc:
        print(f"shmref: cannot write {path}: {_reason(exc)}", file=sys.stderr)
        return None
    return path


def _reason(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    usage = "usage: python -m shmref render DIR  (a conformance report folder)"
    if args in (["-h"], ["--help"]):
        print(usage)
        return 0
    if len(args) != 1 or args[0].startswith("-"):
        print(usage, file=sys.stderr)
        return 2
    out = Path(args[0])
    if not (out / "conformance.json").is_file():
        print(f"shmref: {out}: no conformance.json here (not a report folder)", file=sys.stderr)
        return 2
    path = write_report(out)
    if path is None:
        return 2
    print(f"page: {path}")
    return 0
