"""The release's own tests of the module, run in its venv: the two files of
tests/distributed/ in a pytest process each, and each shm-cache test of
tests/multimodal/test_cache.py in a process of its own (one that fails can
leave its writer's segment behind, and the next test would meet it). Each
test's outcome and its failure's first line come from pytest's junit report."""

from __future__ import annotations

import ast
import os
import subprocess
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from vllmcheck import REPO, RUN_ENV

BUFFER = "tests/distributed/test_shm_buffer.py"
STORAGE = "tests/distributed/test_shm_storage.py"
CACHE = "tests/multimodal/test_cache.py"
CACHE_GROUP = f"the shm-cache tests of {CACHE}"
CACHE_CLASSES = ("ShmObjectStoreSenderCache", "ShmObjectStoreReceiverCache")
TIMEOUT = 900  # seconds for one pytest process


@dataclass
class Outcome:
    """One test's result: "pass", "fail", "error" or "skip", and its first line."""

    test: str
    status: str
    first_line: str = ""
    notes: list[str] = field(default_factory=list)
    classname: str = ""  # junit's: the module's dotted path, then any class


def cache_tests(source: str) -> list[str]:
    """The test functions of test_cache.py that build the shm caches
    (name a class of `CACHE_CLASSES` in their own body), in file order."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            if names & set(CACHE_CLASSES):
                found.append(node.name)
    return found


def groups(root: Path) -> tuple[dict[str, list[list[str]]], list[str]]:
    """What to run: per reported file, its pytest processes (node ids each),
    and the test files the sdist lacks."""
    planned: dict[str, list[list[str]]] = {}
    missing = []
    for path in (BUFFER, STORAGE):
        if (root / path).is_file():
            planned[path] = [[path]]
        else:
            missing.append(path)
    if (root / CACHE).is_file():
        names = cache_tests((root / CACHE).read_text(encoding="utf-8"))
        planned[CACHE_GROUP] = [[f"{CACHE}::{name}"] for name in names]
    else:
        missing.append(CACHE)
    return planned, missing


def junit_outcomes(report: Path) -> list[Outcome]:
    """Each testcase of a junit report, named `Class::test` (or `test`)."""
    outcomes = []
    for case in ET.parse(report).getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        last = classname.rsplit(".", 1)[-1]
        test = f"{last}::{name}" if last[:1].isupper() else name
        status, first = "pass", ""
        for kind, said in (("failure", "fail"), ("error", "error"), ("skipped", "skip")):
            element = case.find(kind)
            if element is not None:
                status = said
                text = element.get("message") or element.text or ""
                first = next((line.strip() for line in text.splitlines() if line.strip()), "")
                break
        notes = [f"{p.get('name')}: {p.get('value')}" for p in case.iter("property")]
        outcomes.append(Outcome(test, status, first[:300], notes, classname))
    return outcomes


def junit_key(node: str) -> tuple[str, str]:
    """A pytest node id as junit names it: (classname, name)."""
    path, *rest = node.split("::")
    module = path.removesuffix(".py").replace("/", ".")
    return ".".join([module, *rest[:-1]]), rest[-1] if rest else ""


def run_process(
    python: Path, root: Path, nodes: list[str], report: Path, pythonpath: list[Path]
) -> list[Outcome]:
    """One pytest process on `nodes` from the sdist's root; its outcomes (a
    process that leaves no report: each node an error with its last line)."""
    report.unlink(missing_ok=True)
    env = {**os.environ, **RUN_ENV, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    command = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += ["-p", "vllmcheck.offline", f"--junitxml={report}", *nodes]
    log = report.with_suffix(".log")
    try:
        with log.open("w", encoding="utf-8") as out:
            done = subprocess.run(
                command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=TIMEOUT
            )
        said = f"pytest exited {done.returncode} without a report"
    except subprocess.TimeoutExpired:
        said = f"pytest still running after {TIMEOUT} s"
    if report.is_file():
        found = junit_outcomes(report)
        if found:
            return found
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    last = lines[-1].strip() if lines else ""
    return [Outcome(node.split("::", 1)[-1], "error", f"{said}: {last}"[:300]) for node in nodes]


def run_side(
    python: Path, root: Path, out: Path, pythonpath: list[Path], side: str
) -> dict[str, object]:
    """Every planned test on one side ("release" or "refimpl"): counts per
    file, each test's outcome, the files missing, the seconds taken."""
    planned, missing = groups(root)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    files: dict[str, object] = {}
    for path, processes in planned.items():
        outcomes: list[Outcome] = []
        for index, nodes in enumerate(processes):
            stem = Path(path.split(" of ")[-1]).stem
            report = out / f"{stem}-{index}.xml"
            outcomes += run_process(python, root, nodes, report, pythonpath)
        passed = sum(o.status == "pass" for o in outcomes)
        print(f"vllmcheck: {side}: {path}: {passed}/{len(outcomes)} pass", flush=True)
        for o in outcomes:
            if o.status != "pass":
                print(f"vllmcheck:   {o.status}: {o.test}: {o.first_line}", flush=True)
        files[path] = {
            "passed": passed,
            "total": len(outcomes),
            "processes": len(processes),
            "failures": [
                {"test": o.test, "status": o.status}
                | ({"first_line": o.first_line} if o.first_line else {})
                for o in outcomes
                if o.status != "pass"
            ],
            "stand_in": [o.test for o in outcomes if any("stand-in" in n for n in o.notes)],
        }
    for path in missing:
        print(f"vllmcheck: {side}: the sdist has no {path}: not run", flush=True)
    return {"files": files, "missing": missing, "seconds": round(time.monotonic() - started, 1)}


def module_seen(python: Path, pythonpath: list[Path]) -> str:
    """What `import <vLLM's module>` gives in the venv with `pythonpath`:
    its file, or refimpl's stand-in (proof of which side a run is on)."""
    code = (
        "import vllm.distributed.device_communicators.shm_object_storage as m\n"
        "print(getattr(m, '__file__', None) or m.__spec__.origin)\n"
    )
    env = {**os.environ, **RUN_ENV, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    done = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, env=env, cwd=REPO, check=False
    )
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[-1] if lines else f"exit {done.returncode}"
