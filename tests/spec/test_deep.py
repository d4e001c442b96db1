"""`make check-deep`: TLC's distributed mode (server + 2 local workers) and the
simulation alternative give the same verdicts as `make check`, on small models.

Needs Java and the TLC jar (skipped otherwise).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tlc_support import SPEC, require_tlc, spec_models

from shmref.tlc import deep, manifest

require_tlc()

pytestmark = pytest.mark.tlc
MODELS = spec_models()


@pytest.mark.slow
def test_distributed_mode_matches_the_manifest() -> None:
    model = MODELS["MCRingFixed"]
    result = deep.run_distributed(model, SPEC, workers=2, host="localhost", timeout=300)
    assert result.verdict == "PASS", result.detail
    assert result.run is not None
    assert result.run.distinct_states == model.measured.distinct


@pytest.mark.slow
def test_distributed_mode_reproduces_a_hazard() -> None:
    result = deep.run_distributed(MODELS["MCIdWrapSeed"], SPEC, 2, "localhost", 300)
    assert result.verdict == "expected FAIL reproduced", result.detail


def test_simulation_finds_a_hazard_and_passes_a_fixed_model() -> None:
    hazard = deep.run_simulation(MODELS["MCClearDrain"], SPEC, depth=20, num=2000, seed=1)
    assert hazard.verdict == "expected FAIL reproduced", hazard.detail
    fixed = deep.run_simulation(MODELS["MCStorageFixedSmall"], SPEC, depth=20, num=500, seed=1)
    assert fixed.verdict == "PASS", fixed.detail


def test_server_output_parser() -> None:
    ok = deep.parse_server_output(
        "Model checking completed. No error has been found.\n"
        "44,984 states generated, 6,568 distinct states found, 0 states left on queue.\n"
        "The depth of the complete state graph search is 19.\n",
        1.0,
        0,
    )
    assert (ok.outcome, ok.distinct_states, ok.depth) == ("ok", 6568, 19)
    broken = deep.parse_server_output("Exception in thread main\n", 1.0, 1)
    assert broken.outcome == "error" and broken.error


def test_record_keeps_the_workers_of_a_deep_run(tmp_path: Path) -> None:
    """`--record` writes distinct/depth/time and the workers; the table shows them."""
    for name in ("models.toml", "README.md"):
        (tmp_path / name).write_text((SPEC / name).read_text())
    loaded = manifest.load_manifest(tmp_path / "models.toml")
    run = manifest.Measured(12_345_678, 40, 3600.0, workers=2)
    updated = manifest.record(loaded, [("MCStorageFixedDeep", run)])
    deep_model = {m.name: m for m in updated.models}["MCStorageFixedDeep"]
    assert deep_model.measured == run
    manifest.regenerate_readme(tmp_path / "README.md", updated.models)
    row = next(
        line
        for line in (tmp_path / "README.md").read_text().splitlines()
        if line.startswith("| MCStorageFixedDeep ")
    )
    assert "12,345,678" in row and row.rstrip(" |").endswith("2")
    # a model recorded without workers shows "-"
    ring = next(
        line
        for line in (tmp_path / "README.md").read_text().splitlines()
        if line.startswith("| MCRing ")
    )
    assert ring.rstrip(" |").endswith("-")
