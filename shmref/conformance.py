"""`make conformance IMPL=mod`: the oracle's report for an implementation.

    python -m shmref.conformance --impl MODULE [--out DIR] [--quick]
    python -m shmref.conformance --impl MODULE --hazard MCDoubleRead
    python -m shmref.conformance --validate-trace recording.json

Runs, against MODULE ('seed' builds the seed's own code): the behavioural
tests, the side-by-side tests with refimpl (tests/test_layout.py), the TLC
trace replays and the Hypothesis state machines (pytest in a subprocess with
`--impl MODULE --junitxml`); the hazard counterexamples of the spec's hazard
models replayed on MODULE; and trace validation (a recorded run of MODULE
checked by TLC against the spec). It writes DIR/conformance.md and
DIR/conformance.json (default DIR: build/conformance/<module>), grouping
every property into three levels an implementation can claim:

- API-compatible: the same values, keys and exceptions as refimpl for the
  same calls.
- layout-compatible: the same addresses, ids and segment bytes, so its
  readers and refimpl's (or the seed's) writer can share one segment.
- protocol-safe: the spec's replays and state machine pass, a recorded run
  is a behaviour of the spec, and no hazard counterexample makes it return a
  wrong value or count a read on another chunk. Hazards that no
  layout-compatible implementation can close are reported as "assumption".

Every failure comes with its shortest trace (Hypothesis' shrunk falsifying
example, or the TLC counterexample as replayed) and one command that
replays it. Exit status: 0 if all three levels pass, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from shmref import tlc
from shmref.corpus import spec_digest
from shmref.driver import Driver, Outcome
from shmref.impl import load_impl
from shmref.manifest import model_files
from shmref.recorder import Recorder, Recording, Validation, random_workload, validate_recording
from shmref.replay import SPEC_DIR, Replayer, describe

REPO = Path(__file__).resolve().parents[1]
API, LAYOUT, PROTOCOL = "API-compatible", "layout-compatible", "protocol-safe"
LEVELS = (API, LAYOUT, PROTOCOL)
LEVEL_MEANING = {
    API: "same values, keys and exceptions as refimpl for the same calls",
    LAYOUT: "same addresses, ids and segment bytes as refimpl: its readers and "
            "refimpl's (or the seed's) writer can share one segment",
    PROTOCOL: "none of the spec's hazards: replays, state machine and a recorded run "
              "agree with the spec; no hazard counterexample returns a wrong value",
}
PASS, FAIL, SKIP, ASSUMPTION, ERROR = "pass", "FAIL", "skip", "assumption", "ERROR"


@dataclass(frozen=True)
class TestGroup:
    """A pytest selection that makes up one or more properties of a level."""

    level: str
    select: str  # pytest node id (prefix)
    what: str
    quick: bool = True


TEST_GROUPS: tuple[TestGroup, ...] = (
    TestGroup(API, "tests/test_ring.py", "ring: docstring scenarios, ids, bad input"),
    TestGroup(API, "tests/test_storage.py", "storage: handles, counting, reclamation, bad input"),
    TestGroup(API, "tests/test_layout.py::test_same_results_as_refimpl",
              "differential: one call sequence on refimpl and the impl, same results"),
    TestGroup(LAYOUT, "tests/test_layout.py::test_same_segment_bytes_as_refimpl",
              "same addresses, ids and segment bytes as refimpl after every call"),
    TestGroup(LAYOUT, "tests/test_layout.py::test_refimpl_writer_impl_readers",
              "refimpl writer, impl readers, one segment"),
    TestGroup(LAYOUT, "tests/test_layout.py::test_impl_writer_refimpl_readers",
              "impl writer, refimpl readers, one segment"),
    TestGroup(LAYOUT, "tests/test_layout.py::test_mixed_readers_on_one_segment",
              "readers of both on one segment"),
    TestGroup(PROTOCOL, "tests/test_replay.py::test_simulation_corpus_replays[MCStorage]",
              "TLC simulation traces of MCStorage replayed step by step"),
    TestGroup(PROTOCOL, "tests/test_replay.py::test_simulation_corpus_replays[MCRing]",
              "TLC simulation traces of MCRing replayed step by step", quick=False),
    TestGroup(PROTOCOL, "tests/test_replay.py::test_allocator_state_graph_every_edge",
              "every edge of the allocator's state graph replayed", quick=False),
    TestGroup(PROTOCOL, "tests/test_stateful.py::test_store_machine",
              "Hypothesis state machine beside the pure model"),
    TestGroup(PROTOCOL, "tests/test_stateful.py::test_store_machine_from_tlc_traces",
              "state machine seeded with TLC trace prefixes"),
    TestGroup(PROTOCOL, "tests/test_stateful.py::test_store_machine_small_ids",
              "state machine with ID_MAX 3 (ids wrap, live-id limit)", quick=False),
)
NOT_RUN = ("tests/test_stateful.py::test_store_machine_reader_processes (readers in "
           "processes; minutes to shrink a failure)")


@dataclass(frozen=True)
class Hazard:
    model: str
    what: str
    closable: bool  # False: no layout-compatible implementation can close it
    liveness: bool = False
    quick: bool = True  # TLC finds it in seconds (else only with a cached output)


HAZARDS: tuple[Hazard, ...] = (
    Hazard("MCRingIdCollision", "ring: an allocation takes the id of a live chunk", True),
    Hazard("MCIdCollision", "a put takes the id of a live chunk (ID_MAX live chunks)", True),
    Hazard("MCDoubleRead", "a reader reads a delivery twice; the other reader's read "
           "of the reclaimed, reused chunk returns a foreign value", True),
    Hazard("MCDoubleReadCount", "the late increment of a read whose chunk was reused "
           "lands on the new chunk's count", True),
    Hazard("MCClearInFlight", "clear() with a read in flight, the chunk reused under it", True),
    Hazard("MCClearDrain", "clear() with deliveries pending; a read begun after the "
           "clear meets the reused chunk", True),
    Hazard("MCCopyFail", "a read whose deserialization fails is never counted: the "
           "chunk is pinned forever", True, liveness=True, quick=False),
    Hazard("MCIdWrap", "ABA: ids wrap across clear() while a handle is outstanding; "
           "the id check passes on another object (F4, a new secret on clear, closes it)",
           True),
    Hazard("MCLostReader", "a delivery is never read: its chunk is pinned forever "
           "(assumption A1: each delivery is read by every reader)", False, liveness=True),
)


@dataclass
class Check:
    """One property of one level."""

    level: str
    name: str
    what: str
    status: str  # pass, FAIL, skip, assumption, ERROR
    cases: str = ""
    detail: str = ""
    failures: list[dict[str, str]] = field(default_factory=list)  # trace, command, case


# -- pytest ------------------------------------------------------------------------------


def impl_arg(name: str) -> str:
    return "seed" if name == "shmref_seed" else name


def pytest_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.pop("HYPOTHESIS_PROFILE", None)  # the CI profile: derandomized, replayable
    return env


def run_pytest(name: str, groups: Sequence[TestGroup], out: Path, timeout: float = 900
               ) -> tuple[int, str]:
    xml = out / "pytest.xml"
    xml.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--impl", name,
           f"--junitxml={xml}", "-o", "junit_family=xunit1", *(g.select for g in groups)]
    proc = subprocess.run(cmd, cwd=REPO, env=pytest_env(), capture_output=True, text=True,
                          timeout=timeout)
    (out / "pytest.log").write_text(proc.stdout + proc.stderr)
    return proc.returncode, proc.stdout + proc.stderr


def node_id(classname: str, name: str) -> str:
    parts = classname.split(".")
    for k in range(len(parts), 0, -1):
        path = "/".join(parts[:k]) + ".py"
        if (REPO / path).is_file():
            return "::".join([path, *parts[k:], name])
    return "::".join([classname, name])


def failure_trace(text: str) -> str:
    """The shrunk Hypothesis example(s) with their errors, else the assertion
    (and, for replays, the step table)."""
    lines = []
    for line in text.splitlines():
        if line.startswith("E "):
            line = line[8:] if line.startswith("E       ") else line[2:]
        line = re.sub(r"^\s*(?:\|\s?)+", "", line) if re.match(r"^\s*\|", line) else line
        lines.append(line)
    blocks = []
    for start, line in enumerate(lines):
        if not line.startswith("Falsifying example"):
            continue
        error = next((lines[k] for k in range(start - 1, max(start - 12, -1), -1)
                      if re.match(r"^[\w.]*(Error|Exception|Failed)\b", lines[k])), "")
        block = [error[:400]] if error else []
        for follow in lines[start:]:
            if follow.startswith(("You can reproduce", "Explanation:", "+--")):
                break
            block.append(follow)
        blocks.append("\n".join(block).strip())
    if blocks:
        return "\n\n".join(list(dict.fromkeys(blocks))[:3])
    errors = [ln for ln, raw in zip(lines, text.splitlines(), strict=True) if raw.startswith("E")]
    if errors:
        return "\n".join(errors[:60]).strip()
    return "\n".join(text.strip().splitlines()[-25:])


def parse_junit(xml: Path) -> list[dict[str, str]]:
    cases = []
    for case in ET.parse(xml).iter("testcase"):
        node = node_id(case.get("classname", ""), case.get("name", ""))
        status, text = "pass", ""
        for child in case:
            if child.tag in ("failure", "error"):
                status = "fail" if child.tag == "failure" else "error"
                text = (child.get("message") or "") + "\n" + (child.text or "")
                break
            if child.tag == "skipped":
                status, text = "skip", child.get("message") or ""
        cases.append({"node": node, "status": status, "text": text})
    merged: dict[str, dict[str, str]] = {}  # a test failing in call and teardown: once
    rank = {"error": 3, "fail": 2, "pass": 1, "skip": 0}
    for case in cases:
        known = merged.get(case["node"])
        if known is None or rank[case["status"]] > rank[known["status"]]:
            merged[case["node"]] = case
    return list(merged.values())


def property_of(node: str) -> str:
    """`tests/test_ring.py::TestBadInput::test_x[1]` -> `test_ring.py::TestBadInput::test_x`."""
    return node.split("[", 1)[0].removeprefix("tests/")


def pytest_checks(name: str, groups: Sequence[TestGroup], cases: list[dict[str, str]]
                  ) -> list[Check]:
    checks: list[Check] = []
    for group in groups:
        mine = [c for c in cases if c["node"] == group.select
                or c["node"].startswith(group.select + ("[" if "::" in group.select else "::"))]
        by_property: dict[str, list[dict[str, str]]] = {}
        for case in mine:
            prop = (group.select.removeprefix("tests/") if "[" in group.select
                    else property_of(case["node"]))
            by_property.setdefault(prop, []).append(case)
        if not by_property:
            checks.append(Check(group.level, property_of(group.select), group.what, ERROR,
                                detail="no test result (collection error? see pytest.log)"))
        for prop, prop_cases in by_property.items():
            counts = {s: sum(1 for c in prop_cases if c["status"] == s)
                      for s in ("pass", "fail", "error", "skip")}
            if counts["fail"] or counts["error"]:
                status = FAIL
            elif counts["pass"]:
                status = PASS
            else:
                status = SKIP
            total = len(prop_cases)
            check = Check(group.level, prop, group.what if prop == property_of(group.select)
                          or len(by_property) == 1 else "", status,
                          cases=f"{counts['pass']}/{total - counts['skip']}"
                          + (f" ({counts['skip']} skipped)" if counts["skip"] else ""))
            if status == SKIP:
                check.detail = prop_cases[0]["text"].strip().splitlines()[-1][:200]
            for case in prop_cases:
                if case["status"] in ("fail", "error"):
                    check.failures.append({
                        "case": case["node"],
                        "trace": failure_trace(case["text"]),
                        "command": f"python -m pytest --impl {impl_arg(name)} '{case['node']}'",
                    })
            checks.append(check)
    return checks


def label_groups(checks: list[Check], groups: Sequence[TestGroup]) -> None:
    """Give the per-function rows of a whole-file group the file's description."""
    for check in checks:
        if not check.what:
            for group in groups:
                if check.name.startswith(property_of(group.select)):
                    check.what = group.what


