"""The seed-findings tests on the release: every `_seed` test that
docs/findings.toml lists for a finding, run in the release's venv with the
release's module as the seed (`-p vllmcheck.asseed`), in one pytest process
from this checkout. A finding is reproduced on the release when each of its
seed tests passes there (each demonstrates the defect, and fails once the
code no longer has it)."""

from __future__ import annotations

import os
import subprocess
import time
import tomllib
from pathlib import Path
from typing import Any

from vllmcheck import REPO, RUN_ENV
from vllmcheck.suiteruns import TIMEOUT, Outcome, junit_key, junit_outcomes

FINDINGS = REPO / "docs" / "findings.toml"


def seed_tests(findings: Path = FINDINGS) -> dict[str, tuple[str, list[str]]]:
    """Finding id -> (title, its seed tests' node ids)."""
    data = tomllib.loads(findings.read_text(encoding="utf-8"))
    return {
        str(entry["id"]): (str(entry["title"]), [str(t) for t in entry.get("seed_tests", [])])
        for entry in data.get("finding", [])
    }


def verdicts(
    tests: dict[str, tuple[str, list[str]]], outcomes: dict[str, tuple[str, str]]
) -> dict[str, Any]:
    """Which findings the outcomes (node id -> (status, first line)) reproduce."""
    reproduced: list[str] = []
    not_reproduced: list[dict[str, Any]] = []
    unknown: list[dict[str, Any]] = []
    for ident, (title, nodes) in tests.items():
        results = [(node, *outcomes.get(node, ("not run", ""))) for node in nodes]
        if nodes and all(status == "pass" for _node, status, _first in results):
            reproduced.append(ident)
            continue
        entry = {
            "id": ident,
            "title": title,
            "tests": [
                {"test": node.split("::", 1)[-1], "status": status}
                | ({"first_line": first} if first else {})
                for node, status, first in results
                if status != "pass"
            ],
        }
        failing = any(status in ("fail", "error") for _n, status, _f in results)
        (not_reproduced if failing else unknown).append(entry)
    return {"reproduced": reproduced, "not_reproduced": not_reproduced, "not_judged": unknown}


def run(python: Path, out: Path, pythonpath: list[Path]) -> dict[str, Any]:
    """The seed tests with the release as the seed; which findings they reproduce."""
    tests = seed_tests()
    nodes = sorted({node for _title, listed in tests.values() for node in listed})
    out.mkdir(parents=True, exist_ok=True)
    report, log = out / "findings.xml", out / "findings.log"
    report.unlink(missing_ok=True)
    env = {**os.environ, **RUN_ENV, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    command = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += ["-p", "vllmcheck.asseed", f"--junitxml={report}", *nodes]
    started = time.monotonic()
    try:
        with log.open("w", encoding="utf-8") as sink:
            subprocess.run(
                command, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT, timeout=TIMEOUT
            )
    except subprocess.TimeoutExpired:
        pass
    seconds = round(time.monotonic() - started, 1)
    if not report.is_file():
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        return {"error": f"no report: {lines[-1] if lines else 'no output'}", "seconds": seconds}
    cases = junit_outcomes(report)
    outcomes = {node: node_outcome(node, cases) for node in nodes}
    result = verdicts(tests, outcomes)
    result["tests"] = {
        "passed": sum(case.status == "pass" for case in cases),
        "total": len(cases),
    }
    result["seconds"] = seconds
    return result


def node_outcome(node: str, cases: list[Outcome]) -> tuple[str, str]:
    """A node id's (status, first line) over its junit cases (each of its
    parameters): the first that did not pass, else "pass"; "not run" if none."""
    classname, name = junit_key(node)
    mine = [
        case
        for case in cases
        if case.classname == classname
        and case.test.rsplit("::", 1)[-1].split("[", 1)[0] == name.split("[", 1)[0]
        and (name == name.split("[", 1)[0] or case.test.rsplit("::", 1)[-1] == name)
    ]
    if not mine:
        return "not run", ""
    worst = next((case for case in mine if case.status != "pass"), mine[0])
    return worst.status, worst.first_line
