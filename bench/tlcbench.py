"""TLC per model (distinct states, states per minute, depth, wall time) against
TLC's throughput on a trivial spec on this machine (`bench/Counter.tla`).

A run's wall time includes starting the JVM and parsing, which TLC spends
even on a one-state spec (`CounterStartup.cfg`); "net" rates subtract that
floor, so small models are not judged by the JVM's start-up. The counter is
run before and after the models and its median taken.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common import BENCH_DIR, SPEC_DIR, median, progress
from shmref.tlc.check import MODELS
from shmref.tlc.manifest import model_files
from shmref.tlc.result import TlcRun
from shmref.tlc.runner import run_tlc
from shmref.tlc.tlavalues import TlcError

MIN_NET_SECONDS = 0.1


def _run(spec: Path, cfg: Path) -> TlcRun:
    run = run_tlc(spec, cfg, progress=lambda line: progress(f"tlc: {line}"))
    if run.outcome == "error":
        raise TlcError(f"{cfg.name}: {run.summary()}")
    return run


def _row(name: str, run: TlcRun, startup: float) -> dict[str, Any]:
    distinct = run.distinct_states or 0
    net = max(run.seconds - startup, MIN_NET_SECONDS)
    return {
        "model": name,
        "outcome": run.outcome + (f" {run.violated}" if run.violated else ""),
        "distinct_states": distinct,
        "generated_states": run.generated_states or 0,
        "depth": run.depth or 0,
        "wall_s": run.seconds,
        "states_per_min": distinct / run.seconds * 60,
        "net_states_per_min": distinct / net * 60,
    }


def run(quick: bool) -> dict[str, Any]:
    counter = BENCH_DIR / "Counter.tla"
    counter_cfg = BENCH_DIR / ("CounterQuick.cfg" if quick else "Counter.cfg")
    progress("tlc: start-up floor (one-state spec)")
    startup = _run(counter, BENCH_DIR / "CounterStartup.cfg").seconds
    progress("tlc: trivial counter spec")
    trivial = [_run(counter, counter_cfg)]
    # the deep profiles (hours; `make check-deep`) are not make check's models
    names = ["MCRing"] if quick else [m.name for m in MODELS if not m.deep]
    models = []
    for i, name in enumerate(names, 1):
        progress(f"tlc: model {name} ({i}/{len(names)})")
        run_ = _run(*model_files(name, SPEC_DIR))  # the module may be shared
        models.append(_row(name, run_, startup))
    if not quick:
        progress("tlc: trivial counter spec again")
        trivial.append(_run(counter, counter_cfg))
    rows = [_row("Counter", r, startup) for r in trivial]
    baseline = {
        "model": f"Counter ({counter_cfg.name})",
        "distinct_states": rows[0]["distinct_states"],
        "depth": rows[0]["depth"],
        "wall_s": median([r["wall_s"] for r in rows]),
        "states_per_min": median([r["states_per_min"] for r in rows]),
        "net_states_per_min": median([r["net_states_per_min"] for r in rows]),
        "runs": len(rows),
    }
    for row in models:
        row["vs_trivial"] = row["net_states_per_min"] / baseline["net_states_per_min"]
    return {"startup_s": startup, "trivial": baseline, "models": models}
