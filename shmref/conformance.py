"""`make conformance IMPL=mod`: the oracle's report for an implementation.

    python -m shmref.conformance --impl MODULE [--out DIR] [--quick]
    python -m shmref.conformance --impl MODULE --hazard MCDoubleRead
    python -m shmref.conformance --validate-trace recording.json

The implementation is judged by the written contract (shmref.contract) and
nothing else: a module lacking a required name is refused (exit 2, one line
naming the module and the missing names). Against MODULE ('seed' builds the
seed's own code) it runs the behavioural tests, the side-by-side tests with
the seed and refimpl (tests/test_layout.py), the TLC trace replays and the
Hypothesis state machines (pytest in a subprocess with `--impl MODULE
--junitxml`); the hazard counterexamples of the spec's hazard models replayed
on MODULE; and trace validation (a recorded run checked by TLC). It writes
DIR/conformance.md and DIR/conformance.json (default DIR:
build/conformance/<module>), every property in one of three levels:

- seed-compatible: what the seed's code does (values, exception types, ids,
  addresses, segment bytes); the seed passes all of it by construction, and
  where the seed's behaviour is a FINDINGS.md defect, refimpl's fix passes too.
- hardened (optional): refimpl's fixes, each property naming the findings
  it closes.
- protocol-safe: the spec's replays and state machines pass, a recorded run
  is a behaviour of the spec, and no hazard counterexample makes it return a
  wrong value or count a read on another chunk. Hazards that no
  seed-compatible implementation can close are reported as "assumption".

Every property carries the seed's own result beside the implementation's
(the seed baseline: one run, cached under DIR/seed-baseline). A property
that needs an optional capability the module lacks is `not run: missing X`.
Every failure comes with its shortest trace and one command that replays it
when pasted into a fresh shell. Exit status: 0 if seed-compatible and
protocol-safe pass (and hardened, unless it is left out with --level), 1
otherwise, 2 for a module that does not import or lacks required names.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
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

from shmref import contract, tlc
from shmref.corpus import spec_digest
from shmref.driver import Driver, Outcome
from shmref.impl import load_impl
from shmref.recorder import Recorder, Recording, Validation, random_workload, validate_recording
from shmref.replay import SPEC_DIR, Replayer, describe

REPO = Path(__file__).resolve().parents[1]
SEED, HARDENED, PROTOCOL = "seed-compatible", "hardened", "protocol-safe"
LEVELS = (SEED, HARDENED, PROTOCOL)
LEVEL_MEANING = {
    SEED: "the seed's values, exception types, ids, addresses and segment bytes "
          "(refimpl's where it fixes a documented finding)",
    HARDENED: "refimpl's fixes: clear errors for bad input and the findings each "
              "property names (optional)",
    PROTOCOL: "none of the spec's hazards: replays, state machines and a recorded run "
              "agree with the spec; no hazard counterexample returns a wrong value",
}
PASS, FAIL, SKIP, NOT_RUN, ASSUMPTION, ERROR = ("pass", "FAIL", "skip", "not run",
                                                "assumption", "ERROR")


@dataclass(frozen=True)
class TestGroup:
    """A pytest selection that makes up one or more properties of a level. A
    case belongs to the group with the longest matching selection. A group
    whose selection is a file or a class gives one property per test
    function; any other group is one property named `name` (default: the
    selection)."""

    level: str
    select: str  # pytest node id (prefix)
    what: str
    quick: bool = True
    name: str = ""
    closes: str = ""  # the FINDINGS.md entries a hardened property closes

    @property
    def split(self) -> bool:
        tail = self.select.split("::")[-1]
        return self.select.endswith(".py") or tail[:1].isupper()

    @property
    def label(self) -> str:
        return self.name or self.select.removeprefix("tests/")


TEST_GROUPS: tuple[TestGroup, ...] = (
    TestGroup(SEED, "tests/test_ring.py", "ring: docstring scenarios, ids"),
    TestGroup(SEED, "tests/test_storage.py", "storage: handles, counting, reclamation"),
    TestGroup(SEED, "tests/test_layout.py::test_same_results_as_seed",
              "differential: one call sequence on the seed and the impl, same results"),
    TestGroup(SEED, "tests/test_layout.py::test_same_segment_bytes_as_seed",
              "same addresses, ids and segment bytes as the seed after every call"),
    TestGroup(SEED, "tests/test_layout.py::test_seed_writer_impl_readers",
              "the seed's writer, impl readers, one segment"),
    TestGroup(SEED, "tests/test_layout.py::test_impl_writer_seed_readers",
              "impl writer, the seed's readers, one segment"),
    TestGroup(SEED, "tests/test_layout.py::test_mixed_readers_on_one_segment",
              "readers of the seed, refimpl and the impl on one segment"),
    TestGroup(HARDENED, "tests/test_ring.py::TestBadInput",
              "ring: bad input is a clear ValueError", closes="findings 1, 4, 9, 12, 14"),
    TestGroup(HARDENED, "tests/test_storage.py::TestBadHandles",
              "storage: every malformed handle is a ValueError", closes="finding 2"),
    TestGroup(HARDENED, "tests/test_storage.py::TestBadPuts",
              "storage: bad puts and misuse are clear errors, nothing left half-done",
              closes="findings 1, 3, 6, 9"),
    TestGroup(HARDENED, "tests/test_layout.py::test_same_results_as_refimpl",
              "differential: refimpl's result on every call, bad input included",
              closes="findings 1-3, 6, 7, 9, 12"),
    TestGroup(PROTOCOL, "tests/test_replay.py::test_simulation_corpus_replays[MCStorage]",
              "TLC simulation traces of MCStorage replayed step by step",
              name="replay MCStorage"),
    TestGroup(PROTOCOL, "tests/test_replay.py::test_simulation_corpus_replays[MCRing]",
              "TLC simulation traces of MCRing replayed step by step", quick=False,
              name="replay MCRing"),
    TestGroup(PROTOCOL, "tests/test_replay.py::test_allocator_state_graph_every_edge",
              "every edge of the allocator's state graph replayed", quick=False),
    TestGroup(PROTOCOL, "tests/test_stateful.py::test_store_machine",
              "Hypothesis state machine beside the pure model"),
    TestGroup(PROTOCOL, "tests/test_stateful.py::test_store_machine_from_tlc_traces",
              "state machine seeded with TLC trace prefixes"),
    TestGroup(PROTOCOL, "tests/test_stateful.py::test_store_machine_small_ids",
              "state machine with ID_MAX 3 (ids wrap, live-id limit)", quick=False),
)
NOT_RUN_GROUPS = ("tests/test_stateful.py::test_store_machine_reader_processes (readers in "
                  "processes; minutes to shrink a failure)")


@dataclass(frozen=True)
class Hazard:
    model: str
    what: str
    closable: bool  # False: no seed-compatible implementation can close it
    liveness: bool = False
    quick: bool = True  # TLC finds it in seconds (else only with a cached output)
    expect: str = ""  # an unclosable hazard shows as this violation (else: a failure)


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
    Hazard("MCIdWrap", "ABA: ids wrap while a handle is outstanding; the id check "
           "passes on another object (assumption A3)", False, expect="returned"),
    Hazard("MCLostReader", "a delivery is never read: its chunk is pinned forever "
           "(assumption A1: each delivery is read by every reader)", False, liveness=True,
           expect="stay pinned"),
)


@dataclass
class Check:
    """One property of one level; `seed` is the seed's own result on it."""

    level: str
    name: str
    what: str
    status: str  # pass, FAIL, skip, not run, assumption, ERROR
    cases: str = ""
    detail: str = ""
    failures: list[dict[str, str]] = field(default_factory=list)  # trace, command, case
    seed: str = ""