# -- hazards ----------------------------------------------------------------------------


def hazard_trace(model: str, *, run_missing: bool = True) -> tuple[tlc.Trace | None, str]:
    """The model's counterexample: from build/conformance/tlc (cached by spec
    digest), or build/tlc/<model>.out if `make check` wrote it after the
    spec's last change, or a fresh TLC run."""
    cache = REPO / "build" / "conformance" / "tlc" / f"{model}-{spec_digest()}.out"
    sources = [cache]
    check_out = REPO / "build" / "tlc" / f"{model}.out"
    newest_spec = max(p.stat().st_mtime for p in SPEC_DIR.iterdir()
                      if p.suffix in (".tla", ".cfg"))
    if check_out.is_file() and check_out.stat().st_mtime > newest_spec:
        sources.append(check_out)
    for source in sources:
        if source.is_file():
            trace = tlc.parse_trace(tlc.parse_tool_output(source.read_text()))
            if trace is not None:
                return trace, str(source.relative_to(REPO))
    if not run_missing:
        return None, "not run (--quick and no cached TLC output; run without --quick)"
    run = tlc.run_tlc(*model_files(model, SPEC_DIR), workers=1,
                      extra_args=("-deadlock",), timeout=600, log_path=cache)
    if run.trace is None:
        return None, f"TLC found no counterexample: {run.summary()}"
    return run.trace, str(cache.relative_to(REPO))


