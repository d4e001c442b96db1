"""How long the oracle takes: `python -m shmref.conformance --impl refimpl`
timed as a subprocess, as a user runs it (issue 14's Speed section).

Four runs on one fresh, temporary cache (`SHMREF_CACHE_DIR`), so the user's
own cache is neither used nor changed:

1. full, empty cache: TLC builds the hazard traces and the seed builds its
   baseline (the "first run");
2. full, cached: the traces and the seed's baseline come from step 1;
3. `--quick`, which builds the quick seed baseline (not measured against a
   target: it is the quick run's own first run);
4. `--quick`, cached;
5. and 6. full and `--quick` on a store that fails (`FAILING`, the seed: its
   protocol-safe properties fail), cached: what judging a broken store costs
   (a failure's shrinking and trace included).

Each run's wall time is compared with its target (`RUNS`); the report's
own `seconds` (its JSON) is kept beside it: the difference is start-up
(imports, loading the module under test). CPU seconds (user + system of the
run and every process it waited for: pytest's spawned readers, TLC's JVM)
do not grow with the machine's other load as wall time does: on 2 idle
cores a run needs at least CPU / 2 seconds of wall time.

Where a run's time goes: pytest's own `--durations` (passed through
`PYTEST_ADDOPTS`, which the child processes' `pytest.main` reads) in the report
folder's workers/*.log, summed per test file and per test function; the rest
of the report's seconds is TLC, the hazard replays, trace validation and
the seed baseline.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import REPO, progress

IMPL = "refimpl"
FAILING = "seed"  # fails protocol-safe (FINDINGS.md): exit 1, failures shrunk and traced
SLOWEST = 8  # test functions listed per run
_DURATION = re.compile(r"^\s*([\d.]+)s\s+(?:setup|call|teardown)\s+(\S+)", re.MULTILINE)


@dataclass(frozen=True)
class Run:
    label: str
    quick: bool
    target_s: float | None  # None: measured, not judged
    impl: str = IMPL


RUNS = (
    Run("full, empty cache (TLC included)", quick=False, target_s=180.0),
    Run("full, cached", quick=False, target_s=60.0),
    Run("--quick, first quick run (its seed baseline built)", quick=True, target_s=None),
    Run("--quick, cached", quick=True, target_s=20.0),
    Run("full, cached (fails)", quick=False, target_s=None, impl=FAILING),
    Run("--quick, cached (fails)", quick=True, target_s=None, impl=FAILING),
)


def command(run: Run, out: Path) -> list[str]:
    args = [sys.executable, "-m", "shmref.conformance", "--impl", run.impl, "--out", str(out)]
    return args + (["--quick"] if run.quick else [])


def time_run(run: Run, cache: Path, out: Path) -> dict[str, Any]:
    env = dict(
        os.environ,
        SHMREF_CACHE_DIR=str(cache),
        PYTHONPATH=str(REPO),
        PYTEST_ADDOPTS="--durations=0",
    )
    argv = command(run, out)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report_path = out / "conformance.json"
    report: dict[str, Any] = {}
    if report_path.is_file():
        report = json.loads(report_path.read_text(encoding="utf-8"))
    row: dict[str, Any] = {
        "run": run.label,
        "command": f"python -m shmref.conformance --impl {run.impl}" + (" --quick" * run.quick),
        "wall_s": wall,
        "cpu_s": cpu,
        "report_s": report.get("seconds"),
        "exit": done.returncode,
        "ok": report.get("ok"),
        "target_s": run.target_s,
        "within_target": None if run.target_s is None else wall <= run.target_s,
    }
    log = workers_log(out)
    if log:
        row.update(where_time_goes(log))
    seed_log = workers_log(out / "seed-baseline")  # the baseline's copy (built or cached)
    if seed_log and "cached" not in run.label:
        row["seed_baseline"] = where_time_goes(seed_log)
    if done.returncode not in (0, 1):  # 1: a property failed, still a timed run
        row["error"] = (done.stderr or done.stdout).strip()[-400:]
    return row


def workers_log(out: Path) -> str:
    """The raw pytest output of a run's child processes (shmref.oracle.isolation)."""
    logs = sorted((out / "workers").glob("*.log"))
    return "".join(path.read_text(encoding="utf-8", errors="replace") for path in logs)


def where_time_goes(log: str) -> dict[str, Any]:
    """pytest seconds in all, per test file and the slowest test functions
    (parameters merged), from the `--durations` lines of a pytest log."""
    files: dict[str, float] = {}
    functions: dict[str, float] = {}
    for seconds, node in _DURATION.findall(log):
        path, _, name = node.partition("::")
        function = path.rsplit("/", 1)[-1] + "::" + name.split("[", 1)[0]
        files[path.rsplit("/", 1)[-1]] = files.get(path.rsplit("/", 1)[-1], 0.0) + float(seconds)
        functions[function] = functions.get(function, 0.0) + float(seconds)
    slowest = sorted(functions.items(), key=lambda item: -item[1])[:SLOWEST]
    return {
        "pytest_s": sum(files.values()),
        "pytest_files_s": dict(sorted(files.items(), key=lambda item: -item[1])),
        "slowest_tests_s": dict(slowest),
    }


def run() -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="shmref-bench-cache-") as tmp:
        cache, outs = Path(tmp) / "cache", Path(tmp) / "out"
        cache.mkdir()
        for i, spec in enumerate(RUNS):
            progress(f"conformance: {spec.label} ...")
            row = time_run(spec, cache, outs / str(i))
            rows.append(row)
            progress(f"conformance: {spec.label}: {row['wall_s']:.1f} s (exit {row['exit']})")
    return rows