# -- pytest ------------------------------------------------------------------------------


def impl_arg(name: str) -> str:
    return {"shmref_seed": "seed", "shmref_port": "port"}.get(name, name)


def import_root(impl: ModuleType) -> str | None:
    """The sys.path entry that `impl` was imported from (None: built by shmref)."""
    if impl.__name__ in ("shmref_seed", "shmref_port") or not getattr(impl, "__file__", None):
        return None
    path = Path(impl.__file__ or "").resolve()
    depth = impl.__name__.count(".") + (1 if path.name == "__init__.py" else 0)
    root = path.parent
    for _ in range(depth):
        root = root.parent
    return str(root)


def shell(command: str, impl: ModuleType | None) -> str:
    """`command` as it runs when pasted into a fresh shell: in the repository,
    with the implementation importable."""
    paths = [str(REPO)] + ([root] if impl is not None and (root := import_root(impl))
                           and root != str(REPO) else [])
    return f"cd {shlex.quote(str(REPO))} && PYTHONPATH={shlex.quote(':'.join(paths))} {command}"


def pytest_env(impl: ModuleType | None = None) -> dict[str, str]:
    env = dict(os.environ)
    root = import_root(impl) if impl is not None else None
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), root, env.get("PYTHONPATH"))
                                        if p)
    env.pop("HYPOTHESIS_PROFILE", None)  # the CI profile: derandomized, replayable
    return env


