"""The audit's coverage table (FINDINGS.md, docs/coverage.toml) is complete and current.

It fails when a public name of the seed's classes has no row, when a row
names something the seed does not have, when a listed test does not exist,
when a row says "not examined", and when FINDINGS.md's table is stale; each
check is shown to catch a deliberately broken input.
"""

from __future__ import annotations

import dataclasses
import types
from pathlib import Path
from typing import Any

import pytest

from shmref.docgen import coverage, findings
from shmref.docgen.coverage import CoverageError

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "coverage.toml"

GOOD_ROW = """
[[row]]
name = "SingleWriterShmRingBuffer.allocate_buf"
how = ["Hypothesis search"]
tests = ["tests/findings/test_seed_audit.py::test_seed_defects_are_all_listed"]
result = "sound"
"""


@pytest.fixture(scope="module")
def seed_names() -> list[str]:
    module = coverage.seed_module()
    if module is None:
        pytest.skip("seed module unavailable")
    return coverage.public_names(module)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "coverage.toml"
    path.write_text(text, encoding="utf-8")
    return path


# -- the committed data ----------------------------------------------------------------------


def test_every_public_name_of_the_seed_has_a_row(seed_names: list[str]) -> None:
    coverage.check_names(coverage.load_rows(DATA), seed_names)


def test_no_name_is_left_not_examined() -> None:
    assert coverage.not_examined(coverage.load_rows(DATA)) == []


def test_every_listed_test_exists() -> None:
    coverage.check_tests_exist(coverage.load_rows(DATA), REPO)


def test_the_table_in_findings_md_is_current() -> None:
    assert findings.DOC.read_text(encoding="utf-8") == findings.generate()


# -- broken inputs are caught ----------------------------------------------------------------


class _Ring:
    def __init__(self) -> None:
        self.data_buffer_size = 1
        self.new_counter = 0  # a public attribute the table has no row for

    def allocate_buf(self, size: int) -> None: ...

    def new_method(self) -> None: ...  # a public method the table has no row for


@dataclasses.dataclass
class _Handle:
    max_object_size: int
    extra_field: int


def _module_with_new_names() -> types.ModuleType:
    module = types.ModuleType("fake_seed")
    module.SingleWriterShmRingBuffer = _Ring  # type: ignore[attr-defined]
    module.SingleWriterShmObjectStorage = type("S", (), {"put": lambda self: None})  # type: ignore[attr-defined]
    module.ShmObjectStorageHandle = _Handle  # type: ignore[attr-defined]
    module.ObjectSerde = type("O", (), {"serialize": lambda self: None})  # type: ignore[attr-defined]
    return module


def test_introspection_finds_new_methods_attributes_and_fields() -> None:
    names = coverage.public_names(_module_with_new_names())
    for name in (
        "SingleWriterShmRingBuffer.new_method",
        "SingleWriterShmRingBuffer.new_counter",
        "SingleWriterShmRingBuffer.__init__",
        "ShmObjectStorageHandle.extra_field",
        "SingleWriterShmObjectStorage.put",
        "ObjectSerde.serialize",
    ):
        assert name in names


def test_a_public_name_without_a_row_is_caught(seed_names: list[str]) -> None:
    rows = coverage.load_rows(DATA)
    with pytest.raises(CoverageError, match=r"no row for \['SingleWriterShmRingBuffer.new_method'"):
        coverage.check_names(rows, [*seed_names, "SingleWriterShmRingBuffer.new_method"])
    dropped = [r for r in rows if r.name != "SingleWriterShmObjectStorage.touch"]
    with pytest.raises(CoverageError, match="SingleWriterShmObjectStorage.touch"):
        coverage.check_names(dropped, seed_names)


def test_a_row_for_a_name_the_seed_lacks_is_caught(seed_names: list[str]) -> None:
    rows = coverage.load_rows(DATA)
    extra = coverage.Row("SingleWriterShmRingBuffer.gone", ("hand probe",), ("x",), "sound")
    with pytest.raises(CoverageError, match="does not have: \\['SingleWriterShmRingBuffer.gone'"):
        coverage.check_names([*rows, extra], seed_names)


def test_a_test_that_does_not_exist_is_caught(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_ROW.replace("test_seed_defects_are_all_listed", "test_nothing"))
    with pytest.raises(CoverageError, match="do not exist"):
        coverage.check_tests_exist(coverage.load_rows(path), REPO)


def test_a_not_examined_row_is_caught(tmp_path: Path) -> None:
    text = GOOD_ROW.replace('["Hypothesis search"]', '["not examined"]').replace(
        '["tests/findings/test_seed_audit.py::test_seed_defects_are_all_listed"]', "[]"
    )
    assert coverage.not_examined(coverage.load_rows(write(tmp_path, text))) == [
        "SingleWriterShmRingBuffer.allocate_buf"
    ]


BROKEN: dict[str, tuple[str, str]] = {
    "unknown way": (GOOD_ROW.replace("Hypothesis search", "guessing"), "how must be"),
    "examined without tests": (
        GOOD_ROW.replace(
            '["tests/findings/test_seed_audit.py::test_seed_defects_are_all_listed"]', "[]"
        ),
        "needs the tests",
    ),
    "malformed node id": (GOOD_ROW.replace("tests/findings/test_seed_audit.py::", ""), "node ids"),
    "missing field": (GOOD_ROW.replace('result = "sound"\n', ""), "exactly name, how"),
    "duplicate row": (GOOD_ROW + GOOD_ROW, "duplicate rows"),
    "not examined with tests": (
        GOOD_ROW.replace('["Hypothesis search"]', '["not examined"]'),
        "comes alone",
    ),
    "no rows": ("# nothing\n", "no [[row]] entries"),
    "a way no listed test does": (
        GOOD_ROW.replace('["Hypothesis search"]', '["Hypothesis search", "TLC model"]'),
        "no listed test does ['TLC model']",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_data_file_is_refused(tmp_path: Path, case: str) -> None:
    text, message = BROKEN[case]
    with pytest.raises(CoverageError, match=message.replace("[", r"\[")):
        coverage.load_rows(write(tmp_path, text))


def test_a_stale_table_is_caught(tmp_path: Path, capsys: Any) -> None:
    doc = tmp_path / "FINDINGS.md"
    doc.write_text(findings.DOC.read_text(encoding="utf-8"), encoding="utf-8")
    changed = write(
        tmp_path, DATA.read_text(encoding="utf-8").replace('"finding 21"', '"finding 21 (changed)"')
    )
    argv = ["--check", "--doc", str(doc), "--coverage-data", str(changed)]
    assert findings.main(argv) == 1
    assert "finding 21 (changed)" in capsys.readouterr().out


def test_a_broken_coverage_file_fails_make_findings(tmp_path: Path, capsys: Any) -> None:
    broken = write(tmp_path, BROKEN["unknown way"][0])
    assert findings.main(["--check", "--coverage-data", str(broken)]) == 2
    assert "how must be" in capsys.readouterr().err
