"""How spec/ is kept (issue 18): one model module per spec, the variants as
cfgs, and no spec module over about 300 lines.  Each check is also run on a
deliberately broken copy of spec/ to show that it catches what it claims."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shmref.tlc import manifest

SPEC = Path(__file__).resolve().parents[2] / "spec"
MODULE_LIMIT = 300  # lines


def test_no_model_module_duplicates_another() -> None:
    assert manifest.duplicate_bodies(SPEC) == []


def test_a_duplicated_model_module_is_caught(tmp_path: Path) -> None:
    spec_dir = tmp_path / "spec"
    shutil.copytree(SPEC, spec_dir)
    # the same body under another header and other comments and spacing
    text = (spec_dir / "MCStorage.tla").read_text()
    copy = text.replace("MODULE MCStorage", "MODULE MCStorageCopy").replace(
        "(* The one model module", "(* A copy of the one model module"
    )
    copy = copy.replace("EXTENDS ShmObjectStorage", "EXTENDS   ShmObjectStorage  \\* again")
    (spec_dir / "MCStorageCopy.tla").write_text(copy)
    assert manifest.duplicate_bodies(spec_dir) == [("MCStorage.tla", "MCStorageCopy.tla")]


def test_a_different_body_is_not_a_duplicate(tmp_path: Path) -> None:
    spec_dir = tmp_path / "spec"
    shutil.copytree(SPEC, spec_dir)
    text = (spec_dir / "MCRing.tla").read_text().replace("MODULE MCRing", "MODULE MCRingOther")
    (spec_dir / "MCRingOther.tla").write_text(
        text.replace("EXTENDS RingBuffer", "EXTENDS RingBuffer\nX == 1")
    )
    assert manifest.duplicate_bodies(spec_dir) == []


@pytest.mark.parametrize(
    ("text", "body"),
    [
        (
            "---- MODULE M ----\n(* a (* nested *) comment *)\nEXTENDS A \\* why\n====\n",
            "EXTENDS A",
        ),
        ("---- MODULE M ----\nEXTENDS A\n\nX ==\n    1\n=====\n", "EXTENDS A X == 1"),
    ],
)
def test_module_body_drops_comments_and_spacing(text: str, body: str) -> None:
    assert manifest.module_body(text) == body


def test_no_spec_module_is_over_the_limit() -> None:
    assert manifest.long_modules(SPEC, MODULE_LIMIT) == []


def test_a_long_module_is_caught(tmp_path: Path) -> None:
    spec_dir = tmp_path / "spec"
    shutil.copytree(SPEC, spec_dir)
    (spec_dir / "Long.tla").write_text("---- MODULE Long ----\n" + "\n" * 400 + "====\n")
    assert manifest.long_modules(spec_dir, MODULE_LIMIT) == [("Long.tla", 402)]


def test_model_files_come_from_the_manifest(tmp_path: Path) -> None:
    listed = manifest.load_manifest(SPEC / "models.toml")
    for model in listed.models:
        tla, cfg = manifest.model_files(model.name, SPEC)
        assert tla.is_file() and cfg.is_file(), model.name
    # a shared module: the cfg names the model, the module does not
    assert manifest.model_files("MCClearDrain", SPEC) == (
        SPEC / "MCStorage.tla",
        SPEC / "MCClearDrain.cfg",
    )
    with pytest.raises(manifest.ManifestError, match="no model MCNoSuchModel"):
        manifest.model_files("MCNoSuchModel", SPEC)