@dataclass
class HazardReplay:
    hazard: Hazard
    violation: str | None
    rows: list[tuple[int, str, str, str, str]]  # step, action, spec, impl, note

    def table(self) -> str:
        lines = [f"{'#':>3}  {'action':<46} {'spec':<17} {'impl':<17} note"]
        for step, action, spec, impl, note in self.rows:
            lines.append(f"{step:>3}  {action:<46} {spec:<17} {impl:<17} {note}".rstrip())
        return "\n".join(lines)


def replay_hazard(impl: ModuleType, hazard: Hazard, trace: tlc.Trace) -> HazardReplay:
    """Replay the counterexample on `impl`, whatever it answers, and watch for
    the hazard: a read returning another key's value, a put/allocation taking
    a live chunk's id, a chunk's count above the reads that named it, and
    (liveness models) a chunk that stays pinned once every read is done."""
    replayer = Replayer(impl, SPEC_DIR / f"{hazard.model}.cfg")
    rows: list[tuple[int, str, str, str, str]] = []
    reads: dict[tuple[int, int], list] = {}  # (id, address) -> [key, reads naming it]
    stage: dict[int, tuple[str, tuple]] = {}  # reader -> (stage, handle)
    violation: str | None = None
    with replayer.driver() as driver:
        def step(index: int, action: Mapping[str, Any], spec_outcome: str) -> str | None:
            name = action["name"]
            reader = replayer.reader(action["reader"]) if "reader" in action else None
            before = driver.observe()
            note = ""
            if name in ("get_copy", "get_end") and reader not in stage:
                outcome, note = Outcome("-"), "no read in flight on the impl"
            elif name == "get_end" and stage[reader][0] == "failed":
                outcome, note = Outcome("DeserializeError"), "the read ended at get_copy"
                stage.pop(reader)
            else:
                outcome = replayer.perform(driver, action)
            handle = tuple(action.get("handle", ()))
            if name == "get_begin" and outcome.status == "ok":
                stage[reader] = ("open", handle)
            elif name == "get_copy" and reader in stage:
                if outcome.status == "ok":
                    stage[reader] = ("copied", stage[reader][1])
                else:  # the impl raised at the copy: its read is over, uncounted
                    driver.readers[reader].abandon()
                    stage[reader] = ("failed", stage[reader][1])
            elif name == "get_end" and reader in stage:
                handle = stage.pop(reader)[1]
                if outcome.status in ("ok", "DeserializeError"):
                    entry = reads.get((handle[2], handle[1]))
                    if entry is not None and entry[0] == handle[0]:
                        entry[1] += 1
            after = driver.observe()
            problem = None
            if name in ("put", "allocate_buf") and outcome.status == "ok":
                address, chunk_id = outcome.result
                if chunk_id in before.get("metadata", {}):
                    problem = f"got id {chunk_id}, the id of a live chunk"
                reads[(chunk_id, address)] = [action.get("key", ""), 0]
            if name == "get_end" and outcome.status == "ok" and outcome.result != handle[0]:
                problem = (f"the read of {_handle_text(handle)} returned "
                           f"{outcome.result!s}'s value, not {handle[0]}'s")
            live = after.get("metadata", {})
            if len(live) >= replayer.constants["ID_MAX"] and problem is None:
                problem = (f"{len(live)} live chunks with ID_MAX {replayer.constants['ID_MAX']}:"
                           " the live id range is ambiguous (the next id is a live one)")
            for key in [k for k in reads if live.get(k[0]) != k[1]]:
                del reads[key]
            for chunk_id, address in live.items():
                count = after.get("counts", {}).get(chunk_id)
                named = reads.get((chunk_id, address), [None, 0])[1]
                if count is not None and count > named and problem is None:
                    problem = (f"chunk id {chunk_id} at {address} has count {count} but "
                               f"only {named} read(s) named it")
            rows.append((index, describe(action), spec_outcome, outcome.status,
                         ("VIOLATION: " + problem) if problem else note))
            return problem

        for state in trace.states[1:]:
            action = state.vars["last_action"]
            violation = step(state.index, action, action.get("outcome", "ok"))
            if violation:
                break
        if hazard.liveness and violation is None:
            violation = settle(driver, replayer, trace, stage, rows, step)
    return HazardReplay(hazard, violation, rows)


