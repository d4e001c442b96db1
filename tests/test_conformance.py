"""`python -m shmref.conformance` end to end: refimpl passes every level, a
broken copy of refimpl fails the level its bug belongs to, and the report
carries, for each failure, a trace and a command that replays it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shmref.conformance import LEVELS, PROTOCOL, failure_trace
from shmref.mutants import BUILD, build_mutant

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.tlc


def conformance(*args: str, extra_path: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    paths = [str(REPO), *([str(extra_path)] if extra_path else []), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return subprocess.run([sys.executable, "-m", "shmref.conformance", *args], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)


def test_refimpl_passes_every_level(tmp_path, is_refimpl):
    if not is_refimpl:
        pytest.skip("about refimpl")
    proc = conformance("--impl", "refimpl", "--quick", "--out", str(tmp_path))
    report = json.loads((tmp_path / "conformance.json").read_text())
    markdown = (tmp_path / "conformance.md").read_text()
    assert proc.returncode == 0, proc.stdout + proc.stderr + markdown
    assert report["ok"] and report["impl"] == "refimpl"
    for level in LEVELS:
        assert report["levels"][level]["status"] == "pass", level
        assert f"| {level} | **pass" in markdown
    checks = [c for level in LEVELS for c in report["levels"][level]["checks"]]
    names = {c["name"] for c in checks}
    assert {"test_layout.py::test_same_results_as_refimpl", "hazard MCDoubleRead",
            "trace validation", "test_stateful.py::test_store_machine"} <= names
    # the hazards no layout-compatible implementation closes are assumptions
    statuses = {c["name"]: c["status"] for c in checks}
    assert statuses["hazard MCLostReader"] == "assumption"
    assert statuses["hazard MCIdWrap"] == "pass"  # F4: clear rotates the signing secret
    assert statuses["hazard MCDoubleRead"] == "pass"


def test_a_mutant_fails_the_protocol_level(tmp_path, is_refimpl):
    """Reclaiming after one reader's read is a protocol bug: the replays and
    the state machine catch it, and each failure says how to replay it."""
    if not is_refimpl:
        pytest.skip("mutants are copies of refimpl")
    name = "free_rule_without_n_readers"
    build_mutant(name)
    module = f"refimpl_{name}"
    proc = conformance("--impl", module, "--quick", "--level", PROTOCOL,
                       "--out", str(tmp_path), extra_path=BUILD / name)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "conformance.json").read_text())
    assert not report["ok"]
    assert report["levels"][PROTOCOL]["status"] == "FAIL"
    failed = [c for c in report["levels"][PROTOCOL]["checks"] if c["status"] == "FAIL"]
    assert any(c["name"].startswith("test_replay.py::test_simulation_corpus_replays")
               for c in failed)
    for check in failed:
        for failure in check["failures"]:
            assert f"--impl {module}" in failure["command"]
            assert failure["trace"].strip()
    markdown = (tmp_path / "conformance.md").read_text()
    assert "| protocol-safe | **FAIL" in markdown and "diverged at state" in markdown


def test_failure_trace_is_the_shrunk_example():
    text = "\n".join([
        "AssertionError: put('a', 1): implementation gave X, model expects Y",
        "self = Machine()",
        "E       AssertionError: put('a', 1): implementation gave X, model expects Y",
        "E       assert False",
        "E       Falsifying example:",
        "E       state = Machine()",
        "E       state.put(key='a', size=1)",
        "E       state.teardown()",
        "E       Explanation:",
        "E           These lines were always and only run by failing examples:",
        "E       You can reproduce this example by temporarily adding @reproduce_failure",
    ])
    assert failure_trace(text) == "\n".join([
        "AssertionError: put('a', 1): implementation gave X, model expects Y",
        "Falsifying example:", "state = Machine()", "state.put(key='a', size=1)",
        "state.teardown()"])


def test_hazard_replay_command_reports_the_assumption(is_refimpl):
    """`--hazard` replays one counterexample; an assumption exits 0, with its table."""
    if not is_refimpl:
        pytest.skip("about refimpl")
    proc = conformance("--impl", "refimpl", "--hazard", "MCLostReader")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ASSUMPTION" in proc.stdout and "get_begin" in proc.stdout
