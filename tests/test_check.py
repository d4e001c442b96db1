"""`make check` itself: the quick models come out as the table says, and a
deliberately broken spec makes check.py fail.

Needs Java and the TLC jar (skipped otherwise).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shmref import check
from shmref.tlc import TlcError, find_jar, find_java

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "spec"

try:
    find_java()
    find_jar()
except TlcError as exc:  # pragma: no cover - depends on the machine
    pytest.skip(f"TLC not available: {exc}", allow_module_level=True)


def run_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shmref.check", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def broken_copy(tmp_path: Path, old: str, new: str) -> Path:
    """spec/ copied to tmp_path with `old` replaced by `new` in the storage spec."""
    spec_dir = tmp_path / "spec"
    shutil.copytree(SPEC, spec_dir, ignore=shutil.ignore_patterns("states", "*.out"))
    storage = spec_dir / "ShmObjectStorage.tla"
    text = storage.read_text()
    assert text.count(old) == 1, f"{old!r} not found exactly once"
    storage.write_text(text.replace(old, new))
    return spec_dir


def test_table_is_consistent() -> None:
    names = [m.name for m in check.MODELS]
    assert len(names) == len(set(names))
    for m in check.MODELS:
        assert (SPEC / f"{m.name}.tla").is_file(), m.name
        assert (SPEC / f"{m.name}.cfg").is_file(), m.name
        assert (m.expect == check.PASS) == (m.prop is None), m.name
    # every hazard has a quick model, and quick has must-pass models too
    quick = [m for m in check.MODELS if m.quick]
    assert any(m.expect == check.PASS for m in quick)
    assert any(m.expect != check.PASS for m in quick)


def test_every_model_file_is_in_the_table_and_readme() -> None:
    names = {m.name for m in check.MODELS}
    assert {p.stem for p in SPEC.glob("MC*.tla")} == names
    readme = (SPEC / "README.md").read_text()
    assert "tbd" not in readme
    for name in names:
        assert f"| {name} |" in readme, f"{name} missing from spec/README.md's models table"


def test_quick_models_as_expected(tmp_path: Path) -> None:
    proc = run_check("--quick", "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "UNEXPECTED" not in proc.stdout
    assert "expected FAIL reproduced" in proc.stdout
    # the counterexamples are kept for the replayer
    assert (tmp_path / "out" / "MCClearDrain.out").read_text().count("@!@!@STARTMSG 2217") >= 2


def test_free_rule_without_reader_factor_fails(tmp_path: Path) -> None:
    # drop the `* n_readers` factor from default_is_free_check: a chunk is
    # reclaimed as soon as ONE reader has read it
    spec_dir = broken_copy(tmp_path, "WFlag(S.wf, id) * R", "WFlag(S.wf, id)")
    proc = run_check(
        "--spec-dir", str(spec_dir), "--out", str(tmp_path / "out"), "--only", "MCStorageSmall"
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "must pass, got invariant" in proc.stdout  # a verdict, not a parse error


def test_spec_without_id_check_fails(tmp_path: Path) -> None:
    # no _validate_monotonic_id (and no F2 re-check, which uses the same
    # operator): a handle to a reused chunk returns the new chunk's value
    spec_dir = broken_copy(
        tmp_path, "IdMatches(p, h) == hdr_id[p] = h[3]", "IdMatches(p, h) == TRUE"
    )
    proc = run_check(
        "--spec-dir", str(spec_dir), "--out", str(tmp_path / "out"), "--only", "MCStorageFixedSmall"
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "must pass, got invariant" in proc.stdout


def test_missing_java_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_java() -> str:
        raise TlcError("Java not found: install a JRE")

    monkeypatch.setattr(check, "find_java", no_java)
    assert check.main(["--quick"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Java not found" in err
