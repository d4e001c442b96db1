"""`make check` itself: the quick models come out as the table says, and a
deliberately broken spec makes check.py fail.

Needs Java and the TLC jar (marked `tlc`; skipped without them). The run of
every quick model and the two longest broken variants are `slow`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from quick_models import CHECKED_IN_MAKE_TEST
from tlc_support import ROOT, SPEC, require_tlc

from shmref.tlc import check, manifest, options
from shmref.tlc.tlavalues import TlcError

require_tlc()

pytestmark = pytest.mark.tlc


def run_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shmref", "check", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def broken_copy(tmp_path: Path, old: str, new: str) -> Path:
    """spec/ copied to tmp_path with `old` replaced by `new` in the one storage
    module (ShmObjectStorage.tla or one of its parts) that holds it."""
    spec_dir = tmp_path / "spec"
    shutil.copytree(SPEC, spec_dir, ignore=shutil.ignore_patterns("states", "*.out"))
    parts = [spec_dir / "ShmObjectStorage.tla", *sorted(spec_dir.glob("Storage*.tla"))]
    holders = [p for p in parts if old in p.read_text()]
    assert len(holders) == 1 and holders[0].read_text().count(old) == 1, (
        f"{old!r} not found exactly once in the storage modules"
    )
    holders[0].write_text(holders[0].read_text().replace(old, new))
    return spec_dir


MANIFEST = manifest.load_manifest(SPEC / "models.toml")


def test_manifest_is_consistent() -> None:
    assert check.MODELS == MANIFEST.models
    for m in MANIFEST.models:
        assert (SPEC / m.tla_file).is_file(), m.name
        assert (SPEC / m.cfg_file).is_file(), m.name
        assert m.code and m.bounds and m.what, f"{m.name}: code, bounds and what are required"
        if m.expect == check.PASS and not m.deep:  # deep profiles: measured elsewhere
            assert m.measured.distinct, f"{m.name}: must-pass model without a measured count"
    quick = [m for m in MANIFEST.models if m.quick]
    assert any(m.expect == check.PASS for m in quick)
    assert any(m.expect != check.PASS for m in quick)


def test_every_spec_file_is_named_by_the_manifest(tmp_path: Path) -> None:
    assert manifest.unnamed_files(SPEC, MANIFEST) == []
    # broken input: a stray model file is reported
    spec_dir = tmp_path / "spec"
    shutil.copytree(SPEC, spec_dir)
    (spec_dir / "MCStray.cfg").write_text("INIT Init\n")
    assert manifest.unnamed_files(spec_dir, MANIFEST) == ["MCStray.cfg"]


def test_readme_table_is_generated_from_the_manifest() -> None:
    readme = (SPEC / "README.md").read_text()
    table = readme.split(manifest.TABLE_BEGIN, 1)[1].split(manifest.TABLE_END, 1)[0]
    assert table.strip() == manifest.models_table(MANIFEST.models, MANIFEST.check).strip()
    assert MANIFEST.check is not None and MANIFEST.check.line() in table
    for m in MANIFEST.models:
        assert f"| {m.name} " in table


def test_the_recorded_full_check_ran_every_model_in_under_5_minutes() -> None:
    """README's claim for `make check`: the last full run, as it recorded itself."""
    run = MANIFEST.check
    assert run is not None
    assert run.models == len([m for m in MANIFEST.models if not m.deep])
    assert run.seconds < 300 and run.cores <= 2


@pytest.mark.slow
def test_quick_models_match_the_manifest(tmp_path: Path) -> None:
    """Every quick model but those a test of `make test` checks the same way
    (tests/spec/quick_models.py)."""
    quick = [m for m in MANIFEST.models if m.quick and m.name not in CHECKED_IN_MAKE_TEST]
    assert "MCClearDrain" in {m.name for m in quick} and len(quick) >= 10
    for model in quick:
        result = check.check_model(model, SPEC, tmp_path, workers=1, timeout=300)
        assert result.good, f"{model.name}: {result.detail}"
        assert result.run is not None
        assert manifest.drift(model, result.run.distinct_states, MANIFEST.tolerance) is None
    # the counterexamples are kept for the replayer
    assert (tmp_path / "MCClearDrain.out").read_text().count("@!@!@STARTMSG 2217") >= 2


def test_drift_is_caught() -> None:
    model = next(m for m in MANIFEST.models if m.quick and m.expect == check.PASS)
    assert model.measured.distinct is not None
    assert manifest.drift(model, model.measured.distinct, MANIFEST.tolerance) is None
    assert manifest.drift(model, 2 * model.measured.distinct, MANIFEST.tolerance)
    assert manifest.drift(model, None, MANIFEST.tolerance)


def test_unknown_model_is_one_line() -> None:
    proc = run_check("--only", "MCNoSuchModel")
    assert proc.returncode != 0
    err = proc.stderr.strip()
    assert err.count("\n") == 0 and "MCNoSuchModel" in err and "models.toml" in err


