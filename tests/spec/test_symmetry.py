"""Symmetry reduction is sound only for a symmetric spec: every model whose cfg
names a SYMMETRY has the whole state graph of a small instance (MaxIssues at
most 2, no invariants) checked for closure under every swap of the values
it permutes (shmref.tlc.symmetry); an asymmetric spec and a graph with a
missing step must fail the check.

The eleven models' checks (about 130 CPU seconds) run in `make
spec-checks`, which keeps their answer in spec/checks.json bound to what
they read (shmref.tlc.checkrecord): here the record must be of these
files, and a changed file, a missing model, an open graph or an inductive
check without its answer in it must be caught. The
checks that fail run here: they need Java and the TLC jar (marked `tlc`;
skipped without them).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from shmref.tlc import checkrecord, manifest, symmetry
from shmref.tlc.graph import StateGraph
from shmref.tlc.java import find_jar, find_java
from shmref.tlc.tlavalues import FrozenDict, TlcError

SPEC = Path(__file__).resolve().parents[2] / "spec"
MODELS = {m.name: m for m in manifest.load_manifest(SPEC / "models.toml").models}
SYMMETRIC = checkrecord.symmetric_models(SPEC)


def _needs_tlc() -> None:
    try:
        find_java()
        find_jar()
    except TlcError as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"TLC not available: {exc}")


def test_the_key_symmetric_models_are_the_ones_checked() -> None:
    keyed = {
        n
        for n in SYMMETRIC
        if "Key" in (symmetry.symmetry_of((SPEC / MODELS[n].cfg_file).read_text()) or "")
    }
    assert {"MCStorage", "MCStorageFixed", "MCIdWrapFixed", "MCDoubleReadFixed"} <= keyed
    assert "MCPayloadHeaderDrain" in keyed


def test_every_symmetric_models_graph_is_recorded_closed_for_these_files() -> None:
    """spec/checks.json (`make spec-checks`) stands for the spec, the manifest
    and the checker as they are: each symmetric model's graph closed, with
    more than 100 states and at least one swap."""
    assert checkrecord.problem(SPEC) == ""
    models = json.loads((SPEC / checkrecord.RECORD_NAME).read_text())["checks"]["symmetry"]
    assert sorted(models) == SYMMETRIC
    for name, seen in models.items():
        assert seen["closed"] and seen["states"] > 100 and seen["transpositions"] >= 1, name


def _copy(tmp_path: Path) -> Path:
    spec = tmp_path / "spec"
    shutil.copytree(SPEC, spec, ignore=shutil.ignore_patterns("traces"))
    return spec


def test_a_stale_record_names_what_changed_and_the_command(tmp_path: Path) -> None:
    spec = _copy(tmp_path)
    cfg = spec / "MCStorage.cfg"
    cfg.write_text(cfg.read_text() + "\n")
    found = checkrecord.problem(spec)
    assert "spec/MCStorage.cfg changed since" in found and "make spec-checks" in found


def test_a_record_that_lacks_a_model_or_holds_a_wrong_answer_is_refused(tmp_path: Path) -> None:
    spec = _copy(tmp_path)
    path = spec / checkrecord.RECORD_NAME
    record = json.loads(path.read_text())
    del record["checks"]["symmetry"]["MCStorage"]
    path.write_text(json.dumps(record))
    assert "the symmetric models are" in checkrecord.problem(spec)
    record = json.loads((SPEC / checkrecord.RECORD_NAME).read_text())
    record["checks"]["symmetry"]["MCStorage"]["closed"] = False
    path.write_text(json.dumps(record))
    assert "not closed under their symmetry: MCStorage" in checkrecord.problem(spec)
    record = json.loads((SPEC / checkrecord.RECORD_NAME).read_text())
    record["checks"]["inductive"]["MCIndCountsWeak"]["last_step"] = ["get_copy", "ok"]
    path.write_text(json.dumps(record))
    assert "without the answer wanted: MCIndCountsWeak" in checkrecord.problem(spec)
    path.write_text("{")
    assert "is not a record" in checkrecord.problem(spec)
    path.unlink()
    assert "is missing: run `make spec-checks`" in checkrecord.problem(spec)


@pytest.mark.tlc
def test_the_record_is_written_only_when_every_graph_is_closed(tmp_path: Path) -> None:
    """A run of some of the checks writes a record that is refused as
    incomplete (nothing is kept from an earlier one); an asymmetric spec
    gets no record."""
    spec = _copy(tmp_path)
    assert checkrecord.write(spec, symmetric=["MCDoubleReadFixed"], inductive_models=[]) == 0
    assert "the symmetric models are" in checkrecord.problem(spec)
    text = (spec / "ShmObjectStorage.tla").read_text()
    old = r"\E k \in Keys, s \in Sizes : put(k, s)"
    (spec / "ShmObjectStorage.tla").write_text(
        text.replace(old, r"\E k \in {CHOOSE x \in Keys : TRUE}, s \in Sizes : put(k, s)")
    )
    before = (spec / checkrecord.RECORD_NAME).read_text()
    assert checkrecord.write(spec, symmetric=["MCDoubleReadFixed"], inductive_models=[]) == 1
    assert (spec / checkrecord.RECORD_NAME).read_text() == before


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
    report = checkrecord.check("MCPayloadHeaderDrain", spec)
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
        checkrecord.check("MCStorage", spec)
