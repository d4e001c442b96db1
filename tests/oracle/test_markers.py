"""The markers `slow` and `tlc` select what they claim (`make test` runs
`-m "not slow"`, `make test-slow` runs `-m slow`, `-m "not tlc"` runs
without Java). This is about pytest's command line itself, so it runs two
collections (no test runs) of three files as subprocesses: each expression
keeps the tests it names and leaves out the others."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

QUICK_TLC = "tests/spec/test_tlc.py::test_passing_model"
SLOW_TLC = "tests/oracle/test_conformance.py::TestCli::test_refimpl_passes_every_level"
PURE = "tests/spec/test_tlc.py::test_frozen_dict"
SLOW_PURE = "tests/fuzzing/test_fuzz.py::test_fuzz_gets_only_clear_errors[all]"
QUICK_PURE = "tests/fuzzing/test_fuzz.py::test_fuzz_gets_only_clear_errors[some]"
# files collected with or without Java (test_check and test_deep skip as modules without it)
FILES = ["tests/spec/test_tlc.py", "tests/oracle/test_conformance.py", "tests/fuzzing/test_fuzz.py"]


def collected(expression: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + ["-p", "no:xdist", "-m", expression, *FILES],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return {line for line in done.stdout.splitlines() if "::" in line}


def test_tlc_and_slow_select_what_they_claim() -> None:
    tlc_quick = collected("tlc and not slow")
    assert QUICK_TLC in tlc_quick, sorted(tlc_quick)
    assert not {SLOW_TLC, PURE, QUICK_PURE, SLOW_PURE} & tlc_quick
    # SLOW_TLC is a TLC test: it is here only for its `slow`; QUICK_TLC is not slow
    slow_or_pure = collected("slow or not tlc")
    assert {SLOW_TLC, SLOW_PURE, PURE, QUICK_PURE} <= slow_or_pure, sorted(slow_or_pure)
    assert QUICK_TLC not in slow_or_pure


def suite_collect(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + ["-p", "no:xdist", "--shmref-impl", "refimpl", *args, "shmref/suite"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


# Each collected test's markers, as `-m` reads them once every hook has run
# (a plugin of the collection below: one collection, not one per level).
MARKER_DUMP = """
import json, os, pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    with open(os.environ["MARKER_DUMP_FILE"], "w") as out:
        json.dump({i.nodeid: sorted(m.name for m in i.iter_markers()) for i in items}, out)
"""


def test_level_markers_select_their_conformance_groups(tmp_path: Path) -> None:
    """`-m hardened` etc. (shmref/suite/conftest.py) keep exactly the tests of
    that level's groups (shmref.core.suitegroups, the oracle's table too), and no
    level takes a checker's own self-test (not part of any group). One
    collection: `-m MARKER` keeps the tests that carry MARKER once the
    collection's hooks have run, which is what the dump records."""
    import json
    import os

    from shmref.core.levels import LEVEL_MARKERS
    from shmref.core.suitegroups import TEST_GROUPS, group_of
    from shmref.oracle import testgroups

    assert testgroups.TEST_GROUPS is TEST_GROUPS  # one table, read by the oracle and the suite

    (tmp_path / "shmref_marker_dump.py").write_text(MARKER_DUMP)
    dump = tmp_path / "markers.json"
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + ["-p", "no:xdist", "-p", "shmref_marker_dump", "--shmref-impl", "refimpl"]
        + ["-m", " or ".join(LEVEL_MARKERS.values()), "shmref/suite"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": path, "MARKER_DUMP_FILE": str(dump)},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    dumped = json.loads(dump.read_text())
    markers = {node.split("suite/", 1)[1]: set(names) for node, names in dumped.items()}
    kept = {ln.split("suite/", 1)[1] for ln in done.stdout.splitlines() if "::" in ln}
    levels = set(LEVEL_MARKERS.values())
    assert kept and kept == {n for n, names in markers.items() if names & levels}
    selected: dict[str, set[str]] = {}
    for level, marker in LEVEL_MARKERS.items():
        nodes = {n for n, names in markers.items() if marker in names}
        assert nodes, marker
        for node in nodes:
            group = group_of(node, TEST_GROUPS)
            assert group is not None and group.level == level, (marker, node)
        selected[marker] = nodes
    assert any("TestBadInput" in n for n in selected["hardened"])
    assert not any("TestBadInput" in n for n in selected["seed_compatible"])
    every = set().union(*selected.values())
    assert not any("catches_injected_bugs" in n for n in every)
    # a broken input: a node no group selects gets no level
    assert group_of("test_ring.py::test_not_in_any_group", ()) is None


def test_an_unknown_profile_is_one_usage_error() -> None:
    done = suite_collect("--shmref-profile", "no-such-profile")
    assert done.returncode == 4, done.stdout[-2000:] + done.stderr[-2000:]
    assert "unknown shmref profile 'no-such-profile'" in done.stderr
    assert "Traceback" not in done.stderr


def test_without_tlc_the_suites_replays_still_run() -> None:
    """The suite's TLC traces ship in the package: where the jar (or Java) is
    missing, the replays run and pass all the same, and no test of the suite
    is marked `tlc`."""
    import os

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist"]
        + ["--shmref-impl", "refimpl", "shmref/suite/test_replay.py", "-k", "MCStorage"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TLA2TOOLS_JAR": "/nonexistent/tla2tools.jar"},
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert "1 passed" in done.stdout and "skipped" not in done.stdout, done.stdout
    suite = (REPO / "shmref" / "suite").glob("test_*.py")
    assert not [p.name for p in suite if "mark.tlc" in p.read_text()]
