"""`--compare OLD.json NEW.json` and conformance.json's published schema
(issue 42). Real reports (`--only` runs of a few properties, seconds each)
validate against shmref/oracle/report.schema.json, which ships in the
package; the schema refuses a broken report; the comparison of the seed's
report and a store that breaks one more property lists exactly that
regression; reports of different suite versions list what could not be
compared instead of failing; a file that is no report is one line, exit 2."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from shmref.oracle import compare
from shmref.oracle.report import SCHEMA_ID, SCHEMA_PATH

REPO = Path(__file__).resolve().parents[2]
ONLY = [
    "test_ring.py::TestBadInput::test_bad_addresses",
    "hazard MCCopyFail",
    "test_storage.py::test_writer_with_lock_counts_its_gets_as_the_seed",
    "test_storage.py::test_lockless_writer_get_does_not_count",
]
MUTANT = "seed_writer_reads_uncounted"  # tests/stores: fails ONLY[2], the seed passes it


def conformance(impl: str, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests" / "stores")]),
    }
    command = [sys.executable, "-m", "shmref.conformance", "--impl", impl, "--quick"]
    command += ["--no-progress", "--no-shrink", "--out", str(out), *args]
    command += [a for name in ONLY for a in ("--only", name)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, cwd=REPO)


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The seed's report and the mutant's (judged by the seed's expectations)."""
    folder = tmp_path_factory.mktemp("reports")
    made = {}
    expect = str(folder / "seed.toml")
    for impl, args in (("seed", ["--write-expectations", expect]), (MUTANT, ["--expect", expect])):
        proc = conformance(impl, folder / impl, "--no-baseline", *args)
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
        made[impl] = folder / impl / "conformance.json"
    return made


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    return loaded


def test_the_schema_ships_and_is_a_valid_versioned_schema():
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"oracle/report.schema.json"' in pyproject
    jsonschema.Draft202012Validator.check_schema(schema())
    assert schema()["$id"] == SCHEMA_ID and "/1/" in SCHEMA_ID


def test_real_reports_follow_the_schema(reports):
    validator = jsonschema.Draft202012Validator(schema())
    for path in reports.values():
        report = json.loads(path.read_text())
        errors = [e.message for e in validator.iter_errors(report)]
        assert errors == [], path
    assert json.loads(reports["seed"].read_text())["schema"] == SCHEMA_ID
    judged = json.loads(reports[MUTANT].read_text())["expectations"]
    assert [s["property"] for s in judged["surprises"]] == [ONLY[2]]


def test_the_schema_refuses_a_broken_report(reports):
    report = json.loads(reports["seed"].read_text())
    broken = copy.deepcopy(report)
    broken["levels"]["hardened"]["checks"][0]["status"] = "failed"
    assert "'failed' is not one of" in compare.schema_problem(broken)
    del broken["levels"]
    assert "'levels' is a required property" in compare.schema_problem(broken)


def test_compare_lists_exactly_the_mutants_regression(reports, capsys):
    code = compare.main(reports["seed"], reports[MUTANT])
    text = capsys.readouterr().out
    assert code == 1, text
    found = compare.compare(
        *(json.loads(reports[k].read_text()) for k in ("seed", MUTANT)), ("old", "new")
    )
    assert found.regressions == [(ONLY[2], "pass", "FAIL")]
    assert (found.fixes, found.new_properties, found.removed, found.not_compared) == (
        [],
        [],
        [],
        [],
    )
    assert f"regressions: 1\n  {ONLY[2]}: pass -> FAIL\nfixes: 0" in text
    # the other way round: a fix, no regression
    assert compare.main(reports[MUTANT], reports["seed"]) == 0
    assert f"fixes: 1\n  {ONLY[2]}: FAIL -> pass" in capsys.readouterr().out


def test_compare_says_what_now_differs_from_the_seed(reports):
    old, new = (json.loads(reports[k].read_text()) for k in ("seed", MUTANT))
    for report in (old, new):  # as with the seed baseline beside each property
        for check in report["levels"]["seed-compatible"]["checks"]:
            check["seed"] = "pass"
    found = compare.compare(old, new, ("old", "new"))
    assert found.from_seed == [(ONLY[2], "pass", "pass", "FAIL")] and found.to_seed == []
    assert compare.compare(new, old, ("new", "old")).to_seed == [(ONLY[2], "pass", "FAIL", "pass")]


def test_other_suite_versions_say_what_they_could_not_compare(reports, tmp_path, capsys):
    old = json.loads(reports["seed"].read_text())
    new = copy.deepcopy(old)
    new["suite"] = "0.2.0+another"
    checks = new["levels"]["seed-compatible"]["checks"]
    gone = checks.pop()["name"]
    checks.append({**checks[0], "name": "test_storage.py::test_new_one"})
    paths = tmp_path / "old.json", tmp_path / "new.json"
    for path, data in zip(paths, (old, new), strict=True):
        path.write_text(json.dumps(data))
    assert compare.main(*paths) == 0
    text = capsys.readouterr().out
    assert "the two reports are of different suite versions" in text
    assert f"  {gone} (only in {paths[0]})" in text
    assert f"  test_storage.py::test_new_one (only in {paths[1]})" in text
    assert "new properties: 0" in text and "removed properties: 0" in text


@pytest.mark.parametrize("content", ["{not json", '{"impl": "x"}', None])
def test_a_file_that_is_no_report_is_one_line(tmp_path, content, reports):
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    proc = subprocess.run(
        [sys.executable, "-m", "shmref.conformance", "--compare", str(reports["seed"]), str(bad)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"shmref: {bad}: ") and "Traceback" not in proc.stderr
