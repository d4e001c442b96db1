"""FINDINGS.md's oracle section is never older than the oracle: the snapshot
it is generated from (docs/seed-conformance.json) equals a fresh full run of
the oracle on the seed's own code (`make seed-snapshot` refreshes both)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shmref.findings import load_summary, summarize_conformance

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.tlc
@pytest.mark.xdist_group("conformance")
def test_the_oracle_snapshot_of_the_seed_is_current(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "shmref.conformance", "--impl", "seed", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.DEVNULL,
        timeout=1800,
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    fresh = summarize_conformance(json.loads((tmp_path / "conformance.json").read_text()))
    assert fresh == load_summary(), (
        "docs/seed-conformance.json is older than the oracle: run `make seed-snapshot`"
    )


def test_a_stale_snapshot_is_told_apart() -> None:
    """The comparison above can fail: one property more or less is a difference."""
    snapshot = load_summary()
    changed = json.loads(json.dumps(snapshot))
    changed["levels"][0]["failing"].append("test_ring.py::a_property_that_now_fails")
    assert changed != snapshot