def settle(driver: Driver, replayer: Replayer, trace: tlc.Trace,
           stage: dict[int, tuple[str, tuple]], rows: list, step) -> str | None:
    """After a liveness counterexample: finish every read in flight, read
    every pending delivery, release touches and free; all chunks must go."""
    last = trace.states[-1]
    index = last.index + 1
    names = replayer.readers
    for reader in list(stage):
        if stage[reader][0] == "open":
            step(index, {"name": "get_copy", "reader": names[reader]}, "(settle)")
            index += 1
        step(index, {"name": "get_end", "reader": names[reader]}, "(settle)")
        index += 1
    inbox = last.vars.get("inbox", {})
    for name in names:
        bag = inbox.get(name, ()) if isinstance(inbox, Mapping) else ()
        for handle, copies in (bag.items() if isinstance(bag, Mapping) else ()):
            for _ in range(copies):
                reader = replayer.reader(name)
                step(index, {"name": "get_begin", "reader": name, "handle": handle}, "(settle)")
                index += 1
                if reader in stage:
                    step(index, {"name": "get_copy", "reader": name}, "(settle)")
                    step(index + 1, {"name": "get_end", "reader": name}, "(settle)")
                    index += 2
    for name in ("release_touches", "free_unused", "free_unused"):
        step(index, {"name": name}, "(settle)")
        index += 1
    pinned = driver.observe().get("metadata", {})
    if pinned:
        problem = (f"chunk(s) {sorted(pinned)} stay pinned after every read is done "
                   "(free_unused can never reclaim them)")
        rows.append((index, "(end)", "", "", "VIOLATION: " + problem))
        return problem
    return None


