"""A trace drawn as SVG: a timeline with a lane for the writer and one per
reader (time runs down, one row per step), the ring beside each step as a bar
of chunks, the spec's ring beside the store's where they were compared.

Hand-written because no drawing library draws this kind of picture. The
output depends only on the trace (integers, no clock, no random ids), so the
pictures committed in docs/ are checked byte for byte.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from xml.sax.saxutils import escape

from shmref.render.traceformat import SECRET_BYTES, STATES, Chunk, Ring, Step, Trace

MAX_STEPS = 60  # longer traces: their start and the steps up to the divergence
HEAD_STEPS = 12
AFTER_DIVERGENCE = 3
FONT = 11
PAD, NUM_W, LANE_W, GAP = 12, 34, 210, 16
CHAR_W = 6.7  # the monospace font's advance at FONT
ROW_H, BOX_H, NOTE_H, SKIP_H = 46, 36, 16, 26
BAR_H, SECRET_W = 22, 14
COLOURS = {
    "live": "#4e79a7",
    "read": "#a0cbe8",
    "touched": "#f28e2b",
    "reclaimable": "#59a14f",
    "free": "#f4f4f4",
}
MEANING = {
    "live": "live: handed out, no read counted yet",
    "read": "read: some of its reads counted",
    "touched": "touched: held by the writer",
    "reclaimable": "reclaimable: every read counted, free_unused may take it",
    "free": "free",
}
TEXT_ON = {"live": "#ffffff", "reclaimable": "#ffffff"}
RED, INK, GREY = "#c0392b", "#222222", "#888888"


@dataclass(frozen=True)
class Shown:
    """Which steps are drawn: all, or the start and the divergence."""

    rows: tuple[int | None, ...]  # positions in trace.steps; None: the left-out gap
    left_out: int


def shown_steps(trace: Trace, limit: int = MAX_STEPS) -> Shown:
    total = len(trace.steps)
    if trace.omitted and trace.omitted_after is not None and total <= limit:
        after = max(0, min(trace.omitted_after, total))  # the source kept only these steps
        return Shown((*range(after), None, *range(after, total)), trace.omitted)
    if total <= limit:
        return Shown(tuple(range(total)), 0)
    mark = trace.diverged_at if trace.diverged_at is not None else total - 1
    tail_end = min(total, mark + 1 + AFTER_DIVERGENCE)
    tail_start = max(HEAD_STEPS, tail_end - (limit - HEAD_STEPS))
    rows: list[int | None] = list(range(HEAD_STEPS))
    if tail_start > HEAD_STEPS:
        rows.append(None)
    rows += range(tail_start, tail_end)
    return Shown(tuple(rows), total - sum(1 for r in rows if r is not None))


def render(trace: Trace, limit: int = MAX_STEPS) -> str:
    """The trace as one <svg> element (standalone: an .svg file, or inline)."""
    return Drawing(trace, limit).svg()


class Drawing:
    def __init__(self, trace: Trace, limit: int) -> None:
        self.trace = trace
        self.shown = shown_steps(trace, limit)
        readers = list(trace.readers)
        for step in trace.steps:
            if step.actor != "writer" and step.actor not in readers:
                readers.append(step.actor)
        self.lanes = ["writer", *readers]
        self.n = max(int(trace.constants.get("N", 0)), _span(trace), 1)
        self.cell = max(14, min(44, 400 // self.n))
        self.with_spec = any(s.spec is not None for s in trace.steps)
        self.bar_w = SECRET_W + self.cell * self.n
        self.lanes_x = PAD + NUM_W
        self.ring_x = self.lanes_x + len(self.lanes) * LANE_W + GAP
        self.spec_x = self.ring_x + self.bar_w + GAP
        right = (self.spec_x if self.with_spec else self.ring_x) + self.bar_w + 20 + PAD
        self.width = max(right, 900)
        digest = hashlib.sha256(trace.dumps().encode()).hexdigest()[:8]
        self.uid = f"t{digest}"

    # -- the whole picture ---------------------------------------------------------------

    def svg(self) -> str:
        parts: list[str] = []
        y = top = self.header(parts, PAD)
        for position in self.shown.rows:
            if position is None:
                y = self.gap_row(parts, y)
            else:
                y = self.step_row(parts, self.trace.steps[position], y)
        if not self.trace.steps:
            parts.append(_text(self.lanes_x, y + 14, "(this trace has no steps)", fill=GREY))
            y += ROW_H
        height = y + PAD
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" id="{self.uid}" '
            f'width="{self.width}" height="{height}" viewBox="0 0 {self.width} {height}" '
            f'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="{FONT}" '
            f'data-steps="{len(self.trace.steps) + self.trace.omitted}" '
            f'data-left-out="{self.shown.left_out}">'
        )
        title = f"<title>{escape(self.trace.title)}</title>"
        background = f'<rect width="{self.width}" height="{height}" fill="#ffffff"/>'
        lanes = self.lane_lines(top, height - PAD)
        return "\n".join([head, title, background, *lanes, *parts, "</svg>"]) + "\n"

    def header(self, parts: list[str], y: int) -> int:
        trace = self.trace
        title = _cut(trace.title, _fits(self.width - 2 * PAD, FONT + 2))
        parts.append(_text(PAD, y + 12, title, weight="bold", size=FONT + 2))
        y += 20
        verdict = trace.verdict or "(no verdict recorded)"
        parts.append(_text(PAD, y + 10, _cut(verdict, _fits(self.width - 2 * PAD)), fill=RED))
        y += 18
        left = f"; {self.shown.left_out} steps left out" if self.shown.left_out else ""
        unit = trace.constants.get("UNIT", 16)
        facts = f"a ring of {self.n} units of {unit} B; " + ", ".join(
            f"{k}={v}" for k, v in sorted(trace.constants.items())
        )
        steps = len(trace.steps) + trace.omitted
        parts.append(_text(PAD, y + 10, f"{trace.source}: {steps} steps{left}; {facts}", GREY))
        y += 18
        x = PAD
        for state in STATES:
            parts.append(_rect(x, y, 12, 12, COLOURS[state], stroke=GREY))
            parts.append(_text(x + 16, y + 10, state))
            x += 16 + 8 * len(state) + 14
        parts.append(_rect(x, y, 12, 12, "#555555"))
        parts.append(_text(x + 16, y + 10, f"secret ({SECRET_BYTES} B)"))
        x += 130
        parts.append(_text(x, y + 10, "s/e: data_buffer_start/end  \u21bb: the lap wraps"))
        y += 22
        y += 6
        parts.append(_text(PAD, y + 12, "#", fill=GREY))
        for k, lane in enumerate(self.lanes):
            parts.append(_text(self.lanes_x + k * LANE_W + 4, y + 12, lane, weight="bold"))
        parts.append(_text(self.ring_x, y + 12, self.trace.ring_label, weight="bold"))
        if self.with_spec:
            parts.append(_text(self.spec_x, y + 12, "spec", weight="bold"))
        return y + 22

    def lane_lines(self, top: int, bottom: int) -> list[str]:
        return [
            f'<line x1="{self.lanes_x + k * LANE_W + LANE_W // 2}" y1="{top}" '
            f'x2="{self.lanes_x + k * LANE_W + LANE_W // 2}" y2="{bottom}" '
            'stroke="#dddddd" stroke-dasharray="3,3"/>'
            for k in range(len(self.lanes))
        ]

    # -- one step ------------------------------------------------------------------------

    def step_row(self, parts: list[str], step: Step, y: int) -> int:
        height = ROW_H + (NOTE_H if step.note else 0)
        marked = step.diverged
        if marked:
            parts.append(
                f'<rect class="diverged" x="{PAD - 4}" y="{y - 3}" '
                f'width="{self.width - 2 * PAD + 8}" height="{height}" fill="#fdecea" '
                f'stroke="{RED}" stroke-width="2" rx="4"/>'
            )
        parts.append(_text(PAD, y + 22, str(step.index), fill=GREY))
        lane = self.lanes.index(step.actor) if step.actor in self.lanes else 0
        x = self.lanes_x + lane * LANE_W + 4
        unusual = step.outcome != "ok" or (step.expected not in (None, step.outcome))
        fill = "#fff3cd" if unusual and not marked else "#ffffff"
        parts.append(
            f'<g class="step" data-action="{escape(step.action)}">'
            f"<title>{escape(_step_title(step))}</title>"
            + _rect(x, y, LANE_W - 8, BOX_H, fill, stroke=RED if marked else "#999999", r=5)
            + _text(x + 5, y + 14, _cut(step.call(), _fits(LANE_W - 14)), weight="bold")
            + _text(x + 5, y + 29, _cut(_outcome_text(step), _fits(LANE_W - 14)))
            + "</g>"
        )
        if step.ring is not None:
            parts.append(self.ring_bar(step.ring, self.ring_x, y + 4, "store"))
        if step.spec is not None:
            parts.append(self.ring_bar(step.spec, self.spec_x, y + 4, "spec"))
        if step.note:
            colour = RED if marked else INK
            parts.append(
                _text(
                    self.lanes_x + 4,
                    y + ROW_H + 6,
                    _cut(step.note, _fits(self.width - self.lanes_x - PAD)),
                    colour,
                )
            )
        if self.trace.lasso is not None and step.index == self.trace.lasso:
            parts.append(_text(PAD + 8, y + 36, "\u21ba", fill=RED, size=FONT + 4))
        return y + height

    def gap_row(self, parts: list[str], y: int) -> int:
        text = f"\u2026 {self.shown.left_out} steps left out \u2026"
        parts.append(
            f'<g class="left-out"><rect x="{PAD}" y="{y}" width="{self.width - 2 * PAD}" '
            f'height="{SKIP_H - 6}" fill="#eeeeee" rx="3"/>'
            + _text(self.lanes_x + 4, y + 14, text, fill=INK)
            + "</g>"
        )
        return y + SKIP_H

    # -- the ring ------------------------------------------------------------------------

    def ring_bar(self, ring: Ring, x: int, y: int, which: str) -> str:
        cell, n = self.cell, self.n
        out = [f'<g class="ring ring-{which}">']
        out.append(_rect(x, y, SECRET_W, BAR_H, "#555555", title=f"the {SECRET_BYTES}-byte secret"))
        data_x = x + SECRET_W
        out.append(_rect(data_x, y, cell * n, BAR_H, COLOURS["free"], stroke="#bbbbbb"))
        for k in range(1, n):
            out.append(
                f'<line x1="{data_x + k * cell}" y1="{y + BAR_H - 4}" x2="{data_x + k * cell}" '
                f'y2="{y + BAR_H}" stroke="#cccccc"/>'
            )
        for chunk in ring.chunks:
            out.append(self.chunk(chunk, data_x, y))
        out += self.markers(ring, data_x, y)
        out.append("</g>")
        return "".join(out)

    def chunk(self, chunk: Chunk, data_x: int, y: int) -> str:
        cell, n = self.cell, self.n
        start = chunk.address % n
        width = min(chunk.size, n - start) * cell
        label = f"{chunk.id}" + (f" {chunk.key}" if chunk.key else "")
        fits = max(_fits(width - 4, FONT - 1), 1)
        colour = TEXT_ON.get(chunk.state, INK)
        count = "" if chunk.count is None else f", count {chunk.count}/{chunk.owed}"
        title = (
            f"id {chunk.id}, key {chunk.key or '?'}, address {chunk.address}, "
            f"size {chunk.size} units, {chunk.state}{count}"
        )
        return (
            f'<g class="chunk state-{chunk.state}"><title>{escape(title)}</title>'
            + _rect(data_x + start * cell + 1, y + 1, width - 2, BAR_H - 2, COLOURS[chunk.state])
            + _text(data_x + start * cell + 3, y + 15, label[:fits], fill=colour, size=FONT - 1)
            + "</g>"
        )

    def markers(self, ring: Ring, data_x: int, y: int) -> list[str]:
        out: list[str] = []
        if ring.start is None or ring.end is None:
            return out
        n, cell = self.n, self.cell
        for value, label, dy in ((ring.start, "s", BAR_H + 9), (ring.end, "e", BAR_H + 9)):
            at = value % n if not (label == "e" and value % n == 0 and value) else n
            mx = data_x + at * cell
            out.append(
                f'<path d="M{mx} {y + BAR_H} l-3 5 h6 z" fill="{INK}"/>'
                + _text(mx + (4 if label == "s" else -10), y + dy, label, size=FONT - 2)
            )
        # the live region [start, end) crosses the end of the buffer: a lap
        wraps = (
            bool(ring.chunks) and ring.end > ring.start and ring.start // n != (ring.end - 1) // n
        )
        if wraps:
            out.append(
                _text(data_x + n * cell + 3, y + 15, "\u21bb", fill=RED, size=FONT + 2)
                + f"<title>lap: start {ring.start}, end {ring.end} (N = {n})</title>"
            )
        return out


def _span(trace: Trace) -> int:
    furthest = 0
    for step in trace.steps:
        for ring in (step.ring, step.spec):
            for chunk in ring.chunks if ring else ():
                furthest = max(furthest, chunk.address + chunk.size)
    return furthest


def _outcome_text(step: Step) -> str:
    text = "\u2192 " + step.outcome + (f" {step.result}" if step.result else "")
    if step.expected is not None and step.expected != step.outcome:
        text += f" (spec: {step.expected})"
    return text


def _step_title(step: Step) -> str:
    lines = [f"step {step.index}, {step.actor}: {step.call()}", _outcome_text(step)]
    return "\n".join(lines + ([step.note] if step.note else []))


def _fits(pixels: int, size: int = FONT) -> int:
    """How many characters of the monospace font fit in `pixels`."""
    return int(pixels / (CHAR_W * size / FONT))


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 1)] + "\u2026"


def _text(x: int, y: int, text: str, fill: str = INK, weight: str = "", size: int = FONT) -> str:
    bold = ' font-weight="bold"' if weight else ""
    big = f' font-size="{size}"' if size != FONT else ""
    return f'<text x="{x}" y="{y}" fill="{fill}"{bold}{big}>{escape(text)}</text>'


def _rect(
    x: int,
    y: int,
    w: int,
    h: int,
    fill: str,
    stroke: str = "",
    r: int = 0,
    title: str = "",
) -> str:
    line = f' stroke="{stroke}"' if stroke else ""
    corner = f' rx="{r}"' if r else ""
    tip = f"<title>{escape(title)}</title>" if title else ""
    return (
        f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{fill}"{line}{corner}>{tip}</rect>'
    )
