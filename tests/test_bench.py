"""`python -m bench --quick` runs end to end and reports sane numbers.

No timing assertions: the machine is shared and noisy; only that every
section is there, every number is positive and finite (or a ratio, a count
or a share, which may be zero), and nothing leaked.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.tlc

# Numbers that may legitimately be zero.
MAY_BE_ZERO = {
    "seconds_if_not_caught",
    "coverage",
    "spread",
    "processes",
    "segments",
    "faults_per_op",
}


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
    assert [r["size"] for r in results["cpu"]] == ["64 B", "64 KiB"]
    assert all(set(r["cpu_us"]) == {"refimpl", "seed", "plain"} for r in results["cpu"])
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


def _rows(ref_rounds: list[float], seed_rounds: list[float]) -> list[dict[str, Any]]:
    def row(name: str, rounds: list[float]) -> dict[str, Any]:
        return {
            "readers": 1,
            "size": "64 B",
            "contender": name,
            "ops_per_s": 1 / statistics.median(rounds),
            "cpu_us": 1.0,
            "round_s": rounds,
        }

    return [row("refimpl", ref_rounds), row("seed", seed_rounds)]


def test_paired_ratio_follows_each_repetition() -> None:
    """Repetitions run under changing load: the paired ratio compares each
    repetition of refimpl with the seed's in the same repetition. Here the
    seed takes exactly twice as long in every one: ratio 2, no spread."""
    from bench.store import _add_ratios

    ref = [1.0, 2.0, 3.0, 4.0, 5.0]
    rows = _rows(ref, [2 * r for r in ref])
    _add_ratios(rows)
    assert rows[0]["paired_vs_seed"] == 2.0
    assert rows[0]["paired_vs_seed_quartiles"] == [2.0, 2.0]
    # broken pairing: the seed's repetitions in reverse order give the same
    # medians but quartiles far apart
    rows = _rows(ref, [2 * r for r in reversed(ref)])
    _add_ratios(rows)
    low, high = rows[0]["paired_vs_seed_quartiles"]
    assert low <= 1.0 and high >= 4.0


def test_callgrind_part_without_total_is_refused(tmp_path: Path) -> None:
    from bench.instructions import _part_totals

    good = tmp_path / "cg.out.1"
    good.write_text("events: Ir D1mr\nfn=(1) f\n0 5 1\ntotals: 1234 56\n")
    assert _part_totals(good) == {"Ir": 1234, "D1mr": 56}
    broken = tmp_path / "cg.out.2"
    broken.write_text("events: Ir\nfn=(1) f\n0 5\n")
    with pytest.raises(RuntimeError, match="no instruction total"):
        _part_totals(broken)


def test_conformance_table_flags_a_run_over_its_target() -> None:
    from bench.report import conformance_tables

    row = {"run": "full, cached", "report_s": 1.0, "cpu_s": 2.0, "exit": 0, "target_s": 60.0}
    within = "\n".join(conformance_tables([dict(row, wall_s=59.0, within_target=True)]))
    over = "\n".join(conformance_tables([dict(row, wall_s=61.0, within_target=False)]))
    assert "within 60 s" in within and "over" not in within
    assert "**over** 60 s" in over
