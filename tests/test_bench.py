"""`python -m bench --quick` runs end to end and reports sane numbers.

No timing assertions: the machine is shared and noisy; only that every
section is there, every number is positive and finite (or a ratio, a count
or a share, which may be zero), and nothing leaked.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.tlc

# Numbers that may legitimately be zero.
MAY_BE_ZERO = {"seconds_if_not_caught", "coverage", "spread", "processes", "segments"}


def numbers(value: Any, path: str = "") -> list[tuple[str, float]]:
    """Every number in a JSON tree, with its path."""
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [(path, value)]
    if isinstance(value, dict):
        return [n for k, v in value.items() for n in numbers(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [n for i, v in enumerate(value) for n in numbers(v, f"{path}[{i}]")]
    return []


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| refimpl / seed |" in proc.stdout or "refimpl / seed" in proc.stdout
    return json.loads((out / "results.json").read_text())


def test_every_section_is_there(results: dict[str, Any]) -> None:
    assert results["meta"]["quick"] is True
    store = results["store"]
    contenders = {row["contender"] for row in store["throughput"]}
    assert {"refimpl", "plain"} <= contenders
    assert {row["readers"] for row in store["throughput"]} >= {1, 2}
    assert store["profile"] and all(
        abs(sum(p["shares"].values()) - 1) < 1e-6 for p in store["profile"]
    )
    assert results["tlc"]["trivial"]["distinct_states"] > 0
    assert [m["model"] for m in results["tlc"]["models"]] == ["MCRing"]
    replay = results["replay"]
    for section in ("corpus", "state_machine", "edge_coverage", "mutants"):
        assert section in replay, section
    from shmref.mutants import MUTATIONS

    assert {m["mutant"] for m in replay["mutants"]} == set(MUTATIONS)
    assert results["leaks"]["segments"] == [] and results["leaks"]["processes"] == []
    assert results["leaks"]["segments_created"] > 0


def test_numbers_are_positive_and_finite(results: dict[str, Any]) -> None:
    found = numbers({k: v for k, v in results.items() if k != "leaks"})
    assert len(found) > 100
    for path, value in found:
        assert math.isfinite(value), path
        name = path.rsplit(".", 1)[-1]
        if name in MAY_BE_ZERO or name.startswith("vs_") or "shares" in path:
            assert value >= 0, path
        else:
            assert value > 0, path