def run_pytest(name: str, groups: Sequence[TestGroup], out: Path, impl: ModuleType | None = None,
               timeout: float = 900) -> tuple[int, str]:
    xml = out / "pytest.xml"
    xml.unlink(missing_ok=True)
    # -p no:unraisableexception: an exception raised by an implementation's
    # __del__ during garbage collection is the implementation's, reported by
    # the test it concerns; it must not take down the whole session.
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "-p", "no:unraisableexception", "--impl", impl_arg(name),
           f"--junitxml={xml}", "-o", "junit_family=xunit1",
           *dict.fromkeys(g.select for g in groups)]
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=pytest_env(impl), capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        text = f"pytest timed out after {timeout:.0f} s\n{partial}"
        (out / "pytest.log").write_text(text)
        return -1, text
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
    (and, for replays, the whole step table: never cut before the divergence)."""
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
        return "\n".join(errors).strip()
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
    for result in cases:
        known = merged.get(result["node"])
        if known is None or rank[result["status"]] > rank[known["status"]]:
            merged[result["node"]] = result
    return list(merged.values())


def property_of(node: str) -> str:
    """`tests/test_ring.py::TestBadInput::test_x[1]` -> `test_ring.py::TestBadInput::test_x`."""
    return node.split("[", 1)[0].removeprefix("tests/")


def matches(select: str, node: str) -> bool:
    return node == select or node.startswith((select + "::", select + "["))


def group_of(node: str, groups: Sequence[TestGroup]) -> TestGroup | None:
    """The group with the longest selection that selects `node`."""
    mine = [g for g in groups if matches(g.select, node)]
    return max(mine, key=lambda g: len(g.select)) if mine else None


def not_run_reason(text: str) -> str | None:
    found = re.search(r"not run: missing [^\n]*", text)
    return found.group(0).strip().rstrip("')\"") if found else None


def pytest_checks(name: str, groups: Sequence[TestGroup], cases: list[dict[str, str]],
                  impl: ModuleType | None = None) -> list[Check]:
    by_property: dict[tuple[str, str], list[dict[str, str]]] = {}
    owner: dict[tuple[str, str], TestGroup] = {}
    for case in cases:
        group = group_of(case["node"], groups)
        if group is None:
            continue
        prop = property_of(case["node"]) if group.split else group.label
        by_property.setdefault((group.level, prop), []).append(case)
        owner[(group.level, prop)] = group
    checks: list[Check] = []
    for group in groups:
        if not any(g is group for g in owner.values()):
            checks.append(Check(group.level, group.label, group.what, ERROR,
                                detail="no test result (collection error? see pytest.log)"))
    for (level, prop), prop_cases in by_property.items():
        group = owner[(level, prop)]
        counts = {s: sum(1 for c in prop_cases if c["status"] == s)
                  for s in ("pass", "fail", "error", "skip")}
        reasons = [r for c in prop_cases if c["status"] == "skip"
                   and (r := not_run_reason(c["text"]))]
        if counts["fail"] or counts["error"]:
            status = FAIL
        elif counts["pass"]:
            status = PASS
        else:
            status = NOT_RUN if reasons else SKIP
        total = len(prop_cases)
        what = group.what + (f" (closes {group.closes})" if group.closes else "")
        check = Check(level, prop, what, status,
                      cases=f"{counts['pass']}/{total - counts['skip']}"
                      + (f" ({counts['skip']} skipped)" if counts["skip"] else ""))
        if status in (SKIP, NOT_RUN):
            check.detail = reasons[0] if reasons else \
                prop_cases[0]["text"].strip().splitlines()[-1][:200]
        for case in prop_cases:
            if case["status"] in ("fail", "error"):
                check.failures.append({
                    "case": case["node"],
                    "trace": failure_trace(case["text"]),
                    "command": shell(f"python -m pytest -p no:cacheprovider --impl "
                                     f"{impl_arg(name)} '{case['node']}'", impl),
                })
        checks.append(check)
    order = {g.label: k for k, g in enumerate(groups)}
    checks.sort(key=lambda c: (LEVELS.index(c.level), min(
        (v for k, v in order.items() if c.name.startswith(k.split("::")[0])), default=0)))
    return checks


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
    run = tlc.run_tlc(SPEC_DIR / f"{model}.tla", SPEC_DIR / f"{model}.cfg", workers=1,
                      extra_args=("-deadlock",), timeout=600, log_path=cache)
    if run.trace is None:
        return None, f"TLC found no counterexample: {run.summary()}"
    return run.trace, str(cache.relative_to(REPO))


class StepError(Exception):
    """An implementation raised something the contract does not allow at a step."""

    def __init__(self, message: str, rows: list[tuple[int, str, str, str, str]]) -> None:
        super().__init__(message)
        self.rows = rows


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
    reads: dict[tuple[int, int], list[Any]] = {}  # (id, address) -> [key, reads naming it]
    stage: dict[Any, tuple[str, tuple[Any, ...]]] = {}  # reader -> (stage, handle)
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
                    assert reader is not None
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
            shown = outcome.status
            if name in ("put", "get_cached", "allocate_buf") and outcome.status == "ok":
                shown = f"ok {_handle_text(tuple(outcome.result))}"  # the impl's own numbers
            rows.append((index, describe(action), spec_outcome, shown,
                         ("VIOLATION: " + problem) if problem else note))
            return problem

        for state in trace.states[1:]:
            action = state.vars["last_action"]
            try:
                violation = step(state.index, action, action.get("outcome", "ok"))
            except contract.MissingCapability:
                raise
            except Exception as exc:  # the implementation's, named with its step
                raise StepError(f"step {state.index}, {describe(action)}: the implementation "
                                f"raised {type(exc).__name__}: {exc}", rows) from exc
            if violation:
                break
        if hazard.liveness and violation is None:
            violation = settle(driver, replayer, trace, stage, rows, step)
    return HazardReplay(hazard, violation, rows)


def settle(driver: Driver, replayer: Replayer, trace: tlc.Trace,
           stage: dict[Any, tuple[str, tuple[Any, ...]]], rows: list[Any],
           step: Any) -> str | None:
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


def _handle_text(handle: tuple[Any, ...]) -> str:
    return "<<" + ", ".join(str(x) for x in handle) + ">>"


def hazard_check(name: str, impl: ModuleType, hazard: Hazard, trace: tlc.Trace | None,
                 source: str) -> tuple[Check, HazardReplay | None]:
    what = hazard.what
    label = f"hazard {hazard.model}"
    if trace is None:
        return Check(PROTOCOL, label, what, SKIP, detail=source), None
    command = hazard_command(name, hazard, impl)
    try:
        replay = replay_hazard(impl, hazard, trace)
    except contract.MissingCapability as exc:
        return Check(PROTOCOL, label, what, NOT_RUN, detail=str(exc)), None
    except StepError as exc:  # an implementation crash is a failure, named by its step
        check = Check(PROTOCOL, label, what, ERROR, detail=str(exc))
        table = HazardReplay(hazard, str(exc), exc.rows).table()
        check.failures.append({"case": hazard.model, "trace": f"{exc}\n{table}",
                               "command": command})
        return check, None
    except Exception as exc:  # building the driver (constructor, handle) failed
        check = Check(PROTOCOL, label, what, ERROR,
                      detail=f"setting up the replay: {type(exc).__name__}: {exc}")
        check.failures.append({"case": hazard.model, "trace": check.detail, "command": command})
        return check, None
    if replay.violation is None:
        return Check(PROTOCOL, label, what, PASS,
                     detail=f"closed (counterexample from {source})"), replay
    status = FAIL
    if not hazard.closable and hazard.expect in replay.violation:
        status = ASSUMPTION
    check = Check(PROTOCOL, label, what, status, detail=replay.violation)
    if status == ASSUMPTION:
        check.detail = ("open, as for every seed-compatible implementation: "
                        + replay.violation)
    elif not hazard.closable:
        check.detail = (f"a violation other than the hazard's own ({hazard.expect!r}): "
                        + replay.violation)
    check.failures.append({"case": hazard.model,
                           "trace": f"TLC counterexample of spec/{hazard.model} ({source}), "
                                    f"replayed on {name}:\n{replay.table()}",
                           "command": command})
    return check, replay


def hazard_command(name: str, hazard: Hazard, impl: ModuleType | None = None) -> str:
    return shell(f"python -m shmref.conformance --impl {impl_arg(name)} "
                 f"--hazard {hazard.model}", impl)


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
                     out: Path, impl: ModuleType | None = None) -> Check:
    what = "implementation -> spec: a recorded random run is a behaviour of the spec (TLC)"
    check = Check(PROTOCOL, "trace validation", what, PASS)
    notes = []
    for path, recording in recordings:
        command = shell(f"python -m shmref.conformance --validate-trace "
                        f"{shlex.quote(str(path.resolve()))}", None)
        if isinstance(recording, contract.MissingCapability):
            check.status, check.detail = NOT_RUN, str(recording)
            return check
        if isinstance(recording, Exception):  # no file to validate: re-record instead
            check.status = ERROR
            check.failures.append({
                "case": path.name,
                "command": shell(f"python -m shmref.conformance --impl {impl_arg(name)} "
                                 f"--level {PROTOCOL} --out "
                                 f"{shlex.quote(str(out.resolve()))}", impl),
                "trace": f"recording the run crashed: {type(recording).__name__}: {recording}"})
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

SHOWN_LINES = 80  # longer traces: head and tail in the report, all of it in a file


@dataclass
class Report:
    impl: str
    quick: bool
    checks: list[Check]
    seconds: float
    not_run: list[str]
    levels: tuple[str, ...] = LEVELS
    seed_levels: dict[str, str] = field(default_factory=dict)  # the seed's level results

    def level_status(self, level: str) -> str:
        return level_status(self.checks, level, self.levels)

    @property
    def ok(self) -> bool:
        return all(self.level_status(level) == PASS for level in self.levels)

    def to_json(self) -> dict[str, Any]:
        return {
            "impl": self.impl, "quick": self.quick, "seconds": round(self.seconds, 1),
            "ok": self.ok, "not_run": self.not_run,
            "levels": {level: {"status": self.level_status(level),
                               "seed": self.seed_levels.get(level, ""),
                               "meaning": LEVEL_MEANING[level],
                               "checks": [asdict(c) for c in self.checks if c.level == level]}
                       for level in LEVELS},
        }

    def markdown(self, out: Path | None = None) -> str:
        lines = [f"# Conformance of `{self.impl}`", "",
                 f"{'Quick' if self.quick else 'Full'} run of `python -m shmref.conformance "
                 f"--impl {impl_arg(self.impl)}{' --quick' if self.quick else ''}`, "
                 f"{self.seconds:.0f} s. Reference: the seed's own code (column `seed`: its "
                 "result on the same property), refimpl and spec/ShmObjectStorage.tla.", "",
                 "| level | result | seed | failing properties | meaning |",
                 "| --- | --- | --- | --- | --- |"]
        for level in LEVELS:
            failing = sum(1 for c in self.checks if c.level == level and c.status in (FAIL,
                                                                                     ERROR))
            assumed = sum(1 for c in self.checks if c.level == level and c.status == ASSUMPTION)
            result = self.level_status(level) + (
                f" ({assumed} assumption{'s' if assumed > 1 else ''})" if assumed else "")
            lines.append(f"| {level} | **{result}** | {self.seed_levels.get(level, '')} "
                         f"| {failing} | {LEVEL_MEANING[level]} |")
        for level in self.levels:
            lines += ["", f"## {level}: {self.level_status(level)}", "",
                      "| result | seed | property | cases | what / detail |",
                      "| --- | --- | --- | --- | --- |"]
            for c in (c for c in self.checks if c.level == level):
                text = "; ".join(t for t in (c.what, c.detail) if t).replace("|", "\\|")
                lines.append(f"| {c.status} | {c.seed} | `{c.name}` | {c.cases} | {text} |")
        failures = [c for c in self.checks if c.failures]
        if failures:
            lines += ["", "## Failures, each with its shortest trace and one replay command",
                      "", "Each command works pasted into a fresh shell."]
        number = 0
        for c in failures:
            lines += ["", f"### {c.level}: `{c.name}` ({c.status}; the seed: {c.seed or '?'})",
                      ""]
            for f in c.failures[:4]:
                number += 1
                trace = f["trace"].strip().splitlines()
                if len(trace) > SHOWN_LINES and out is not None:
                    path = out / "failures" / f"{number}.txt"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text("\n".join(trace) + "\n")
                    trace = [*trace[:15], f"... {len(trace) - 75} lines (all of them in "
                             f"{path}) ...", *trace[-60:]]
                lines += [f"`{f['case']}`", "", "```", *trace, "```", "",
                          "Replay:", "", "```sh", f["command"], "```", ""]
            if len(c.failures) > 4:
                lines.append(f"... and {len(c.failures) - 4} more failing case(s): "
                             + ", ".join(f"`{f['case']}`" for f in c.failures[4:]))
        if self.not_run:
            lines += ["", "Not run by the conformance run: " + "; ".join(self.not_run) + "."]
        return "\n".join(lines) + "\n"


def level_status(checks: Sequence[Check], level: str, levels: Sequence[str]) -> str:
    if level not in levels:
        return NOT_RUN
    statuses = {c.status for c in checks if c.level == level}
    if statuses & {FAIL, ERROR}:
        return FAIL
    if PASS in statuses:
        return PASS
    return NOT_RUN if NOT_RUN in statuses else SKIP


# -- the seed baseline ---------------------------------------------------------------------


def fingerprint(quick: bool, levels: Sequence[str]) -> str:
    """What a cached seed baseline depends on: the options, the oracle, the
    tests, the spec and the seed."""
    digest = hashlib.sha256(repr((quick, sorted(levels))).encode())
    from shmref.seedbuild import default_seed_path

    files = sorted([*REPO.glob("shmref/*.py"), *REPO.glob("tests/*.py"),
                    *REPO.glob("spec/*.tla"), *REPO.glob("spec/*.cfg"),
                    *REPO.glob("refimpl/*.py"), default_seed_path()])
    for path in files:
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def seed_baseline(out: Path, quick: bool, levels: Sequence[str], all_groups: bool = False
                  ) -> dict[str, Any]:
    """The seed's own report for the same run (cached in out/seed-baseline)."""
    folder = out / "seed-baseline"
    stamp = folder / "fingerprint"
    key = fingerprint(quick and not all_groups, levels) + ("-all" if all_groups else "")
    report = folder / "conformance.json"
    if not (report.is_file() and stamp.is_file() and stamp.read_text() == key):
        run("shmref_seed", folder, quick, levels, baseline=False, all_groups=all_groups)
        stamp.write_text(key)
    loaded: dict[str, Any] = json.loads(report.read_text())
    return loaded