def _handle_text(handle: tuple) -> str:
    return "<<" + ", ".join(str(x) for x in handle) + ">>"


def hazard_check(name: str, impl: ModuleType, hazard: Hazard, trace: tlc.Trace | None,
                 source: str) -> tuple[Check, HazardReplay | None]:
    what = hazard.what
    if trace is None:
        return Check(PROTOCOL, f"hazard {hazard.model}", what, SKIP, detail=source), None
    try:
        replay = replay_hazard(impl, hazard, trace)
    except Exception as exc:  # an implementation crash is a failure, reported as such
        check = Check(PROTOCOL, f"hazard {hazard.model}", what, ERROR,
                      detail=f"{type(exc).__name__}: {exc}")
        check.failures.append({"case": hazard.model, "trace": check.detail,
                               "command": hazard_command(name, hazard)})
        return check, None
    if replay.violation is None:
        return Check(PROTOCOL, f"hazard {hazard.model}", what, PASS,
                     detail=f"closed (counterexample from {source})"), replay
    status = FAIL if hazard.closable else ASSUMPTION
    check = Check(PROTOCOL, f"hazard {hazard.model}", what, status, detail=replay.violation)
    if status == ASSUMPTION:
        check.detail = ("open, as for every layout-compatible implementation: "
                        + replay.violation)
    check.failures.append({"case": hazard.model,
                           "trace": f"TLC counterexample of spec/{hazard.model} ({source}), "
                                    f"replayed on {name}:\n{replay.table()}",
                           "command": hazard_command(name, hazard)})
    return check, replay


