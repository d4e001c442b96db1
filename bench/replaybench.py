"""Replay and the state machine, on real shared memory: how fast they check,
and how soon they catch each injected bug.

- corpus: every trace of the MCStorage simulation corpus replayed on refimpl
  (traces/s, steps/s; median of repetitions).
- state machine: the Hypothesis `StoreMachine` of shmref.testing.machine on
  refimpl; a step is one action on the implementation (and the model).
- edge coverage: the allocator model's whole state graph (TLC -dump dot),
  `covering_paths`, and the paths replayed; distinct edges covered per
  second of replay.
- mutants: for each of shmref.seed.mutants.MUTATIONS, the time until replay
  (same corpora as tests/test_replay.py) and the state machine (as
  test_state_machine_catches_injected_bugs: no shrinking) first fail.
"""

from __future__ import annotations

import importlib
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from hypothesis import HealthCheck, Phase, settings

from bench.common import BENCH_DIR, SPEC_DIR, load, median, progress
from shmref import tlc
from shmref.seed.mutants import MUTATIONS, build_mutant
from shmref.tlc.corpus import simulation_corpus
from shmref.traces.replay import Replayer


@dataclass(frozen=True)
class ReplayConfig:
    storage_corpus: tuple[int, int, int]  # (num, depth, seed) of MCStorage's simulation
    ring_corpus: tuple[int, int, int]
    max_traces: int | None  # replay at most this many traces of a corpus
    reps: int
    machine_examples: int
    machine_steps: int
    ring_cfg: Path  # the allocator model whose whole graph is covered
    edge_seconds: float | None  # stop replaying covering paths after this long
    mutant_reps: int


FULL = ReplayConfig(
    (150, 40, 20261202), (100, 40, 20261202), None, 3, 100, 50, SPEC_DIR / "MCRing.cfg", None, 3
)
QUICK = ReplayConfig((60, 30, 7), (60, 30, 7), 20, 1, 5, 20, BENCH_DIR / "MCRingQuick.cfg", 2.0, 1)


def corpora(config: ReplayConfig) -> dict[str, list[tlc.Trace]]:
    progress("replay: simulation corpora (TLC, cached in build/corpus)")
    out = {
        "MCStorage": simulation_corpus("MCStorage", *config.storage_corpus),
        "MCRing": simulation_corpus("MCRing", *config.ring_corpus),
    }
    if config.max_traces is not None:
        out = {name: traces[: config.max_traces] for name, traces in out.items()}
    return out


def _replay_until_failure(impl: ModuleType, model: str, traces: list[tlc.Trace]) -> dict[str, Any]:
    replayer = Replayer(impl, SPEC_DIR / f"{model}.cfg")
    steps = 0
    start = time.perf_counter()
    for i, trace in enumerate(traces):
        report = replayer.replay(trace, f"{model} #{i}")
        steps += len(report.replayed)  # counted, not drawn
        if not report.ok:
            return {
                "caught": True,
                "seconds": time.perf_counter() - start,
                "traces": i + 1,
                "steps": steps,
            }
    return {
        "caught": False,
        "seconds": time.perf_counter() - start,
        "traces": len(traces),
        "steps": steps,
    }


def replay_corpus(traces: list[tlc.Trace], reps: int) -> dict[str, Any]:
    impl = load("refimpl")
    samples = []
    for rep in range(reps):
        result = _replay_until_failure(impl, "MCStorage", traces)
        if result["caught"]:
            raise RuntimeError(f"refimpl diverged from MCStorage trace {result['traces']}")
        samples.append(result)
        progress(
            f"replay: MCStorage corpus, repetition {rep + 1}/{reps}: "
            f"{result['steps']} steps in {result['seconds']:.1f} s"
        )
    seconds = median([s["seconds"] for s in samples])
    return {
        "model": "MCStorage",
        "traces": len(traces),
        "steps": samples[0]["steps"],
        "seconds": seconds,
        "traces_per_s": len(traces) / seconds,
        "steps_per_s": samples[0]["steps"] / seconds,
    }


# -- the Hypothesis state machine --------------------------------------------------


def _stateful_module() -> ModuleType:
    """The state machine's module (shmref.testing.machine: `machine_for`),
    the one shmref/suite/test_stateful.py runs."""
    return importlib.import_module("shmref.testing.machine")


class StepCount:
    steps = 0


