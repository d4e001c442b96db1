"""Where CI's time goes (issue 34): docs/ci-time.md's tables are what
`python -m bench.citime` renders from docs/ci-time.json; junit reports and
step times are reduced to them; bad input is one line, exit 2; the pytest
plugin records each test's CPU seconds; `make ci` times its steps
(.ci/steps) and stops at a failing one, still printing the times."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import citime

REPO = Path(__file__).resolve().parents[2]

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.tools.test_citime" name="test_a" time="12.5">
  <properties><property name="cpu_s" value="20.25" /></properties></testcase>
<testcase classname="tests.tools.test_citime.TestGroup" name="test_b[x-1]" time="0.2">
  <properties><property name="cpu_s" value="0.1" /></properties></testcase>
<testcase classname="shmref.suite.test_replay" name="test_c" time="3.0" />
<testcase classname="tests.tools.test_citime" name="test_skipped" time="0.0"><skipped /></testcase>
</testsuite></testsuites>
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- the committed document ------------------------------------------------------------------


def test_ci_time_md_is_what_the_data_renders() -> None:
    current = citime.DOC.read_text(encoding="utf-8")
    expected = citime.generate(current, citime.load_data(citime.DATA))
    assert current == expected, "docs/ci-time.md is stale: run `python -m bench.citime`"


def test_check_mode_reports_a_stale_document(tmp_path: Path, capsys: Any) -> None:
    doc = write(tmp_path / "ci-time.md", citime.DOC.read_text(encoding="utf-8"))
    assert citime.main(["--check", "--doc", str(doc)]) == 0
    text = doc.read_text(encoding="utf-8")
    end = text.index(citime.END)
    doc.write_text(text[:end] + "| a row nobody generated |\n" + text[end:], encoding="utf-8")
    assert citime.main(["--check", "--doc", str(doc)]) == 1
    assert "is stale" in capsys.readouterr().out


# -- reading and reducing ------------------------------------------------------------------


def test_a_junit_report_is_reduced_per_tier_file_and_test(tmp_path: Path) -> None:
    times = citime.read_junit("test", write(tmp_path / "test.xml", JUNIT))
    assert [t.test for t in times] == [
        "tests/tools/test_citime.py::test_a",
        "tests/tools/test_citime.py::TestGroup::test_b[x-1]",
        "shmref/suite/test_replay.py::test_c",
    ]  # a skip that took no time is left out
    assert times[2].cpu_s is None  # a report without the plugin: wall time only
    data = citime.reduce(times)
    tier = data["tiers"]["test"]
    assert (tier["tests"], tier["wall_s"], tier["cpu_s"]) == (3, 15.7, 20.4)
    assert tier["files"]["tests/tools/test_citime.py"]["tests"] == 2
    assert [t["test"] for t in data["tests"]] == [  # a second or more, slowest first
        "tests/tools/test_citime.py::test_a",
        "shmref/suite/test_replay.py::test_c",
    ]
    text = citime.render({"measured": "here", **data})
    assert "| `make test` | 3 " in text and "`tests/tools/test_citime.py::test_a`" in text


def test_gather_reads_what_make_ci_leaves(tmp_path: Path) -> None:
    write(tmp_path / "test.xml", JUNIT)
    write(tmp_path / "test-slow.xml", JUNIT.replace("test_a", "test_slow_one"))
    write(tmp_path / "steps.tsv", "lint\t41.5\t0\ntest\t250.0\t0\n")
    write(tmp_path / "wheel-check.tsv", "build the wheel\t12.0\t0\n")
    data = citime.gather(tmp_path, "a note")
    assert set(data["tiers"]) == {"test", "test-slow"}
    assert data["steps"][1] == {"step": "test", "seconds": 250.0, "exit": 0}
    text = citime.render(data, markdown=False)
    assert "all of `make ci`" in text and "292" in text and "build the wheel" in text


def test_a_step_in_the_background_is_not_added_to_the_total(tmp_path: Path) -> None:
    """make ci's wall time is when its last step ended, not the sum of steps that
    ran side by side; the step in the background says so in the table."""
    write(tmp_path / "test.xml", JUNIT)
    steps = "lint\t4.0\t0\t4.0\ntest\t200.0\t0\t204.0\nwheel-check&\t250.0\t0\t254.1\n"
    steps += "test-slow\t700.0\t0\t904.5\n"
    write(tmp_path / "steps.tsv", steps)
    data = citime.gather(tmp_path, "a note")
    assert citime.steps_total(data["steps"]) == 904.5  # not 1,154
    text = citime.render(data, markdown=False)
    assert "`make wheel-check` (in the background" in text and "904" in text
    assert "1,154" not in text
    write(tmp_path / "steps.tsv", steps.replace("254.1", "later"))
    with pytest.raises(citime.CiTimeError, match="steps.tsv:3: the fourth field"):
        citime.gather(tmp_path, "a note")


@pytest.mark.parametrize(
    "name, text, says",
    [
        ("test.xml", "<testsuites><testcase", "not a junit XML report"),
        ("test.xml", "<testsuites></testsuites>", "no testcase"),
        ("test.xml", JUNIT.replace('time="12.5"', 'time="soon"'), "not a number"),
        ("steps.tsv", "lint\tforty\t0\n", "steps.tsv:1: not `step<TAB>seconds<TAB>exit`"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    tmp_path: Path, capsys: Any, name: str, text: str, says: str
) -> None:
    if name != "test.xml":
        write(tmp_path / "test.xml", JUNIT)
    write(tmp_path / name, text)
    assert citime.main(["--print", "--build", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err, err


def test_nothing_to_read_is_one_line_exit_2(tmp_path: Path, capsys: Any) -> None:
    assert citime.main(["--print", "--build", str(tmp_path / "none")]) == 2
    assert "run `make ci` first" in capsys.readouterr().err
    assert citime.main(["--check", "--data", str(tmp_path / "none.json")]) == 2
    doc = write(tmp_path / "doc.md", "no markers here\n")
    assert citime.main(["--check", "--doc", str(doc)]) == 2
    assert "lacks the markers" in capsys.readouterr().err


# -- the plugin and the step timer -----------------------------------------------------------


def test_the_plugin_records_each_tests_cpu_seconds(tmp_path: Path) -> None:
    write(tmp_path / "test_busy.py", "def test_busy():\n    sum(range(3_000_000))\n")
    log = tmp_path / "times.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        + ["-p", "bench.citime_plugin", f"--junitxml={tmp_path / 'out.xml'}", "test_busy.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO), "CITIME_LOG": str(log)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (time,) = citime.read_junit("test", tmp_path / "out.xml")
    assert time.cpu_s is not None and time.cpu_s > 0
    (line,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert line["test"] == "test_busy.py::test_busy" and line["cpu_s"] > 0


def fake_make(tmp_path: Path, failing: str) -> Path:
    """A `make` that says which step it runs with which options, failing one."""
    return write(
        tmp_path / "make",
        "#!/usr/bin/env bash\n"
        'echo "make $*" >>"$(dirname "$0")/calls"\n'
        f'case "$*" in *" {failing}") exit 3;; esac\n',
    )


def ci_steps(tmp_path: Path, failing: str, *steps: str) -> subprocess.CompletedProcess[str]:
    """.ci/steps with the fake make, its times in tmp_path/ci."""
    make = fake_make(tmp_path, failing=failing)
    make.chmod(0o755)
    return subprocess.run(
        ["bash", str(REPO / ".ci" / "steps"), *steps],
        env={**os.environ, "MAKE": str(make), "CI_TIME_DIR": str(tmp_path / "ci")},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_make_ci_times_each_step_and_stops_at_a_failing_one(tmp_path: Path) -> None:
    done = ci_steps(tmp_path, "test-slow", "lint", "test", "test-slow", "wheel-check")
    assert done.returncode == 3, done.stdout + done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls == [
        "make --no-print-directory -o setup lint",  # lint once ...
        "make --no-print-directory -o setup -o lint test",  # ... not again in test
        "make --no-print-directory -o setup -o lint test-slow",
    ]  # wheel-check never ran
    steps = citime.read_steps(tmp_path / "ci" / "steps.tsv")
    assert [(s["step"], s["exit"]) for s in steps] == [("lint", 0), ("test", 0), ("test-slow", 3)]
    assert all(s["ended"] >= s["seconds"] for s in steps)
    assert "==== make test: " in done.stdout
    assert "==== time per step" in done.stdout and "test-slow" in done.stdout.split("per step")[1]


def test_a_step_in_the_background_runs_beside_the_next_and_is_waited_for(
    tmp_path: Path,
) -> None:
    """`STEP&` starts at once beside the steps after it; its output is shown when
    it is collected after the last step, and its failure is make ci's."""
    done = ci_steps(tmp_path, "wheel-check", "lint", "wheel-check&", "test", "test-slow")
    assert done.returncode == 3, done.stdout + done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert sorted(calls[1:]) == [
        "make --no-print-directory -o setup -o lint test",
        "make --no-print-directory -o setup -o lint test-slow",
        "make --no-print-directory -o setup -o lint wheel-check",
    ]
    steps = {s["step"]: s for s in citime.read_steps(tmp_path / "ci" / "steps.tsv")}
    assert set(steps) == {"lint", "wheel-check&", "test", "test-slow"}
    assert steps["wheel-check&"]["exit"] == 3 and steps["test-slow"]["exit"] == 0
    assert "==== make wheel-check (in the background):" in done.stdout
    # passing, the same steps end with exit 0 and the background step collected
    (tmp_path / "calls").unlink()
    done = ci_steps(tmp_path, "nothing", "lint", "wheel-check&", "test", "test-slow")
    assert done.returncode == 0, done.stdout + done.stderr
    assert len((tmp_path / "calls").read_text().splitlines()) == 4