def hazard_command(name: str, hazard: Hazard) -> str:
    return f"python -m shmref.conformance --impl {impl_arg(name)} --hazard {hazard.model}"


# -- trace validation -----------------------------------------------------------------------

WORKLOAD = {"n_units": 8, "n_readers": 2, "id_max": 5, "max_obj": 3}


def record(impl: ModuleType, steps: int, seed: int) -> Recording:
    with Driver(impl, WORKLOAD["n_units"], n_readers=WORKLOAD["n_readers"],
                id_max=WORKLOAD["id_max"], max_obj=WORKLOAD["max_obj"]) as driver:
        recorder = Recorder(driver)
        try:
            random_workload(recorder, steps, seed)
        finally:
            recording = recorder.recording()
    return recording


def validate_either(recording: Recording, out_dir: Path | None = None) -> Validation:
    """Accepted by the spec of refimpl's protocol (FIXED) or of the seed's."""
    fixed = validate_recording(recording, switches={"FIXED": True},
                               out_dir=out_dir / "fixed" if out_dir else None)
    if fixed.accepted:
        return fixed
    seed = validate_recording(recording, switches={"FIXED": False},
                              out_dir=out_dir / "seed" if out_dir else None)
    return seed if seed.accepted or seed.matched > fixed.matched else fixed


def validation_check(name: str, recordings: list[tuple[Path, Recording | Exception]],
                     out: Path) -> Check:
    what = "implementation -> spec: a recorded random run is a behaviour of the spec (TLC)"
    check = Check(PROTOCOL, "trace validation", what, PASS)
    notes = []
    for path, recording in recordings:
        command = f"python -m shmref.conformance --validate-trace {_rel(path)}"
        if isinstance(recording, Exception):
            check.status = ERROR
            check.failures.append({"case": path.name, "command": command,
                                   "trace": f"recording crashed: {recording!r}"})
            continue
        result = validate_either(recording, out / "trace" / path.stem)
        if result.accepted:
            notes.append(f"{len(recording.log)} steps accepted "
                         f"(FIXED={result.switches['FIXED']})")
            continue
        check.status = FAIL
        low = max(result.matched - 8, 0)
        shown = [f"{i + 1:>4}  {json.dumps(e)}" for i, e in
                 enumerate(recording.log[low:result.matched + 1], start=low)]
        check.failures.append({"case": path.name, "command": command,
                               "trace": result.explain() + "\nlog (last matched entries, "
                               "then the first that no enabled action matches):\n"
                               + "\n".join(shown)})
    check.detail = "; ".join(notes)
    return check


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