def test_missing_cfg_names_the_file(tmp_path: Path) -> None:
    spec_dir = tmp_path / "spec"
    shutil.copytree(SPEC, spec_dir)
    (spec_dir / "MCRingFixed.cfg").unlink()
    proc = run_check("--spec-dir", str(spec_dir), "--out", str(tmp_path), "--only", "MCRingFixed")
    assert proc.returncode == 1
    assert f"{spec_dir / 'MCRingFixed.cfg'}: no such file" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_parse_error_names_file_and_line(tmp_path: Path) -> None:
    spec_dir = tmp_path / "spec"
    shutil.copytree(SPEC, spec_dir)
    ring = spec_dir / "RingBuffer.tla"
    lines = ring.read_text().splitlines()
    number = next(i for i, line in enumerate(lines, 1) if line.startswith("Spec =="))
    lines[number - 1] += " )"
    ring.write_text("\n".join(lines) + "\n")
    proc = run_check("--spec-dir", str(spec_dir), "--out", str(tmp_path), "--only", "MCRingFixed")
    assert proc.returncode == 1
    assert f"{ring}:{number}:" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_bad_manifest_is_one_line(tmp_path: Path) -> None:
    spec_dir = tmp_path / "spec"
    shutil.copytree(SPEC, spec_dir)
    (spec_dir / "models.toml").write_text("[[model]]\nname = 'X'\nexpect = 'maybe'\n")
    proc = run_check("--spec-dir", str(spec_dir))
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert err.count("\n") == 0 and "models.toml" in err and "expect" in err


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

    monkeypatch.setattr(options, "find_java", no_java)
    assert check.main(["--quick"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Java not found" in err


def _only(spec_dir: Path, base: str, clause: str) -> check.Model:
    """A must-pass model on `base`'s module and bounds that checks only `clause`."""
    text = (spec_dir / f"{base}.cfg").read_text()
    head = text[: text.index("INVARIANTS")]
    (spec_dir / "Only.cfg").write_text(head + clause + "\n")
    module = next(m for m in MANIFEST.models if m.name == base).tla_file.removesuffix(".tla")
    return check.Model(
        "Only", check.PASS, None, True, "one property", module=module, cfg="Only.cfg"
    )


@pytest.mark.parametrize(
    ("old", "new", "clause", "base"),
    [
        # one read per chunk is taken for all: a chunk whose delivery is still
        # pending for the other reader becomes reclaimable
        (
            "WFlag(S.wf, id) * R",
            "WFlag(S.wf, id)",
            "INVARIANTS\n    OutstandingPinned",
            "MCStorageSmall",
        ),
        # a read counts twice
        (
            "THEN /\\ count' = [count EXCEPT ![p] = @ + 1]",
            "THEN /\\ count' = [count EXCEPT ![p] = @ + 2]",
            "INVARIANTS\n    CountsExact",
            "MCStorageSmall",
        ),
        # free_buf's returned ids lose the first one
        pytest.param(
            "ret |-> FreedIds(ids, s.ids)]",
            "ret |-> LET f == FreedIds(ids, s.ids) IN IF f = <<>> THEN f ELSE Tail(f)]",
            "PROPERTIES\n    FreeReturnsWhatItRemoves",
            "MCStorageSmall",
            marks=pytest.mark.slow,
        ),
        # no id check (nor F2's re-check): a read of a reused chunk returns
        # another key's value, which the abstract cache never returns
        pytest.param(
            "IdMatches(p, h) == hdr_id[p] = h[3]",
            "IdMatches(p, h) == TRUE",
            "PROPERTIES\n    AbstractSpec",
            "MCStorageFixedSmall",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_new_properties_catch_their_broken_variant(
    tmp_path: Path, old: str, new: str, clause: str, base: str
) -> None:
    """The clause alone fails on its broken spec. That it holds on the good
    spec is `base`'s own check: every clause is in its cfg, and the run of
    every quick model (test_quick_models_match_the_manifest) passes it."""
    assert clause.split()[-1] in (SPEC / f"{base}.cfg").read_text().split()
    assert next(m for m in MANIFEST.models if m.name == base).quick
    spec_dir = (
        broken_copy(tmp_path, old, new)
        if "FreedIds" not in old
        else _ring_broken(tmp_path, old, new)
    )
    model = _only(spec_dir, base, clause)
    result = check.check_model(model, spec_dir, tmp_path, 1, 300)
    assert result.verdict == "UNEXPECTED" and result.run is not None, result.detail
    assert result.run.outcome in ("invariant", "liveness"), result.detail


def _ring_broken(tmp_path: Path, old: str, new: str) -> Path:
    spec_dir = tmp_path / "spec"
    shutil.copytree(SPEC, spec_dir)
    ring = spec_dir / "RingBuffer.tla"
    text = ring.read_text()
    assert text.count(old) == 1
    ring.write_text(text.replace(old, new))
    return spec_dir