def attach_baseline(checks: list[Check], baseline: Mapping[str, Any]) -> dict[str, str]:
    results = {(level, c["name"]): c["status"]
               for level, data in baseline["levels"].items() for c in data["checks"]}
    for check in checks:
        check.seed = results.get((check.level, check.name), "absent")
    return {level: data["status"] for level, data in baseline["levels"].items()}


# -- the run -------------------------------------------------------------------------------


def run(name: str, out: Path, quick: bool, levels: Sequence[str] = LEVELS, *,
        baseline: bool = True, all_groups: bool = False) -> Report:
    """One conformance run. `all_groups`: every pytest group even when
    `quick` (every property name, with quick TLC and recordings)."""
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    impl = load_impl(name)
    groups = [g for g in TEST_GROUPS
              if (g.quick or not quick or all_groups) and g.level in levels]
    not_run = [NOT_RUN_GROUPS] + [g.select for g in TEST_GROUPS
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
        path.unlink(missing_ok=True)
        try:
            recording = record(impl, 150 if quick else 300, seed)
            recording.save(path)
            recordings.append((path, recording))
        except Exception as exc:  # reported as the check's error
            recordings.append((path, exc))
    validation: list[Check] = []

    def validate() -> None:
        try:
            validation.append(validation_check(name, recordings, out, impl))
        except tlc.TlcError as exc:
            validation.append(Check(PROTOCOL, "trace validation", "", ERROR, detail=str(exc)))

    threads = [threading.Thread(target=fetch_traces), threading.Thread(target=validate)]
    for thread in threads if protocol else ():
        thread.start()
    code, output = run_pytest(name, groups, out, impl) if groups else (0, "")
    for thread in threads if protocol else ():
        thread.join()

    checks: list[Check] = []
    xml = out / "pytest.xml"
    if not groups:
        pass
    elif xml.is_file():
        checks += pytest_checks(name, groups, parse_junit(xml), impl)
    else:
        checks.append(Check(groups[0].level, "pytest", "the test run", ERROR,
                            detail=f"pytest exited {code} without a report: "
                                   + output.strip()[-500:]))
    for hazard in HAZARDS if protocol else ():
        trace, source = traces.get(hazard.model, (None, "no trace"))
        checks.append(hazard_check(name, impl, hazard, trace, source)[0])
    checks += validation
    run_levels = tuple(level for level in LEVELS if level in levels)
    seed_levels: dict[str, str] = {}
    if name == "shmref_seed":
        for check in checks:
            check.seed = check.status
        seed_levels = {level: level_status(checks, level, run_levels) for level in LEVELS}
    elif baseline:
        seed_levels = attach_baseline(checks, seed_baseline(out, quick, levels, all_groups))
    report = Report(name, quick, checks, time.monotonic() - started, not_run, run_levels,
                    seed_levels)
    (out / "conformance.json").write_text(json.dumps(report.to_json(), indent=1) + "\n")
    (out / "conformance.md").write_text(report.markdown(out))
    return report


def load_checked(module: str) -> tuple[ModuleType | None, str]:
    """The module, or None and one line saying why it cannot be judged."""
    try:
        impl = load_impl(module)
    except Exception as exc:  # any import failure is the module's: say so in one line
        return None, f"{module}: does not import: {type(exc).__name__}: {exc}"
    lacking = contract.missing(impl)
    if lacking:
        return None, (f"{module}: lacks what the contract (shmref.contract) requires: "
                      + ", ".join(lacking))
    return impl, ""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shmref.conformance", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--impl", help="module under test ('seed': the seed's own code; "
                        "'port': a port of it with other private names)")
    parser.add_argument("--out", type=Path, help="report folder "
                        "(default build/conformance/<module>)")
    parser.add_argument("--quick", action="store_true", help="fewer tests (well under 2 min)")
    parser.add_argument("--all-groups", action="store_true",
                        help="with --quick: still run every pytest group (every property)")
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
    impl, problem = load_checked(args.impl)
    if impl is None:
        print(problem, file=sys.stderr)
        return 2
    name = impl.__name__
    if args.hazard:
        hazards = {h.model: h for h in HAZARDS}
        if args.hazard not in hazards:
            parser.error(f"unknown hazard model; known: {', '.join(hazards)}")
        hazard = hazards[args.hazard]
        trace, source = hazard_trace(hazard.model)
        if trace is None:
            print(source)
            return 2
        check, replay = hazard_check(name, impl, hazard, trace, source)
        print(f"{hazard.model}: {hazard.what}\ncounterexample: {source}")
        if replay is not None:
            print(replay.table())
        elif check.failures:
            print(check.failures[0]["trace"])
        print(f"{check.status.upper()}: {check.detail}")
        return 0 if check.status in (PASS, ASSUMPTION) else 1
    out = (args.out or REPO / "build" / "conformance" / name).resolve()
    report = run(name, out, args.quick, tuple(args.level or LEVELS),
                 all_groups=args.all_groups)
    for level in LEVELS:
        seed = report.seed_levels.get(level, "")
        print(f"{level:<16} {report.level_status(level):<8} (seed: {seed})")
    print(f"report: {out / 'conformance.md'} ({report.seconds:.0f} s)")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
