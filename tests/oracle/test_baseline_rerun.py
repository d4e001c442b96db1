"""A seed baseline never keeps an accident (issue 40): a property of the
seed's own run that came out ERROR, CRASH or TIMEOUT is run again (`--only`)
before the baseline is cached, the second result is kept, and its detail
and the report's `reruns` say what the first run gave.

The seed's run is a test double here (a script standing in for
`python -m shmref.conformance --impl seed`): its first run gives one
property ERROR by accident and another CRASH for good, its re-run gives the
first one `pass`. Fast: no store, no TLC."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from shmref.core.levels import HARDENED, LEVELS, PROTOCOL, SEED
from shmref.oracle import baseline
from shmref.oracle.baseline import SeedBaseline, kept_second

FLAKY, BROKEN, SOUND = "hazard MCCopyFail", "test_ring.py::test_wraps", "trace validation"

# The double: argv as the real run gets it; writes --out/conformance.json and
# appends its --only list to calls.jsonl beside itself.
DOUBLE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from shmref.oracle.report import Report
    from shmref.core.levels import PROTOCOL, SEED
    from shmref.oracle.verdict import Check

    argv = sys.argv[1:]
    out = Path(argv[argv.index("--out") + 1])
    only = [argv[k + 1] for k, a in enumerate(argv) if a == "--only"]
    with open(Path(__file__).with_name("calls.jsonl"), "a") as calls:
        calls.write(json.dumps(only) + "\\n")
    again = bool(only)
    checks = [
        Check(SEED, "test_ring.py::test_wraps", "wraps", "CRASH", detail="signal 11"),
        Check(PROTOCOL, "hazard MCCopyFail", "copy fails", "pass" if again else "ERROR",
              detail="" if again else "TLC: out of memory"),
        Check(PROTOCOL, "trace validation", "a run", "FAIL", detail="step 10"),
    ]
    checks = [c for c in checks if not only or c.name in only]
    report = Report("shmref_seed", False, checks, 1.0, [], (SEED, PROTOCOL))
    report.seed_levels = {lv: report.level_status(lv) for lv in (SEED, PROTOCOL)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "conformance.json").write_text(json.dumps(report.to_json()))
    """
)


