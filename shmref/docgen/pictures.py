"""The hazards' counterexamples drawn for FINDINGS.md and spec/README.md.

Each picture is a TLC counterexample of a hazard model (shmref.oracle.hazards)
in the trace format (docs/pictures/MODEL.json, committed), drawn by the one
renderer (shmref.render.svg) as docs/pictures/MODEL.svg. The counterexample
is the model's first shipped one (TLC's breadth-first search, made by `make
spec-traces`: shmref.traces.shipped), the same data the oracle replays, so
nothing committed depends on which counterexample a machine's TLC draws.
`make findings` rewrites the JSON from it, then redraws every SVG and the
documents' picture sections; the check compares data with data, byte for
byte, and needs no Java. The findings a seed test demonstrates are drawn
from their calls (shmref.docgen.callpictures).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from shmref.core.paths import SPEC_DIR, checkout
from shmref.docgen import callpictures
from shmref.render import svg
from shmref.render.tlctrace import from_hotkey, from_tlc
from shmref.render.traceformat import Trace, TraceFormatError
from shmref.traces import shipped
from shmref.traces.replay import read_constants


@dataclass(frozen=True)
class Picture:
    model: str  # the spec model whose counterexample is drawn
    findings: tuple[str, ...]  # the FINDINGS.md entries it illustrates
    caption: str


PICTURES: tuple[Picture, ...] = (
    Picture(
        "MCDoubleRead",
        ("H1",),
        "r1 reads its delivery of k1 twice; r2's read completes the count, free_unused "
        "reclaims the chunk, k2 is put in the same cell, and r1's read in flight returns "
        "k2's value for k1's handle.",
    ),
    Picture(
        "MCClearDrain",
        ("H2",),
        "clear() with a delivery pending: a read that begins after the clear still finds "
        "k1's header, a put reuses the cell under it, and the read returns the new value.",
    ),
    Picture(
        "MCClearInFlight",
        ("10",),
        "a read of a handle issued before clear() overlaps the reuse of its cell: a put "
        "places k2 at address 0 under the read, which returns k2's value (TLC's shortest "
        "counterexample begins the read after the clear, as H2's).",
    ),
    Picture(
        "MCIdWrap",
        ("H3", "5"),
        "ids wrap across clear() while a handle is outstanding: a new chunk takes the same "
        "id at the same address, and the held-back handle reads it.",
    ),
    Picture(
        "MCIdCollision",
        ("H4", "4"),
        "ID_MAX live chunks: the next put takes the id of a live chunk.",
    ),
    Picture(
        "MCLostReader",
        ("H5",),
        "a delivery that is never read: its chunk stays pinned, and free_unused can "
        "never reclaim it (a liveness counterexample).",
    ),
    Picture(
        "MCHotKey",
        ("H6",),
        "every delivery is read, yet the writer hands the oldest chunk out again before "
        "each put (get_cached), so every put that needs its room fails, for ever.",
    ),
)

REPO = checkout() or Path.cwd()  # docs/ lives in a shmref checkout
FOLDER = REPO / "docs" / "pictures"
SPEC_README = SPEC_DIR / "README.md"
SPEC_TO_REPO = "../"  # from spec/README.md to the checkout's root


def counterexample(picture: Picture) -> Trace:
    """The model's first shipped counterexample (TLC's breadth-first search),
    in the trace format."""
    found = shipped.counterexamples(picture.model)[0]
    constants = read_constants(SPEC_DIR / f"{picture.model}.cfg")
    title = f"{'/'.join(picture.findings)}: {picture.model}, TLC's counterexample"
    what = found.violation or "the property is violated"
    convert = from_hotkey if picture.model == "MCHotKey" else from_tlc
    return convert(found.trace, constants, title=title, case=picture.model, verdict=what)


def trace_path(picture: Picture, folder: Path = FOLDER) -> Path:
    return folder / f"{picture.model}.json"


def svg_path(picture: Picture, folder: Path = FOLDER) -> Path:
    return folder / f"{picture.model}.svg"


def refresh_traces(folder: Path = FOLDER) -> list[str]:
    """Rewrite each picture's JSON from its shipped counterexample; the
    names of those that changed."""
    written = []
    folder.mkdir(parents=True, exist_ok=True)
    for picture in PICTURES:
        try:
            trace = counterexample(picture)
        except shipped.ShippedError as exc:
            raise PictureError(str(exc)) from None
        path = trace_path(picture, folder)
        if not path.is_file() or path.read_text(encoding="utf-8") != trace.dumps():
            trace.save(path)
            written.append(path.name)
    return written


def drawings(folder: Path = FOLDER) -> dict[Path, str]:
    """Every picture's SVG as its committed JSON draws it (the findings'
    calls too: shmref.docgen.callpictures)."""
    try:
        out = callpictures.drawings(folder)
    except ValueError as exc:
        raise PictureError(str(exc)) from None
    for picture in PICTURES:
        try:
            trace = Trace.load(trace_path(picture, folder))
        except TraceFormatError as exc:
            raise PictureError(str(exc)) from None
        out[svg_path(picture, folder)] = svg.render(trace)
    return out


class PictureError(ValueError):
    """A picture's trace is missing or unreadable: one line naming it."""


