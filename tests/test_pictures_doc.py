"""The hazards' pictures in FINDINGS.md and spec/README.md are current:
every SVG in docs/pictures is what its committed trace draws, byte for byte
(no Java needed), every picture has its place in the documents, and (with
TLC) every committed trace is TLC's counterexample of today's spec. Each
check is shown to catch a broken input."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shmref.docgen import findings, pictures
from shmref.render import svg
from shmref.render.model import Trace

REPO = Path(__file__).resolve().parents[1]


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
    assert readme == findings.render(readme, pictures.for_doc(pictures.sections("../../"), readme))
    for picture in pictures.PICTURES:
        assert f"../../docs/pictures/{picture.model}.svg" in readme


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


@pytest.mark.tlc
@pytest.mark.parametrize("picture", pictures.PICTURES, ids=lambda p: p.model)
def test_the_committed_trace_is_tlcs_counterexample(picture: pictures.Picture) -> None:
    """TLC's output is cached by the spec's hash: a run only after the spec changed."""
    trace = pictures.counterexample(picture, run_missing=True)
    assert trace is not None, f"TLC found no counterexample for {picture.model}"
    committed = pictures.trace_path(picture).read_text(encoding="utf-8")
    assert committed == trace.dumps(), (
        f"{picture.model}.json is not TLC's counterexample of today's spec: "
        "run `make findings` and commit docs/pictures"
    )