def test_ci_runs_the_readme_command_and_prints_its_slowest_tests() -> None:
    """.ci/run is `make ci`; `make ci` runs the four steps through the timer;
    both pytest tiers print their 15 slowest tests and leave their junit report."""
    assert (REPO / ".ci" / "run").read_text().strip().splitlines()[-1] == "make ci"
    makefile = (REPO / "Makefile").read_text()
    ci = makefile.split("\nci: ", 1)[1].split("\n\n", 1)[0]
    assert "bash .ci/steps lint 'wheel-check&' test test-slow" in ci
    timed = makefile.split("\nTIMED = ", 1)[1].split("\n", 1)[0]
    assert "--durations=15" in timed and "bench.citime_plugin" in timed and "junitxml" in timed
    for target in ("test", "test-slow"):
        recipe = makefile.split(f"\n{target}: ", 1)[1].split("\n\n", 1)[0]
        assert "$(TIMED)" in recipe, target


def test_a_long_parameter_is_cut_in_the_tables() -> None:
    assert citime.short("t.py::test_x[a-b]") == "t.py::test_x[a-b]"
    long = "t.py::test_x[" + "WFlag(S.wf, id) * R-" * 5 + "]"
    assert citime.short(long).startswith("t.py::test_x[WFlag") and citime.short(long).endswith("…]")
    assert len(citime.short(long)) < len(long)
