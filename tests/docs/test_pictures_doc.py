"""The hazards' pictures in FINDINGS.md and spec/README.md are current:
every SVG in docs/pictures is what its committed trace draws, byte for byte
(no Java needed), every picture has its place in the documents, and (with
TLC) every committed trace is TLC's counterexample of today's spec. Each
check is shown to catch a broken input."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shmref.docgen import callpictures, findings, pictures
from shmref.render import svg
from shmref.render.traceformat import Trace

REPO = Path(__file__).resolve().parents[2]


def test_every_svg_is_what_its_trace_draws() -> None:
    assert pictures.stale() == [], "docs/pictures is stale: run `make findings` and commit it"


def test_the_drawing_is_deterministic() -> None:
    for picture in pictures.PICTURES:
        trace = Trace.load(pictures.trace_path(picture))
        assert svg.render(trace) == svg.render(Trace.load(pictures.trace_path(picture)))


def test_every_picture_has_its_place_in_the_documents() -> None:
    doc = findings.DOC.read_text(encoding="utf-8")
    for picture in pictures.PICTURES:
        for finding in picture.findings:
            assert f"<!-- BEGIN GENERATED: picture-{finding} " in doc
            assert f"docs/pictures/{picture.model}.svg" in doc
    readme = pictures.SPEC_README.read_text(encoding="utf-8")
    wanted = pictures.for_doc(pictures.sections(pictures.SPEC_TO_REPO), readme)
    assert readme == findings.render(readme, wanted)
    for picture in pictures.PICTURES:
        assert f"{pictures.SPEC_TO_REPO}docs/pictures/{picture.model}.svg" in readme


def test_a_stale_svg_is_caught_and_redrawn(tmp_path: Path) -> None:
    folder = tmp_path / "pictures"
    shutil.copytree(pictures.FOLDER, folder)
    target = pictures.svg_path(pictures.PICTURES[0], folder)
    target.write_text(target.read_text().replace("put(", "pot(", 1))
    (pictures.svg_path(pictures.PICTURES[1], folder)).unlink()
    assert pictures.stale(folder) == [
        pictures.PICTURES[0].model + ".svg",
        pictures.PICTURES[1].model + ".svg",
    ]
    pictures.write_drawings(folder)
    assert pictures.stale(folder) == []


def test_a_missing_trace_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "pictures"
    shutil.copytree(pictures.FOLDER, folder)
    pictures.trace_path(pictures.PICTURES[2], folder).write_text("{}")
    with pytest.raises(pictures.PictureError, match=pictures.PICTURES[2].model):
        pictures.drawings(folder)
    assert pictures.update(True, folder=folder) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pictures: ")


def test_check_mode_reports_a_stale_picture(tmp_path: Path) -> None:
    folder = tmp_path / "pictures"
    shutil.copytree(pictures.FOLDER, folder)
    assert pictures.update(True, folder=folder, render_doc=findings.render) == 0
    target = pictures.svg_path(pictures.PICTURES[0], folder)
    target.write_text(target.read_text() + "<!-- edited -->")
    assert pictures.update(True, folder=folder, render_doc=findings.render) == 1
    assert target.read_text().endswith("<!-- edited -->")  # --check never writes


@pytest.mark.parametrize("picture", pictures.PICTURES, ids=lambda p: p.model)
def test_the_committed_trace_is_the_shipped_counterexample(picture: pictures.Picture) -> None:
    """Data compared with data: the picture's JSON is the model's first
    shipped counterexample (TLC's breadth-first search), whatever TLC on this
    machine would draw today."""
    committed = pictures.trace_path(picture).read_text(encoding="utf-8")
    assert committed == pictures.counterexample(picture).dumps(), (
        f"{picture.model}.json is not the shipped counterexample: "
        "run `make findings` and commit docs/pictures"
    )


def test_check_mode_reports_a_picture_that_is_not_the_shipped_counterexample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "pictures"
    shutil.copytree(pictures.FOLDER, folder)
    target = pictures.trace_path(pictures.PICTURES[0], folder)
    target.write_text(target.read_text().replace('"k1"', '"k2"'))
    assert pictures.update(True, folder=folder, render_doc=findings.render) == 1
    assert "is not the shipped counterexample" in capsys.readouterr().err


# -- the findings a seed test demonstrates, drawn from its calls -----------------------------


def test_every_finding_demonstrated_in_process_has_its_calls_drawn() -> None:
    drawn_by_tlc = {f for p in pictures.PICTURES for f in p.findings}
    wanted = callpictures.wanted(findings.load_findings(), drawn_by_tlc)
    committed = callpictures.committed(pictures.FOLDER)
    assert len(committed) >= 20 and set(committed) <= {p.finding for p in wanted}
    doc = findings.DOC.read_text(encoding="utf-8")
    for ident, path in committed.items():
        assert f"<!-- BEGIN GENERATED: picture-{ident} " in doc
        assert f"docs/pictures/{path.with_suffix('.svg').name}" in doc
        trace = Trace.load(path)
        assert trace.source == "calls" and trace.steps[-1].diverged
        assert "0x" not in path.read_text(encoding="utf-8").replace("0x\u2026", "")


def test_a_finding_picture_without_its_place_is_one_line(tmp_path: Path) -> None:
    """Broken input: FINDINGS.md without one picture's markers."""
    ident = next(iter(callpictures.committed(pictures.FOLDER)))
    text = findings.DOC.read_text(encoding="utf-8")
    start = text.index(f"<!-- BEGIN GENERATED: picture-{ident} ")
    end = text.index(f"<!-- END GENERATED: picture-{ident} -->")
    doc = tmp_path / "FINDINGS.md"
    doc.write_text(text[:start] + text[end + len(f"<!-- END GENERATED: picture-{ident} -->") :])
    with pytest.raises(findings.FindingsError, match=f"picture-{ident}: a finding's picture"):
        findings.generate(doc)


@pytest.mark.slow
def test_the_committed_calls_are_what_the_seed_does_today(tmp_path: Path) -> None:
    """Recorded afresh (the seed's tests, one pytest), every picture's JSON is
    the committed one: neutral names make the recording repeatable."""
    drawn_by_tlc = {f for p in pictures.PICTURES for f in p.findings}
    wanted = callpictures.wanted(findings.load_findings(), drawn_by_tlc)
    recorded = callpictures.record(wanted, REPO)
    committed = callpictures.committed(pictures.FOLDER)
    assert set(recorded) == set(committed)
    for ident, trace in recorded.items():
        assert trace.dumps() == committed[ident].read_text(encoding="utf-8"), (
            f"finding-{ident}.json is not what the seed's test does today: run `make findings`"
        )
