"""`--repeat N` (issue 42): a property that did not pass is run again, up to
N runs in all; one whose runs differ is FLAKY with each attempt's status,
and an expectations file may name it as a known flake.

In this process: the merging, on made-up runs. Through the CLI: a store
that goes wrong once (tests/faulty/flaky_get.py: the first reader get in
one test raises, later ones work) is FLAKY with --repeat 3, its first
attempt's trace kept; with --repeat 1 it is a plain FAIL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from shmref.core.levels import FAIL, FLAKY, PASS, SEED, SKIP
from shmref.oracle.expectations import parse
from shmref.oracle.repeat import repeat
from shmref.oracle.report import Report
from shmref.oracle.verdict import Check

REPO = Path(__file__).resolve().parents[2]
FLAKY_TEST = "test_storage.py::test_reads_count_and_reclaim_fifo"  # as tests/faulty/flaky_get.py


def made_up(*statuses: tuple[str, str]) -> Report:
    checks = [Check(SEED, name, "", status) for name, status in statuses]
    for check in checks:
        if check.status == FAIL:
            check.failures = [{"case": check.name, "trace": "boom", "command": "again"}]
    return Report("x", True, checks, 1.0, [])


def test_runs_that_differ_are_flaky_and_the_same_keep_their_status():
    runs = {
        2: made_up(("a", PASS), ("b", FAIL)),
        3: made_up(("b", FAIL)),
    }
    asked: list[list[str]] = []

    def rerun(names: list[str], attempt: int) -> Report:
        asked.append(names)
        return runs[attempt]

    first = made_up(("a", FAIL), ("b", FAIL), ("c", PASS), ("d", SKIP))
    repeat(first, 3, False, rerun)
    assert asked == [["a", "b"], ["b"]]  # not c (passed) nor d (not judged); a no more
    a, b, c, d = first.checks
    assert (a.status, a.attempts) == (FLAKY, [FAIL, PASS])
    assert a.failures[0]["attempt"] == "1" and a.detail.startswith("attempts: FAIL, pass")
    assert (b.status, b.attempts) == (FAIL, [FAIL, FAIL, FAIL])
    assert b.detail.startswith("FAIL on all 3 runs")
    assert (c.attempts, d.attempts) == ([], [])
    assert first.level_status(SEED) == FAIL  # a flake is no pass
    assert first.seconds == 3.0  # the three runs' time together


def test_repeat_all_runs_passing_properties_too():
    asked: list[list[str]] = []

    def rerun(names: list[str], attempt: int) -> Report:
        asked.append(names)
        return made_up(("c", FAIL))

    first = made_up(("c", PASS))
    repeat(first, 2, True, rerun)
    assert asked == [["c"]] and first.checks[0].status == FLAKY


def conformance(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests" / "faulty")]),
        "FLAKY_GET_MARK": str(out.parent / f"{out.name}.mark"),
    }
    command = [sys.executable, "-m", "shmref.conformance", "--impl", "flaky_get", "--quick"]
    command += ["--no-baseline", "--no-progress", "--level", SEED, "--only", FLAKY_TEST]
    command += ["--out", str(out), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


def check_of(out: Path) -> dict[str, object]:
    report = json.loads((out / "conformance.json").read_text())
    (check,) = report["levels"][SEED]["checks"]
    assert isinstance(check, dict)
    return check


def test_a_store_wrong_once_is_flaky_with_repeat(tmp_path):
    proc = conformance(tmp_path / "once", "--repeat", "1")
    assert proc.returncode == 1
    assert check_of(tmp_path / "once")["status"] == FAIL

    out = tmp_path / "three"
    proc = conformance(out, "--repeat", "3")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"FLAKY: {FLAKY_TEST}: FAIL, pass" in proc.stdout
    check = check_of(out)
    assert (check["status"], check["attempts"]) == (FLAKY, [FAIL, PASS])
    (failure,) = check["failures"]  # type: ignore[misc]
    assert failure["attempt"] == "1" and "RuntimeError" in failure["trace"]
    assert "attempts: FAIL, pass" in (out / "conformance.md").read_text()


def test_a_known_flake_in_the_expectations_file_passes_the_gate(tmp_path):
    known = tmp_path / "known.toml"
    known.write_text(
        f'version = 1\n[[expected]]\nproperty = "{FLAKY_TEST}"\nstatus = "FLAKY"\n'
        'reason = "flaky_get goes wrong once"\n'
    )
    parse(known.read_text(), str(known))
    proc = conformance(tmp_path / "run", "--repeat", "3", "--expect", str(known))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"FLAKY: {FLAKY_TEST}: FAIL, pass" in proc.stdout


def test_repeat_all_needs_repeat(capsys):
    from shmref.oracle import cli

    assert cli.main(["--impl", "refimpl", "--repeat-all"]) == 2
    assert "--repeat-all goes with --repeat N" in capsys.readouterr().err


def test_the_seed_baseline_gets_the_same_repeats(tmp_path, monkeypatch):
    """With --repeat N the seed's own run repeats too (cached apart), so that
    a flake of the seed is FLAKY beside the property, not its behaviour."""
    from shmref.oracle.baseline import SeedBaseline

    monkeypatch.setenv("SHMREF_CACHE_DIR", str(tmp_path))
    once, thrice = SeedBaseline(True, (SEED,), False), SeedBaseline(True, (SEED,), False, repeat=3)
    assert "--repeat" not in once.args and thrice.args[-2:] == ["--repeat", "3"]
    assert thrice.folder.name == once.folder.name + "-repeat3"
