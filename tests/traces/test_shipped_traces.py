"""The TLC output the oracle replays ships in the package (shmref.traces.shipped,
`make spec-traces`): current with the spec, several distinct counterexamples
per hazard, and one status per store whichever counterexample it is judged on."""

from __future__ import annotations

import json
import lzma
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import refimpl
from shmref import tlc
from shmref.core.levels import ASSUMPTION, FAIL, PASS
from shmref.core.paths import SPEC_DIR
from shmref.oracle.hazardcheck import hazard_check, hazard_counterexamples
from shmref.oracle.hazards import HAZARDS, Hazard
from shmref.traces import shipped

REPO = Path(__file__).resolve().parents[2]
LASSO = REPO / "tests" / "data" / "MCCopyFail-short-lasso.out"
COPY_FAIL = next(h for h in HAZARDS if h.model == "MCCopyFail")


def statuses(name: str, impl: object, hazard: Hazard) -> dict[str, str]:
    """The hazard's status on each shipped counterexample, one by one."""
    return {
        c.name: hazard_check(name, impl, hazard, [c])[0].status  # type: ignore[arg-type]
        for c in hazard_counterexamples(hazard.model)
    }


# -- the shipped data ---------------------------------------------------------------------


def test_every_shipped_entry_is_current_with_the_spec() -> None:
    assert shipped.stale() == [], "run `make spec-traces` and commit spec/traces"


def test_an_edited_spec_makes_exactly_its_models_stale(tmp_path: Path) -> None:
    spec = tmp_path / "spec"
    shutil.copytree(SPEC_DIR, spec)
    cfg = spec / "MCCopyFail.cfg"
    cfg.write_text(cfg.read_text().replace("N = 3", "N = 4"))
    shipped.manifest.cache_clear()
    problems = shipped.stale(spec / "traces")
    assert len(problems) == 1, problems
    assert "MCCopyFail" in problems[0] and shipped.REMAKE in problems[0]
    with pytest.raises(shipped.ShippedError, match="MCCopyFail.*make spec-traces"):
        shipped.counterexamples("MCCopyFail", spec / "traces")
    shipped.counterexamples("MCDoubleRead", spec / "traces")  # the others still read
    (spec / "StorageReader.tla").write_text((spec / "StorageReader.tla").read_text() + "\n")
    stale = " ".join(shipped.stale(spec / "traces"))
    assert "MCDoubleRead" in stale and "MCStorage" in stale and "MCRingIdCollision" not in stale


def test_each_hazard_ships_at_least_six_distinct_counterexamples() -> None:
    for hazard in HAZARDS:
        found = hazard_counterexamples(hazard.model)
        shapes = {
            (tuple(repr(s.vars["last_action"]) for s in c.trace.states), c.trace.back_to)
            for c in found
        }
        assert found[0].name == "bfs" and len(shapes) == len(found) >= 6, hazard.model


def test_the_corpora_and_the_graph_are_tlcs_own() -> None:
    for name in shipped.corpus_names():
        traces = shipped.corpus(name)
        entry = shipped.manifest()["corpora"][name]
        assert len(traces) == entry["traces"] and all(t.states for t in traces), name
    graph = shipped.state_graph("MCRing")
    assert len(graph.states) == shipped.manifest()["graphs"]["MCRing"]["states"]


def test_the_shipped_walks_are_what_covering_paths_makes_of_the_shipped_graph() -> None:
    """The walks the state-graph property replays are tlc.covering_paths' of
    the shipped graph today (a change to the search, or a graph made again,
    needs `make spec-traces`), and they take every edge."""
    graph, walks = shipped.state_graph_walks("MCRing")
    assert walks == tlc.covering_paths(graph, max_length=shipped.WALK_STEPS)
    assert tlc.edge_coverage(graph, walks) == 1.0


def _copy_of_the_traces(tmp_path: Path) -> Path:
    """The shipped folder with its spec beside it (entries' digests are of it)."""
    spec = tmp_path / "spec"
    shutil.copytree(SPEC_DIR, spec)
    return spec / "traces"


