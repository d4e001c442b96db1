"""How long the oracle takes, the way a user gets it (issue 34): shmref's
wheel built from this checkout and installed in a fresh virtual environment,
`python -m shmref.conformance --impl MOD` run from an empty folder, on one
fresh temporary cache (`SHMREF_CACHE_DIR`), so the user's own cache is
neither used nor changed, without the seed file unless the store itself
is built from it.

In this order:

1. refimpl, full, empty cache: TLC builds the hazard traces and the corpora
   (the "first run");
2. refimpl, full, cached;
3. refimpl, `--quick` (its quick TLC output built), then 4. cached;
5. a failing store: the seed's own code with a pickle serde
   (tests/stores/seed_pickle_serde.py; `$SHMREF_SEED` set, so its seed
   baseline is built beside it), full, then 6. full cached and 7. `--quick`:
   it fails hardened and protocol-safe properties, state machines among them;
8. one of the native store's mutants (examples/native_store, built by
   `make native-mutants`), full and 9. `--quick`;
10. refimpl behind the process protocol (`exec:python -m shmref.process.serve
   refimpl`), full and 11. `--quick`: the same store as 1-4, so the difference
   is what the process boundary costs (issue 32: within 2x);
12. the Rust store (examples/rust_store, `make rust`) through the protocol,
   full and 13. `--quick`: it fails where the seed fails, so its full run is
   judged against twice the failing seed-like store's (5-7), whose failures
   cost the same shrinking.

The failing seed-like store's cached full run is judged against 1.5x
refimpl's cached full run (issue 49: its shrinking within one budget of
examples, docs/conformance.md#shrinking), the native mutant's and the
served refimpl's against twice it (issue 34: a failing run within 2x of a
passing one). Each run's wall
time is compared with its target (`RUNS`); the report's own `seconds` (its
JSON) is kept beside it: the difference is start-up (imports, loading the
module under test). CPU seconds (user + system of the run and every process
it waited for: the children, pytest's spawned readers, TLC's JVM) do not
grow with the machine's other load as wall time does.

Where a run's time goes: pytest's own `--durations` (passed through
`PYTEST_ADDOPTS`, which the child processes' `pytest.main` reads) in the report
folder's workers/*.log, summed per test file and per test function.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import REPO, progress

IMPL = "refimpl"
FAILING = "seed_pickle_serde"  # the seed's code with another serde (tests/stores)
NATIVE = "native_mutants.free_after_one_read"  # examples/native_store (make native-mutants)
RUST_BIN = REPO / "examples" / "rust_store" / "target" / "release" / "rust_store"  # make rust
RUST = "exec:examples/rust_store/target/release/rust_store"  # over the process protocol
SERVED = "exec:python -m shmref.process.serve refimpl"  # refimpl behind the same protocol
SLOWEST = 8  # test functions listed per run
TWICE = -2.0  # a target of twice refimpl's cached full run
HALF_AGAIN = -1.5  # 1.5x refimpl's cached full run (issue 49: the failing seed-like store)
TWICE_FAILING = -3.0  # twice the failing seed-like store's: a store failing as the seed does
_DURATION = re.compile(r"^\s*([\d.]+)s\s+(?:setup|call|teardown)\s+(\S+)", re.MULTILINE)
SEED_FILE = REPO.parent / "shared" / "seed" / "shm_object_storage_reference.txt"


@dataclass(frozen=True)
class Run:
    label: str
    quick: bool
    target_s: float | None  # None: measured, not judged; TWICE: 2x refimpl's cached full run
    impl: str = IMPL


RUNS = (
    Run("full, empty cache (only trace validation starts TLC)", quick=False, target_s=180.0),
    Run("full, cached", quick=False, target_s=60.0),
    Run("--quick, first quick run", quick=True, target_s=None),
    Run("--quick, cached", quick=True, target_s=20.0),
    Run("failing store: full, its seed baseline built", False, None, FAILING),
    Run("failing store: full, cached", False, HALF_AGAIN, FAILING),
    Run("failing store: --quick, its quick seed baseline built", True, None, FAILING),
    Run("native mutant: full", False, TWICE, NATIVE),
    Run("native mutant: --quick", True, None, NATIVE),
    Run("refimpl over the process protocol: full", False, TWICE, SERVED),
    Run("refimpl over the process protocol: --quick", True, None, SERVED),
    Run("Rust store over the process protocol: full", False, TWICE_FAILING, RUST),
    Run("Rust store over the process protocol: --quick", True, None, RUST),
)


def installed(tmp: Path) -> Path:
    """The python of a fresh virtual environment with this checkout's wheel
    installed with the oracle's extra (what `pip install "shmref[oracle]"` gives)."""
    wheels, venv = tmp / "wheel", tmp / "venv"
    python = venv / "bin" / "python"

    # pip must not see this checkout: on PYTHONPATH (the Makefile's), the build's
    # shmref.egg-info made pip take shmref as installed and leave the wheel out
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def quietly(*argv: str) -> None:
        subprocess.run(argv, check=True, capture_output=True, text=True, env=clean)

    quietly(sys.executable, "-m", "build", "--wheel", "-o", str(wheels), str(REPO))
    quietly(sys.executable, "-m", "venv", str(venv))
    (wheel,) = wheels.glob("shmref-*.whl")
    quietly(str(python), "-m", "pip", "install", "-q", f"{wheel}[oracle]")
    # the native store's own runtime dependency (a user of such a store has it)
    quietly(str(python), "-m", "pip", "install", "-q", "cffi")
    return python


