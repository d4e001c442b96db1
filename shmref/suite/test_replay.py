"""TLC traces replayed on the implementation under test, step by step.

The traces are TLC's, shipped in the package (simulations of the models with
fixed seeds, and the allocator model's whole state graph: `make spec-traces`,
shmref.traces.shipped), so every machine replays the same ones and no TLC
runs here; every trace is replayed on real shared memory by
`shmref.traces.replay`. A trace that diverges fails the test with the
step-by-step table.
"""

from __future__ import annotations

import time

import pytest

from shmref import tlc
from shmref.core.paths import SPEC_DIR
from shmref.render import sink
from shmref.seed.mutants import build_mutant
from shmref.store.values import UNIT, store_unit
from shmref.traces import shipped
from shmref.traces.replay import Replayer


@pytest.fixture(scope="module")
def corpus() -> dict[str, list[tlc.Trace]]:
    return {
        "MCRing": shipped.corpus("MCRing"),
        "MCStorage": storage_corpus("MCStorage"),
    }


def storage_corpus(model: str) -> list[tlc.Trace]:
    """The simulations of a storage model (MCStorage or MCStorageWide)."""
    return shipped.corpus(model)


def storage_model(impl) -> str:
    """MCStorage, or MCStorageWide for a store whose serde needs units wider
    than 16 bytes: there the seed's free target is another number of units,
    so the store is judged by the model of its own width, not its serde's."""
    return "MCStorageWide" if store_unit(impl) > UNIT else "MCStorage"


def replay_all(impl, model: str, traces: list[tlc.Trace]) -> tuple[int, list[str]]:
    replayer = Replayer(impl, SPEC_DIR / f"{model}.cfg")
    steps, failures = 0, list[str]()
    for i, trace in enumerate(traces):
        report = replayer.replay(trace, f"{model} simulation #{i}")
        steps += len(report.replayed)  # counted, not drawn
        if not report.ok:
            if not failures and report.timeline is not None:
                sink.save(report.timeline)  # the report draws the first divergence
            failures.append(report.table())
    return steps, failures


@pytest.mark.parametrize("model", ["MCRing", "MCStorage"])
def test_simulation_corpus_replays(impl, corpus, model):
    if model == "MCStorage" and storage_model(impl) != model:
        model = storage_model(impl)
        corpus = {model: storage_corpus(model)}
    traces = corpus[model]
    steps, failures = replay_all(impl, model, traces)
    actions = {s.vars["last_action"]["name"] for t in traces for s in t.states[1:]}
    print(f"{model}: {len(traces)} traces, {steps} steps, actions {sorted(actions)}")
    assert not failures, failures[0]
    assert steps > 1000 and len(actions) >= 4


@pytest.mark.slow
def test_allocator_state_graph_every_edge(impl):
    """Paths through MCRing's whole state graph that cover every edge."""
    graph, paths = shipped.state_graph_walks("MCRing")  # TLC -dump dot and its walks, shipped
    coverage = tlc.edge_coverage(graph, paths)
    replayer = Replayer(impl, SPEC_DIR / "MCRing.cfg")
    started, steps = time.monotonic(), 0
    for path in paths:
        report = replayer.replay(tlc.path_to_trace(graph, path), "MCRing edge path")
        steps += len(report.replayed)  # counted, not drawn
        if not report.ok and report.timeline is not None:
            sink.save(report.timeline)
        assert report.ok, report.table()
    elapsed = time.monotonic() - started
    print(
        f"MCRing: {len(graph.states)} states, {len(graph.edges)} edges, {len(paths)} paths, "
        f"{steps} steps replayed in {elapsed:.1f} s, edge coverage {coverage:.1%}"
    )
    assert coverage == 1.0


@pytest.mark.parametrize(
    "mutant",
    ["free_rule_without_n_readers", "get_cached_not_counted", "no_lap_wrap", "touch_ignored"],
)
def test_replay_catches_injected_bugs(corpus, mutant, is_refimpl):
    """A broken copy of refimpl diverges from the spec on the same corpus."""
    if not is_refimpl:
        pytest.skip("mutants are copies of refimpl")
    model = "MCRing" if mutant == "no_lap_wrap" else "MCStorage"
    _steps, failures = replay_all(build_mutant(mutant), model, corpus[model])
    assert failures, f"replay did not catch mutant {mutant}"