def test_walks_made_from_another_graph_are_refused(tmp_path: Path) -> None:
    folder = _copy_of_the_traces(tmp_path)
    entry = json.loads((folder / "manifest.json").read_text())["graphs"]["MCRing"]
    graph_file = folder / entry["file"]
    text = lzma.decompress(graph_file.read_bytes())  # the same graph, compressed otherwise
    graph_file.write_bytes(lzma.compress(text, preset=1))
    with pytest.raises(shipped.ShippedError, match="made from another graph of MCRing"):
        shipped.state_graph_walks("MCRing", folder)
    (folder / entry["walks"]).write_bytes(b"not xz")
    with pytest.raises(shipped.ShippedError, match="cannot be read.*make spec-traces"):
        shipped.state_graph_walks("MCRing", folder)


def test_a_graph_without_walks_is_refused(tmp_path: Path) -> None:
    folder = _copy_of_the_traces(tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    del manifest["graphs"]["MCRing"]["walks"]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(shipped.ShippedError, match="MCRing has no covering walks.*spec-traces"):
        shipped.state_graph_walks("MCRing", folder)


def test_a_users_counterexample_that_does_not_parse_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.out"
    bad.write_text("@!@!@STARTMSG 2217:4 @!@!@\n1: <Initial predicate>\n/\\ x = [a |->\n")
    proc = subprocess.run(
        [sys.executable, "-m", "shmref.conformance", "--impl", "refimpl"]
        + ["--hazard", "MCCopyFail", "--counterexample", str(bad)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_users_counterexample_is_replayed_and_named(tmp_path: Path) -> None:
    """`--hazard MODEL --counterexample FILE`: the user's TLC output (here the
    saved lasso, outside the package) replayed instead of the shipped ones."""
    proc = subprocess.run(
        [sys.executable, "-m", "shmref.conformance", "--impl", "refimpl", "--out", str(tmp_path)]
        + ["--hazard", "MCCopyFail", "--counterexample", str(LASSO)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"counterexample: {LASSO} (supplied)" in proc.stdout and "PASS" in proc.stdout
    assert "Traceback" not in proc.stderr


# -- one status per store, whichever counterexample ----------------------------------------


def test_refimpl_keeps_one_status_on_every_counterexample() -> None:
    """Five or more distinct counterexamples per hazard (TLC's search, its
    simulations, the saved lasso): refimpl closes each closable hazard on
    every one, and the unclosable one is the assumption on every one."""
    for hazard in HAZARDS:
        seen = statuses("refimpl", refimpl, hazard)
        want = ASSUMPTION if not hazard.closable else PASS
        assert set(seen.values()) == {want}, (hazard.model, seen)


def test_the_seed_keeps_one_status_on_every_counterexample(seed_module) -> None:
    for hazard in HAZARDS:
        seen = statuses("shmref_seed", seed_module, hazard)
        assert len(set(seen.values())) == 1, (hazard.model, seen)


def test_the_saved_lasso_closes_on_refimpl_and_stays_open_on_the_seed(seed_module) -> None:
    """The lasso that failed refimpl on a loaded machine (its put(k2) leaves the
    seed's protocol where the fixed one accepts it): closed at that step."""
    trace, _violated = shipped.read_counterexample(LASSO)
    lasso = next(c for c in hazard_counterexamples("MCCopyFail") if c.name == "saved-lasso")
    assert lasso.closing is not None and lasso.closing.step == 10
    assert lasso.trace == trace
    check, replay = hazard_check("refimpl", refimpl, COPY_FAIL, [lasso])
    assert check.status == PASS and replay is not None, check.detail
    assert check.detail.startswith("closed at step 10") and "put(" in check.detail
    check, _ = hazard_check("shmref_seed", seed_module, COPY_FAIL, [lasso])
    assert check.status == FAIL and "stay pinned" in check.detail


def test_without_the_closing_step_the_lasso_is_judged_by_the_hand_outs_read() -> None:
    """A broken input for both rules: the lasso without its closing step is
    still no failure of refimpl (the end check counts only chunks whose every
    hand-out was read), and an end check that counted every live chunk would
    have failed it."""
    trace, _violated = shipped.read_counterexample(LASSO)
    from shmref.oracle.hazards import replay_hazard

    replay = replay_hazard(refimpl, COPY_FAIL, trace, closing=None)
    assert replay.violation is None and not replay.closed
    assert any("ok <<0, 1>>" in row[3] for row in replay.rows)  # k2's chunk, never read


def test_the_verdict_is_the_worst_over_the_counterexamples(monkeypatch) -> None:
    """A store failing on some counterexamples only is FAIL, and the detail
    names on which; with none to judge on, ERROR names why."""
    from shmref.oracle import hazardcheck
    from shmref.oracle.verdict import Check

    hazard = next(h for h in HAZARDS if h.model == "MCDoubleRead")
    found = hazard_counterexamples(hazard.model)
    real = hazardcheck.judge

    def flaky(name, impl, hazard, counterexample):  # fails on the second one only
        if counterexample is found[1]:
            check = Check("protocol-safe", "h", "w", FAIL, detail="made up")
            check.failures.append({"case": "x", "trace": "t", "command": "c"})
            return check, None
        return real(name, impl, hazard, counterexample)

    monkeypatch.setattr(hazardcheck, "judge", flaky)
    check, _ = hazard_check("refimpl", refimpl, hazard, found)
    assert check.status == FAIL and len(check.failures) == 1
    assert check.detail.startswith(f"FAIL on 1 of {len(found)} counterexamples ({found[1].name})")
    monkeypatch.setattr(hazardcheck, "judge", real)
    check, _ = hazard_check("refimpl", refimpl, hazard, [], "the shipped file is stale")
    assert check.status == "ERROR" and check.detail == "the shipped file is stale"


@pytest.fixture(scope="module")
def seed_module():
    from shmref.seed.build import SeedError, build_seed_module

    try:
        return build_seed_module()
    except SeedError as exc:
        pytest.skip(f"no seed: {exc}")


# -- TLC still draws them (needs Java) ----------------------------------------------------


@pytest.mark.tlc
@pytest.mark.parametrize("model", ["MCDoubleRead", "MCIdCollision"])
def test_a_safety_counterexample_is_what_tlc_draws_today(model: str) -> None:
    """A safety counterexample of TLC's breadth-first search with one worker
    is stable: today's TLC draws the shipped one."""
    from shmref.docgen.spec_traces import draw

    made = draw(model, say=print, simulated=0)
    shipped_text = (SPEC_DIR / "traces" / "counterexamples" / model / "bfs.out").read_text()
    assert made[0][2] == shipped_text


def test_the_manifest_is_valid_json_that_names_its_maker() -> None:
    data = json.loads((SPEC_DIR / "traces" / "manifest.json").read_text())
    assert data["schema"] == 1 and "make spec-traces" in data["about"]


# -- the example stores: one status each, whichever counterexample -------------------------


def example_store(which: str) -> object:
    """The native store (C through cffi) or the Rust store (a program behind
    the process protocol), built from the checkout; skipped without a compiler."""
    from shmref.seed.impl import load_impl

    if str(REPO / "tests" / "examples") not in sys.path:  # also when run alone
        sys.path.append(str(REPO / "tests" / "examples"))
    if which == "native":
        from test_native_store import NATIVE_DIR, build_module

        if shutil.which("cc") is None and shutil.which("gcc") is None:
            pytest.skip("not run: missing a C compiler")
        build_module().build("core")
        if str(NATIVE_DIR) not in sys.path:
            sys.path.append(str(NATIVE_DIR))
        return load_impl("native_store")
    from test_rust_store import BIN, CARGO, build

    if CARGO is None:
        pytest.skip("cargo not found: the Rust checks are not run")
    build()
    return load_impl(f"exec:{BIN}")


@pytest.mark.slow
@pytest.mark.parametrize("which", ["native", "rust"])
def test_the_example_stores_keep_one_status_on_every_counterexample(which: str) -> None:
    """The native store closes what refimpl closes; the Rust store, the
    seed's protocol in Rust, fails what the seed fails: each on every
    counterexample alike (a hazard its serde cannot fail in process is not run)."""
    store = example_store(which)
    for hazard in HAZARDS:
        seen = statuses(which, store, hazard)
        assert len(set(seen.values())) == 1, (which, hazard.model, seen)
        if which == "native":  # refimpl's fixes in C: it closes what refimpl closes
            assert set(seen.values()) <= {PASS, ASSUMPTION}, (hazard.model, seen)
    if which == "native":
        lasso = next(c for c in hazard_counterexamples("MCCopyFail") if c.name == "saved-lasso")
        check, _ = hazard_check(which, store, COPY_FAIL, [lasso])  # type: ignore[arg-type]
        assert check.status == PASS and check.detail.startswith("closed at step 10")