def environment(run: Run, cache: Path) -> dict[str, str]:
    """A user's environment: no checkout on the path, no seed file unless the
    store is made from it, the store's own folder importable."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SHMREF_SEED")}
    env.update(SHMREF_CACHE_DIR=str(cache), PYTEST_ADDOPTS="--durations=0")
    if run.impl == FAILING:
        env.update(PYTHONPATH=str(REPO / "tests" / "stores"), SHMREF_SEED=str(SEED_FILE))
    elif run.impl == NATIVE:
        env["PYTHONPATH"] = str(REPO / "examples" / "native_store")
    return env


def command(python: Path, run: Run, out: Path) -> list[str]:
    programs = {RUST: f"exec:{RUST_BIN}", SERVED: f"exec:{python} -m shmref.process.serve refimpl"}
    impl = programs.get(run.impl, run.impl)
    args = [str(python), "-m", "shmref.conformance", "--impl", impl, "--out", str(out)]
    return args + (["--quick"] if run.quick else []) + ["--no-progress"]


def time_run(run: Run, python: Path, cache: Path, out: Path, folder: Path) -> dict[str, Any]:
    argv = command(python, run, out)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        argv, env=environment(run, cache), cwd=folder, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report_path = out / "conformance.json"
    report: dict[str, Any] = {}
    if report_path.is_file():
        report = json.loads(report_path.read_text(encoding="utf-8"))
    row: dict[str, Any] = {
        "run": run.label,
        "command": f"python -m shmref.conformance --impl {shlex.quote(run.impl)}"
        + (" --quick" * run.quick),
        "wall_s": wall,
        "cpu_s": cpu,
        "report_s": report.get("seconds"),
        "exit": done.returncode,
        "ok": report.get("ok"),
        "target_s": run.target_s,
        "within_target": None if run.target_s is None else wall <= run.target_s,
        "levels": {k: v["status"] for k, v in report.get("levels", {}).items()},
    }
    log = workers_log(out)
    if log:
        row.update(where_time_goes(log))
    seed_log = workers_log(out / "seed-baseline")  # the baseline's copy (built or cached)
    if seed_log and not run.label.endswith("cached"):
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
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="shmref-bench-conformance-") as tmp:
        progress("conformance: building the wheel and a fresh virtual environment ...")
        python = installed(Path(tmp))
        cache, outs, folder = Path(tmp) / "cache", Path(tmp) / "out", Path(tmp) / "empty"
        cache.mkdir()
        folder.mkdir()
        subprocess.run(  # the native store's mutants, built in place when missing
            [sys.executable, str(REPO / "examples" / "native_store" / "build.py"), "--mutants"],
            capture_output=True,
            check=False,
        )
        cached_full: dict[str, float] = {}  # refimpl's and the failing store's cached full runs
        for i, spec in enumerate(RUNS):
            if spec.impl == RUST and not RUST_BIN.is_file():
                progress(f"conformance: {RUST_BIN} not built (make rust, needs cargo): not run")
                continue
            if spec.target_s in (TWICE, HALF_AGAIN, TWICE_FAILING):
                base = cached_full.get(FAILING if spec.target_s == TWICE_FAILING else IMPL)
                factor = 1.5 if spec.target_s == HALF_AGAIN else 2.0
                spec = Run(spec.label, spec.quick, factor * base if base else None, spec.impl)
            progress(f"conformance: {spec.impl}, {spec.label} ...")
            row = time_run(spec, python, cache, outs / str(i), folder)
            if spec.label.endswith("full, cached"):
                cached_full[spec.impl] = row["wall_s"]
            rows.append(row)
            progress(f"conformance: {spec.label}: {row['wall_s']:.1f} s (exit {row['exit']})")
    return rows