def stale(folder: Path = FOLDER) -> list[str]:
    """The SVG files that are not what their JSON draws (missing ones too)."""
    wrong = []
    for path, text in drawings(folder).items():
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            wrong.append(path.name)
    return wrong


def write_drawings(folder: Path = FOLDER) -> list[str]:
    written = []
    for path, text in drawings(folder).items():
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(path.name)
    return written


def sections(relative_to: str) -> dict[str, str]:
    """The documents' picture sections: `picture-ID` per finding (FINDINGS.md)
    and `pictures` (all of them, spec/README.md); links relative to the
    document's folder (`relative_to`: the path from it to the repository)."""
    out: dict[str, str] = {}
    for picture in PICTURES:
        link = f"{relative_to}docs/pictures/{picture.model}.svg"
        block = (
            f"![{picture.model}: TLC's counterexample drawn]({link})\n\n"
            f"*{picture.model}, drawn from TLC's counterexample (`make findings`): "
            f"{picture.caption}*"
        )
        for finding in picture.findings:
            out[f"picture-{finding}"] = block
    out.update(callpictures.sections(FOLDER, relative_to))
    out["pictures"] = "\n\n".join(
        f"**{'/'.join(p.findings)}** ({p.model}): {p.caption}\n\n"
        f"![{p.model}]({relative_to}docs/pictures/{p.model}.svg)"
        for p in PICTURES
    )
    return out


def for_doc(doc_sections: Mapping[str, str], text: str) -> dict[str, str]:
    """The sections of `doc_sections` that `text` has markers for."""
    return {k: v for k, v in doc_sections.items() if f"<!-- BEGIN GENERATED: {k} " in text}


def update(
    check: bool,
    folder: Path = FOLDER,
    spec_readme: Path = SPEC_README,
    render_doc: Callable[[str, Mapping[str, str]], str] | None = None,
) -> int:
    """`make findings`' part for pictures: 0 current (or rewritten), 1 stale
    (--check), 2 a picture's trace is missing or unreadable; one line each."""
    try:
        if not check:
            for name in refresh_traces(folder):
                print(f"pictures: {name} rewritten from the shipped counterexample")
            for name in write_drawings(folder):
                print(f"pictures: {name} redrawn")
        wrong = [f"{name} is not what its JSON draws" for name in stale(folder)]
        wrong += [
            f"{trace_path(p, folder).name} is not the shipped counterexample"
            for p in PICTURES
            if trace_path(p, folder).read_text(encoding="utf-8") != counterexample(p).dumps()
        ]
        text = spec_readme.read_text(encoding="utf-8")
        wanted = text
        if render_doc is not None:
            wanted = render_doc(text, for_doc(sections(SPEC_TO_REPO), text))
    except (PictureError, shipped.ShippedError, OSError, ValueError) as exc:
        print(f"pictures: {exc}", file=sys.stderr)
        return 2
    if check:
        problems = list(wrong)
        if wanted != text:
            problems.append(f"{spec_readme.name}'s picture section is stale")
        for problem in problems:
            print(f"pictures: {problem}: run `make findings` and commit it", file=sys.stderr)
        return 1 if problems else 0
    if wanted != text:
        spec_readme.write_text(wanted, encoding="utf-8")
        print(f"{spec_readme} regenerated")
    return 0