# -- the run -------------------------------------------------------------------------------


@dataclass
class Report:
    impl: str
    quick: bool
    checks: list[Check]
    seconds: float
    not_run: list[str]
    levels: tuple[str, ...] = LEVELS

    def level_status(self, level: str) -> str:
        if level not in self.levels:
            return "not run"
        statuses = {c.status for c in self.checks if c.level == level}
        if statuses & {FAIL, ERROR}:
            return FAIL
        return PASS if PASS in statuses else SKIP

    @property
    def ok(self) -> bool:
        return all(self.level_status(level) == PASS for level in self.levels)

    def to_json(self) -> dict[str, Any]:
        return {
            "impl": self.impl, "quick": self.quick, "seconds": round(self.seconds, 1),
            "ok": self.ok, "not_run": self.not_run,
            "levels": {level: {"status": self.level_status(level),
                               "meaning": LEVEL_MEANING[level],
                               "checks": [asdict(c) for c in self.checks if c.level == level]}
                       for level in LEVELS},
        }

    def markdown(self) -> str:
        out = [f"# Conformance of `{self.impl}`", "",
               f"{'Quick' if self.quick else 'Full'} run of `python -m shmref.conformance "
               f"--impl {impl_arg(self.impl)}{' --quick' if self.quick else ''}`, "
               f"{self.seconds:.0f} s. Reference: refimpl and spec/ShmObjectStorage.tla.", "",
               "| level | result | failing properties | meaning |", "| --- | --- | --- | --- |"]
        for level in LEVELS:
            failing = sum(1 for c in self.checks if c.level == level and c.status in (FAIL,
                                                                                     ERROR))
            assumed = sum(1 for c in self.checks if c.level == level and c.status == ASSUMPTION)
            result = self.level_status(level) + (
                f" ({assumed} assumption{'s' if assumed > 1 else ''})" if assumed else "")
            out.append(f"| {level} | **{result}** | {failing} | {LEVEL_MEANING[level]} |")
        for level in self.levels:
            out += ["", f"## {level}: {self.level_status(level)}", "",
                    "| result | property | cases | what / detail |", "| --- | --- | --- | --- |"]
            for c in (c for c in self.checks if c.level == level):
                text = "; ".join(t for t in (c.what, c.detail) if t).replace("|", "\\|")
                out.append(f"| {c.status} | `{c.name}` | {c.cases} | {text} |")
        failures = [c for c in self.checks if c.failures]
        if failures:
            out += ["", "## Failures, each with its shortest trace and one replay command"]
        for c in failures:
            out += ["", f"### {c.level}: `{c.name}` ({c.status})", ""]
            for f in c.failures[:4]:
                out += [f"`{f['case']}`", "", "```", f["trace"].strip(), "```", "",
                        "Replay:", "", "```sh", f["command"], "```", ""]
            if len(c.failures) > 4:
                out.append(f"... and {len(c.failures) - 4} more failing case(s): "
                           + ", ".join(f"`{f['case']}`" for f in c.failures[4:]))
        if self.not_run:
            out += ["", "Not run by the conformance run: " + "; ".join(self.not_run) + "."]
        return "\n".join(out) + "\n"


