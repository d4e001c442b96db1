"""Symmetry reduction is sound only for a symmetric spec: every model whose cfg
names a SYMMETRY has the whole state graph of a small instance (MaxIssues at
most 2, no invariants) checked for closure under every swap of the values
it permutes (shmref.tlc.symmetry); an asymmetric spec and a graph with a
missing step must fail the check.

Needs Java and the TLC jar (marked `tlc`; skipped without them); the
per-model checks are `slow` (MCStorage's instance has 54,605 states).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shmref.tlc import manifest, symmetry
from shmref.tlc.graph import StateGraph
from shmref.tlc.java import find_jar, find_java
from shmref.tlc.tlavalues import FrozenDict, TlcError

SPEC = Path(__file__).resolve().parents[2] / "spec"
MODELS = {m.name: m for m in manifest.load_manifest(SPEC / "models.toml").models}
SYMMETRIC = sorted(
    name
    for name, m in MODELS.items()
    if not m.deep and symmetry.symmetry_of((SPEC / m.cfg_file).read_text())
)


def _needs_tlc() -> None:
    try:
        find_java()
        find_jar()
    except TlcError as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"TLC not available: {exc}")


# Smaller bounds where MaxIssues <= 2 alone leaves too big a graph (re-reads
# without A1: over a million states; one issuance there, re-read up to the
# CountBound, takes 5 minutes at two); both keys and both readers stay.
BOUNDS = {"MCDoubleReadFixed": {"N": "2", "MAX_OBJ": "1", "Sizes": "{1}", "MaxIssues": "1"}}


def _check(name: str, spec_dir: Path) -> symmetry.SymmetryReport:
    model = MODELS[name]
    return symmetry.check_symmetry(
        name,
        spec_dir,
        spec_dir / model.tla_file,
        spec_dir / model.cfg_file,
        bounds=BOUNDS.get(name),
    )


def test_the_key_symmetric_models_are_the_ones_checked() -> None:
    keyed = {
        n
        for n in SYMMETRIC
        if "Key" in (symmetry.symmetry_of((SPEC / MODELS[n].cfg_file).read_text()) or "")
    }
    assert {"MCStorage", "MCStorageFixed", "MCIdWrapFixed", "MCDoubleReadFixed"} <= keyed
    assert "MCPayloadHeaderDrain" in keyed


@pytest.mark.tlc
@pytest.mark.slow
@pytest.mark.parametrize("name", SYMMETRIC)
def test_state_graph_is_closed_under_the_symmetry(name: str) -> None:
    _needs_tlc()
    report = _check(name, SPEC)
    assert report.closed, report.broken
    assert report.states > 100 and report.transpositions >= 1


@pytest.mark.tlc
def test_an_asymmetric_spec_fails(tmp_path: Path) -> None:
    """Only the key CHOOSE picks is ever put: the other key's images are missing."""
    _needs_tlc()
    spec = tmp_path / "spec"
    shutil.copytree(SPEC, spec)
    text = (spec / "ShmObjectStorage.tla").read_text()
    old = r"\E k \in Keys, s \in Sizes : put(k, s)"
    assert old in text
    (spec / "ShmObjectStorage.tla").write_text(
        text.replace(old, r"\E k \in {CHOOSE x \in Keys : TRUE}, s \in Sizes : put(k, s)")
    )
    report = _check("MCPayloadHeaderDrain", spec)
    assert not report.closed and "under (k1 k2)" in (report.broken or "")


def _graph(edges: list[tuple[str, str, str]]) -> StateGraph:
    states: dict[str, dict[str, object]] = {
        "0": {"x": None},
        "1": {"x": "k1"},
        "2": {"x": "k2"},
        "3": {"x": FrozenDict({"k1": frozenset({"k2"})})},
        "4": {"x": FrozenDict({"k2": frozenset({"k1"})})},
    }
    return StateGraph(states=states, initial={"0"}, edges=edges)


def test_closure_sees_a_missing_step_and_a_missing_state() -> None:
    swap = symmetry.transpositions(["k1", "k2"])
    full = [("0", "1", "put"), ("0", "2", "put"), ("1", "3", "get"), ("2", "4", "get")]
    assert symmetry.closure_break(_graph(full), swap) is None
    broken = symmetry.closure_break(_graph(full[:-1]), swap)
    assert broken is not None and "step get" in broken
    lonely = _graph(full)
    del lonely.states["4"]
    lonely.edges = full[:-1]
    assert "not reachable" in (symmetry.closure_break(lonely, swap) or "")


def test_small_cfg_drops_checks_and_lowers_max_issues() -> None:
    text = (SPEC / "MCStorage.cfg").read_text()
    small = symmetry.small_cfg(text, 2)
    assert "SYMMETRY" not in small and "INVARIANT" not in small and "PROPERT" not in small
    assert "MaxIssues = 2" in small and "INIT Init" in small and "Keys = {k1, k2, k3}" in small
    assert "    N = 2\n" in symmetry.small_cfg(text, 2, {"N": "2"})
    with pytest.raises(TlcError, match="Nope"):
        symmetry.small_cfg(text, 2, {"Nope": "1"})


def test_a_spec_that_writes_a_permuted_name_as_a_string_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "spec"
    shutil.copytree(SPEC, spec)
    (spec / "Extra.tla").write_text('---- MODULE Extra ----\nX == "k1"\n====\n')
    with pytest.raises(TlcError, match='string "k1"'):
        _check("MCStorage", spec)
