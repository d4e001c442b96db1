"""FINDINGS.md's oracle section is never older than the oracle: the snapshot
it is generated from (docs/seed-conformance.json) equals a fresh full run of
the oracle on the seed's own code (`make seed-snapshot` refreshes both; the
check's broken inputs are in tests/docs/test_findings_doc.py). The snapshot holds
verdicts only, so the run does not shrink its counterexamples (`--no-shrink`,
as the seed baseline's own runs): the seed fails three state machines, whose
shrinking was most of this test's time. The seed's own run needs no seed
baseline, so it is in no xdist group: the other worker runs it beside the
group of runs that share one (tests/oracle/test_conformance.py).

The run starts from an empty cache of its own (`SHMREF_CACHE_DIR`), so the
comparison is also the oracle's determinism: a run from nothing cached, on
this machine, must give the seed the statuses the committed snapshot holds,
made elsewhere and from another cache; a status that depended on what TLC
draws here or on what a cache kept would differ (this replaced running the
seed twice from two empty caches: docs/ci-time.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.tlc
def test_the_oracle_snapshot_of_the_seed_is_current(tmp_path: Path) -> None:
    cache, out = tmp_path / "cache", tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO), "SHMREF_CACHE_DIR": str(cache)}
    run = [sys.executable, "-m", "shmref.conformance", "--impl", "seed", "--no-shrink"]
    run += ["--out", str(out)]
    proc = subprocess.run(run, capture_output=True, text=True, env=env, timeout=1800)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert cache.is_dir(), "the run did not use the empty cache it was given"
    check = [sys.executable, "-m", "shmref", "findings", "--check"]
    check += ["--conformance", str(out / "conformance.json")]
    proc = subprocess.run(check, capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert proc.returncode == 0, (
        "docs/seed-conformance.json is older than the oracle (run `make seed-snapshot`):\n"
        + proc.stdout
        + proc.stderr
    )