def run(name: str, out: Path, quick: bool, levels: Sequence[str] = LEVELS) -> Report:
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    impl = load_impl(name)
    groups = [g for g in TEST_GROUPS if (g.quick or not quick) and g.level in levels]
    not_run = [NOT_RUN] + [g.select for g in TEST_GROUPS
                           if g not in groups and g.level in levels]
    protocol = PROTOCOL in levels

    # TLC (no shared memory) runs in threads while pytest runs.
    traces: dict[str, tuple[tlc.Trace | None, str]] = {}

    def fetch_traces() -> None:
        for hazard in HAZARDS:
            try:
                traces[hazard.model] = hazard_trace(hazard.model,
                                                    run_missing=not quick or hazard.quick)
            except tlc.TlcError as exc:
                traces[hazard.model] = (None, f"TLC failed: {exc}")

    recordings: list[tuple[Path, Recording | Exception]] = []
    for seed in ((1,) if quick else (1, 2)) if protocol else ():
        path = out / f"recording-{seed}.json"
        try:
            recording = record(impl, 150 if quick else 300, seed)
            recording.save(path)
            recordings.append((path, recording))
        except Exception as exc:  # reported as the check's error
            recordings.append((path, exc))
    validation: list[Check] = []

    def validate() -> None:
        try:
            validation.append(validation_check(name, recordings, out))
        except tlc.TlcError as exc:
            validation.append(Check(PROTOCOL, "trace validation", "", ERROR, detail=str(exc)))

    threads = [threading.Thread(target=fetch_traces), threading.Thread(target=validate)]
    for thread in threads if protocol else ():
        thread.start()
    code, output = run_pytest(name, groups, out) if groups else (0, "")
    for thread in threads if protocol else ():
        thread.join()

    checks: list[Check] = []
    xml = out / "pytest.xml"
    if not groups:
        pass
    elif xml.is_file():
        checks += pytest_checks(name, groups, parse_junit(xml))
        label_groups(checks, groups)
    else:
        checks.append(Check(API, "pytest", "the test run", ERROR,
                            detail=f"pytest exited {code} without a report: "
                                   + output.strip()[-500:]))
    for hazard in HAZARDS if protocol else ():
        trace, source = traces.get(hazard.model, (None, "no trace"))
        checks.append(hazard_check(name, impl, hazard, trace, source)[0])
    checks += validation
    report = Report(name, quick, checks, time.monotonic() - started, not_run,
                    tuple(level for level in LEVELS if level in levels))
    (out / "conformance.json").write_text(json.dumps(report.to_json(), indent=1) + "\n")
    (out / "conformance.md").write_text(report.markdown())
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shmref.conformance", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--impl", help="module under test ('seed': the seed's own code)")
    parser.add_argument("--out", type=Path, help="report folder "
                        "(default build/conformance/<module>)")
    parser.add_argument("--quick", action="store_true", help="fewer tests (well under 2 min)")
    parser.add_argument("--level", action="append", choices=LEVELS,
                        help="run only the checks of this level (repeatable; default: all)")
    parser.add_argument("--hazard", metavar="MODEL",
                        help="only replay this hazard model's counterexample on --impl")
    parser.add_argument("--validate-trace", type=Path, metavar="FILE",
                        help="check a recording (JSON, shmref.recorder) with TLC")
    args = parser.parse_args(argv)

    if args.validate_trace:
        result = validate_either(Recording.load(args.validate_trace))
        print(result.explain())
        return 0 if result.accepted else 1
    if not args.impl:
        parser.error("--impl MODULE is required")
    name = load_impl(args.impl).__name__ if args.impl in ("seed",) else args.impl
    if args.hazard:
        hazards = {h.model: h for h in HAZARDS}
        if args.hazard not in hazards:
            parser.error(f"unknown hazard model; known: {', '.join(hazards)}")
        hazard = hazards[args.hazard]
        trace, source = hazard_trace(hazard.model)
        if trace is None:
            print(source)
            return 2
        replay = replay_hazard(load_impl(args.impl), hazard, trace)
        print(f"{hazard.model}: {hazard.what}\ncounterexample: {source}\n{replay.table()}")
        if replay.violation is None:
            print("closed: no wrong value, no misplaced count, nothing pinned")
            return 0
        print(("ASSUMPTION (no layout-compatible implementation closes it): "
               if not hazard.closable else "VIOLATION: ") + replay.violation)
        return 0 if not hazard.closable else 1
    out = args.out or REPO / "build" / "conformance" / name
    report = run(name, out, args.quick, tuple(args.level or LEVELS))
    for level in LEVELS:
        print(f"{level:<18} {report.level_status(level)}")
    print(f"report: {_rel(out / 'conformance.md')} ({report.seconds:.0f} s)")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