def _machine(
    stateful: ModuleType, impl: ModuleType, examples: int, steps: int, counter: type[StepCount]
) -> Any:
    base = stateful.machine_for(impl)

    class Counted(base):  # type: ignore[misc, valid-type]
        def step(self, name: str, *args: Any) -> Any:
            counter.steps += 1
            return super().step(name, *args)

    Counted.TestCase.settings = settings(
        max_examples=examples,
        stateful_step_count=steps,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    return Counted


def state_machine(stateful: ModuleType, config: ReplayConfig) -> dict[str, Any]:
    impl = load("refimpl")
    samples = []
    for rep in range(config.reps):
        counter: Any = type("Counter", (StepCount,), {"steps": 0})
        machine = _machine(stateful, impl, config.machine_examples, config.machine_steps, counter)
        start = time.perf_counter()
        machine.TestCase().runTest()
        samples.append((time.perf_counter() - start, counter.steps))
        progress(
            f"replay: state machine, repetition {rep + 1}/{config.reps}: "
            f"{counter.steps} steps in {samples[-1][0]:.1f} s"
        )
    seconds = median([s[0] for s in samples])
    steps = median([s[1] for s in samples])
    return {
        "examples": config.machine_examples,
        "steps": int(steps),
        "seconds": seconds,
        "steps_per_s": steps / seconds,
        "examples_per_s": config.machine_examples / seconds,
    }


# -- edge coverage of the allocator model -------------------------------------------


def edge_coverage(config: ReplayConfig) -> dict[str, Any]:
    impl = load("refimpl")
    with tempfile.TemporaryDirectory(prefix="shmref-bench-") as tmp:
        dot = Path(tmp) / "ring.dot"
        progress(f"replay: TLC dumps the state graph of {config.ring_cfg.name}")
        run = tlc.run_tlc(SPEC_DIR / "MCRing.tla", config.ring_cfg, dump_dot=dot)
        if run.outcome != "ok":
            raise tlc.TlcError(f"MCRing with {config.ring_cfg.name}: {run.summary()}")
        started = time.perf_counter()
        graph = tlc.parse_dot(dot)
    parse_s = time.perf_counter() - started
    started = time.perf_counter()
    paths = tlc.covering_paths(graph)
    paths_s = time.perf_counter() - started
    progress(f"replay: {len(graph.edges)} edges, {len(paths)} covering paths; replaying")
    replayer = Replayer(impl, config.ring_cfg)
    replayed: list[list[tlc.Edge]] = []
    steps = 0
    started = time.perf_counter()
    next_report = started + 10
    for path in paths:
        report = replayer.replay(tlc.path_to_trace(graph, path), "MCRing edge path")
        if not report.ok:
            raise RuntimeError(report.table())
        steps += len(report.replayed)  # counted, not drawn
        replayed.append(path)
        now = time.perf_counter()
        if config.edge_seconds is not None and now - started > config.edge_seconds:
            break
        if now > next_report:
            next_report = now + 10
            progress(f"replay: edge paths {len(replayed)}/{len(paths)}, {steps} steps")
    replay_s = time.perf_counter() - started
    coverage = tlc.edge_coverage(graph, replayed)
    edges = round(coverage * len(graph.edges))
    return {
        "cfg": config.ring_cfg.name,
        "states": len(graph.states),
        "edges": len(graph.edges),
        "paths": len(paths),
        "paths_replayed": len(replayed),
        "steps": steps,
        "coverage": coverage,
        "tlc_dump_s": run.seconds,
        "parse_s": parse_s,
        "covering_paths_s": paths_s,
        "replay_s": replay_s,
        "edges_per_s": edges / replay_s,
        "steps_per_s": steps / replay_s,
    }


# -- time to first failure of each injected bug ---------------------------------------


def mutants(
    stateful: ModuleType, traces: dict[str, list[tlc.Trace]], config: ReplayConfig
) -> list[dict[str, Any]]:
    rows = []
    for name, (filename, _old, _new, meaning) in MUTATIONS.items():
        mutant = build_mutant(name)
        model = "MCRing" if filename == "allocator.py" else "MCStorage"
        replays, machines = [], []
        for _ in range(config.mutant_reps):
            replays.append(_replay_until_failure(mutant, model, traces[model]))
            machines.append(_machine_until_failure(stateful, mutant))
        replay = dict(replays[0], model=model, seconds=median([r["seconds"] for r in replays]))
        machine = dict(machines[0], seconds=median([m["seconds"] for m in machines]))
        rows.append(
            {"mutant": name, "meaning": meaning, "replay": replay, "state_machine": machine}
        )
        progress(f"mutants: {name}: replay {_show(replay)}, state machine {_show(machine)}")
    return rows


def _machine_until_failure(stateful: ModuleType, mutant: ModuleType) -> dict[str, Any]:
    counter: Any = type("Counter", (StepCount,), {"steps": 0})
    machine = _machine(stateful, mutant, 1000, 50, counter)
    start = time.perf_counter()
    caught = False
    try:
        machine.TestCase().runTest()
    except (AssertionError, ExceptionGroup):
        caught = True
    return {"caught": caught, "seconds": time.perf_counter() - start, "steps": counter.steps}


def _show(result: dict[str, Any]) -> str:
    verdict = "caught" if result["caught"] else "NOT caught"
    return f"{verdict} in {result['seconds']:.2f} s"


def run(config: ReplayConfig, sections: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    traces = corpora(config) if {"replay", "mutants"} & sections else {}
    stateful = _stateful_module() if {"replay", "mutants"} & sections else None
    if "replay" in sections and stateful is not None:
        out["corpus"] = replay_corpus(traces["MCStorage"], config.reps)
        out["state_machine"] = state_machine(stateful, config)
        out["edge_coverage"] = edge_coverage(config)
    if "mutants" in sections and stateful is not None:
        out["mutants"] = mutants(stateful, traces, config)
    return out