@pytest.fixture
def double(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The seed's run replaced by DOUBLE, a seed file that exists, a fresh cache."""
    script = tmp_path / "double" / "seed_run.py"
    script.parent.mkdir()
    script.write_text(DOUBLE)
    seed = tmp_path / "seed.txt"
    seed.write_text("the seed")
    monkeypatch.setenv("SHMREF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(baseline, "default_seed_path", lambda: seed)
    monkeypatch.setattr(
        SeedBaseline, "command", staticmethod(lambda: [sys.executable, str(script)])
    )
    return script.with_name("calls.jsonl")


def checks_of(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for data in report["levels"].values() for c in data["checks"]}


def test_an_accident_is_run_again_and_the_second_result_cached(double: Path, tmp_path: Path):
    made = SeedBaseline(False, (SEED, PROTOCOL), all_groups=False)
    made.start()
    report = made.report(tmp_path / "out")
    calls = [json.loads(line) for line in double.read_text().splitlines()]
    assert calls == [[], sorted([BROKEN, FLAKY])]  # the run, then only its accidents
    checks = checks_of(report)
    assert checks[FLAKY]["status"] == "pass"
    assert "first run: ERROR (TLC: out of memory); re-run: pass (kept)" in checks[FLAKY]["detail"]
    assert checks[BROKEN]["status"] == "CRASH"
    assert checks[BROKEN]["detail"].startswith("CRASH (signal 11) again on a re-run")
    assert checks[SOUND] == {**checks[SOUND], "status": "FAIL", "detail": "step 10"}
    assert report["reruns"] == [
        {"level": SEED, "name": BROKEN, "first": "CRASH", "second": "CRASH"},
        {"level": PROTOCOL, "name": FLAKY, "first": "ERROR", "second": "pass"},
    ]
    assert {lv: report["levels"][lv]["status"] for lv in LEVELS} == {
        SEED: "FAIL",
        HARDENED: "not run",
        PROTOCOL: "FAIL",  # trace validation's FAIL is the seed's answer
        "seed-layout": "not run",
    }
    # what the run shows beside each property is the kept result, and so is the cache
    assert json.loads((tmp_path / "out" / "seed-baseline" / "conformance.json").read_text()) == (
        report
    )
    assert "re-run: pass (kept)" in (made.folder / "conformance.md").read_text()
    cached = SeedBaseline(False, (SEED, PROTOCOL), all_groups=False)
    cached.start()
    assert cached.child is None and cached.report(tmp_path / "again") == report
    assert len(double.read_text().splitlines()) == 2  # nothing run for the cached one


def test_a_level_the_accident_alone_failed_passes_once_it_is_gone():
    first = {
        "impl": "shmref_seed",
        "quick": True,
        "seconds": 1.0,
        "not_run": [],
        "levels": {
            lv: {"status": "not run", "seed": "not run", "meaning": "", "checks": []}
            for lv in LEVELS
        },
    }
    check = {"level": PROTOCOL, "what": "", "cases": "", "failures": [], "seed": ""}
    first["levels"][PROTOCOL] = {
        "status": "FAIL",
        "seed": "FAIL",
        "meaning": "",
        "checks": [{**check, "name": FLAKY, "status": "TIMEOUT", "detail": "ran past 900 s"}],
    }
    second = json.loads(json.dumps(first))
    second["levels"][PROTOCOL]["checks"][0].update(status="pass", detail="")
    kept = kept_second(first, second).to_json()
    assert kept["levels"][PROTOCOL]["status"] == kept["levels"][PROTOCOL]["seed"] == "pass"
    assert kept["levels"][PROTOCOL]["checks"][0]["detail"] == (
        "first run: TIMEOUT (ran past 900 s); re-run: pass (kept)"
    )
    # a re-run that made no report keeps the first result, and says so
    kept = kept_second(first, None).to_json()
    assert kept["levels"][PROTOCOL]["checks"][0]["status"] == "TIMEOUT"
    assert kept["levels"][PROTOCOL]["checks"][0]["detail"].startswith("the re-run made no report")
    assert kept["reruns"] == [
        {"level": PROTOCOL, "name": FLAKY, "first": "TIMEOUT", "second": "TIMEOUT"}
    ]


# -- `--only`: how the baseline runs one property again ----------------------------------------


def test_only_runs_just_the_named_properties(tmp_path: Path):
    """`--only` on refimpl: the named properties are judged and no other
    (a suite test, and a test class: each of its tests); without --level the
    levels judged are theirs, so that a run of passing properties exits 0."""
    import subprocess

    wanted = ["test_ring.py::test_scenario_1_linear_allocation", "test_ring.py::TestBadInput"]
    command = [sys.executable, "-m", "shmref.conformance", "--impl", "refimpl", "--quick"]
    command += ["--no-baseline", "--no-progress", "--out", str(tmp_path)]
    command += [a for name in wanted for a in ("--only", name)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads((tmp_path / "conformance.json").read_text())
    levels = {level: data["status"] for level, data in report["levels"].items()}
    named_levels = {SEED: "pass", HARDENED: "pass"}  # TestBadInput is hardened's
    assert levels == {**{level: "not run" for level in LEVELS}, **named_levels}, levels
    judged = {name: c["status"] for name, c in checks_of(report).items()}
    assert judged.pop(wanted[0]) == "pass"
    assert judged and all(name.startswith(wanted[1] + "::") for name in judged), judged
    assert set(judged.values()) == {"pass"}, judged


@pytest.mark.parametrize("name", ["test_nowhere.py::test_x", "hazard MCNothing", "trace"])
def test_only_refuses_a_name_that_is_no_property(name: str, capsys: pytest.CaptureFixture[str]):
    from shmref.oracle import cli

    with pytest.raises(SystemExit) as stopped:
        cli.main(["--impl", "refimpl", "--only", name])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"{name!r} is no property" in err and len(err.strip().splitlines()) == 1, err
