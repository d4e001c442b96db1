"""The pytest part of a conformance run: which tests of shmref.suite make up
which property of which level, running them in this process with a
collecting plugin, and turning their results into properties."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import settings

from shmref.paths import SUITE_DIR
from shmref.testing import profiles
from shmref.verdict import (
    ERROR,
    FAIL,
    HARDENED,
    LEVELS,
    NOT_RUN,
    PASS,
    PROTOCOL,
    SEED,
    SKIP,
    Check,
    impl_arg,
    shell,
)


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
        return self.name or self.select


TEST_GROUPS: tuple[TestGroup, ...] = (
    TestGroup(SEED, "test_ring.py", "ring: docstring scenarios, ids"),
    TestGroup(SEED, "test_storage.py", "storage: handles, counting, reclamation"),
    TestGroup(
        SEED,
        "test_layout.py::test_same_results_as_seed",
        "differential: one call sequence on the seed and the impl, same results",
    ),
    TestGroup(
        SEED,
        "test_layout.py::test_same_segment_bytes_as_seed",
        "same addresses, ids and segment bytes as the seed after every call",
    ),
    TestGroup(
        SEED,
        "test_layout.py::test_seed_writer_impl_readers",
        "the seed's writer, impl readers, one segment",
    ),
    TestGroup(
        SEED,
        "test_layout.py::test_impl_writer_seed_readers",
        "impl writer, the seed's readers, one segment",
    ),
    TestGroup(
        SEED,
        "test_layout.py::test_mixed_readers_on_one_segment",
        "readers of the seed, refimpl and the impl on one segment",
    ),
    TestGroup(
        HARDENED,
        "test_ring.py::TestBadInput",
        "ring: bad input is a clear ValueError",
        closes="findings 1, 4, 9, 12, 14",
    ),
    TestGroup(
        HARDENED,
        "test_storage.py::TestBadHandles",
        "storage: every malformed handle is a ValueError",
        closes="finding 2",
    ),
    TestGroup(
        HARDENED,
        "test_storage.py::TestBadPuts",
        "storage: bad puts and misuse are clear errors, nothing left half-done",
        closes="findings 1, 3, 6, 9",
    ),
    TestGroup(
        HARDENED,
        "test_layout.py::test_same_results_as_refimpl",
        "differential: refimpl's result on every call, bad input included",
        closes="findings 1-3, 6, 7, 9, 12",
    ),
    TestGroup(
        PROTOCOL,
        "test_replay.py::test_simulation_corpus_replays[MCStorage]",
        "TLC simulation traces of MCStorage replayed step by step",
        name="replay MCStorage",
    ),
    TestGroup(
        PROTOCOL,
        "test_replay.py::test_simulation_corpus_replays[MCRing]",
        "TLC simulation traces of MCRing replayed step by step",
        quick=False,
        name="replay MCRing",
    ),
    TestGroup(
        PROTOCOL,
        "test_replay.py::test_allocator_state_graph_every_edge",
        "every edge of the allocator's state graph replayed",
        quick=False,
    ),
    TestGroup(
        SEED,
        "test_stateful.py::test_store_machine[seed]",
        "state machine beside the pure model: seed's policy, fixes allowed",
    ),
    TestGroup(
        HARDENED,
        "test_stateful.py::test_store_machine[fixed]",
        "Hypothesis state machine beside the pure model: refimpl's policy",
    ),
    TestGroup(
        PROTOCOL,
        "test_stateful.py::test_store_machine[safety]",
        "Hypothesis state machine beside the pure model: safety and liveness, either policy",
    ),
    TestGroup(
        SEED,
        "test_stateful.py::test_store_machine_from_tlc_traces[seed]",
        "state machine seeded with TLC trace prefixes: seed's policy, fixes allowed",
    ),
    TestGroup(
        HARDENED,
        "test_stateful.py::test_store_machine_from_tlc_traces[fixed]",
        "state machine seeded with TLC trace prefixes: refimpl's policy",
    ),
    TestGroup(
        PROTOCOL,
        "test_stateful.py::test_store_machine_from_tlc_traces[safety]",
        "state machine seeded with TLC trace prefixes: safety and liveness, either policy",
    ),
    TestGroup(
        SEED,
        "test_stateful.py::test_store_machine_small_ids[seed]",
        "state machine with ID_MAX 3 (ids wrap, live-id limit): seed's policy, fixes allowed",
        quick=False,
    ),
    TestGroup(
        HARDENED,
        "test_stateful.py::test_store_machine_small_ids[fixed]",
        "state machine with ID_MAX 3 (ids wrap, live-id limit): refimpl's policy",
        quick=False,
    ),
    TestGroup(
        PROTOCOL,
        "test_stateful.py::test_store_machine_small_ids[safety]",
        "state machine with ID_MAX 3 (ids wrap, live-id limit): safety and liveness, either policy",
        quick=False,
    ),
)
NOT_RUN_GROUPS = (
    "test_stateful.py::test_store_machine_reader_processes (readers in "
    "processes; minutes to shrink a failure)"
)


class Collector:
    """A pytest plugin that keeps each test's outcome (the worst of its
    setup, call and teardown) and the text of its failure or skip."""

    RANK = {"error": 3, "fail": 2, "pass": 1, "skip": 0}

    def __init__(self) -> None:
        self.cases: dict[str, dict[str, str]] = {}
        self.collect_errors: list[str] = []

    def _keep(self, node: str, status: str, text: str) -> None:
        known = self.cases.get(node)
        if known is None or self.RANK[status] > self.RANK[known["status"]]:
            self.cases[node] = {"node": node, "status": status, "text": text}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self._keep(
                report.nodeid, "fail" if report.when == "call" else "error", report.longreprtext
            )
        elif report.skipped:
            reason = (
                report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            )
            self._keep(report.nodeid, "skip", reason)
        elif report.when == "call":
            self._keep(report.nodeid, "pass", "")

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collect_errors.append(f"{report.nodeid}: {report.longreprtext}")


def plugin_args() -> list[str]:
    """`-p shmref.pytest_plugin` unless pytest loads it by its entry point."""
    from importlib.metadata import entry_points

    autoload = not os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    installed = any(ep.value == "shmref.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if autoload and installed else ["-p", "shmref.pytest_plugin"]


def run_suite(
    name: str, groups: Sequence[TestGroup], out: Path, profile: str = profiles.CI
) -> tuple[int, list[dict[str, str]], str]:
    """Run the groups' tests of shmref.suite on `name` in this process with
    Hypothesis profile `profile`; the exit code, every case's result and the
    collection errors (if any). The user's own pytest configuration is left
    out (an empty ini file), and this process's Hypothesis profile restored."""
    out.mkdir(parents=True, exist_ok=True)
    ini = out / "pytest.ini"
    ini.write_text("[pytest]\n")
    # -p no:unraisableexception: an exception raised by an implementation's
    # __del__ during garbage collection is the implementation's, reported by
    # the test it concerns; it must not take down the whole run.
    args = [
        "-q",
        "-c",
        str(ini),
        "--rootdir",
        str(SUITE_DIR),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:unraisableexception",
        *plugin_args(),
        "--shmref-impl",
        impl_arg(name),
        "--shmref-profile",
        profile,
        *dict.fromkeys(str(SUITE_DIR / g.select) for g in groups),
    ]
    collector = Collector()
    previous = settings.default
    try:
        with open(out / "pytest.log", "w", encoding="utf-8") as log, redirect_stdout(log):
            code = int(pytest.main(args, plugins=[collector]))
    finally:
        settings.register_profile("shmref-restored", previous)
        settings.load_profile("shmref-restored")
    return code, list(collector.cases.values()), "\n".join(collector.collect_errors)


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
        error = next(
            (
                lines[k]
                for k in range(start - 1, max(start - 12, -1), -1)
                if re.match(r"^[\w.]*(Error|Exception|Failed)\b", lines[k])
            ),
            "",
        )
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


def property_of(node: str) -> str:
    """`test_ring.py::TestBadInput::test_x[1]` -> `test_ring.py::TestBadInput::test_x`."""
    return node.split("[", 1)[0]


def matches(select: str, node: str) -> bool:
    return node == select or node.startswith((select + "::", select + "["))


def group_of(node: str, groups: Sequence[TestGroup]) -> TestGroup | None:
    """The group with the longest selection that selects `node`."""
    mine = [g for g in groups if matches(g.select, node)]
    return max(mine, key=lambda g: len(g.select)) if mine else None


def not_run_reason(text: str) -> str | None:
    found = re.search(r"not run: missing [^\n]*", text)
    return found.group(0).strip().rstrip("')\"") if found else None


def pytest_checks(
    name: str,
    groups: Sequence[TestGroup],
    cases: list[dict[str, str]],
    impl: ModuleType | None = None,
    profile: str = profiles.CI,
) -> list[Check]:
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
            checks.append(
                Check(
                    group.level,
                    group.label,
                    group.what,
                    ERROR,
                    detail="no test result (collection error? see pytest.log)",
                )
            )
    for (level, prop), prop_cases in by_property.items():
        group = owner[(level, prop)]
        counts = {
            s: sum(1 for c in prop_cases if c["status"] == s)
            for s in ("pass", "fail", "error", "skip")
        }
        reasons = [
            r for c in prop_cases if c["status"] == "skip" and (r := not_run_reason(c["text"]))
        ]
        if counts["fail"] or counts["error"]:
            status = FAIL
        elif counts["pass"]:
            status = PASS
        else:
            status = NOT_RUN if reasons else SKIP
        total = len(prop_cases)
        what = group.what + (f" (closes {group.closes})" if group.closes else "")
        check = Check(
            level,
            prop,
            what,
            status,
            cases=f"{counts['pass']}/{total - counts['skip']}"
            + (f" ({counts['skip']} skipped)" if counts["skip"] else ""),
        )
        if status in (SKIP, NOT_RUN):
            check.detail = (
                reasons[0] if reasons else prop_cases[0]["text"].strip().splitlines()[-1][:200]
            )
        for case in prop_cases:
            if case["status"] in ("fail", "error"):
                check.failures.append(
                    {
                        "case": case["node"],
                        "trace": failure_trace(case["text"]),
                        "command": shell(
                            f"python -m pytest -p no:cacheprovider --shmref-impl "
                            f"{impl_arg(name)}"
                            + (f" --shmref-profile {profile}" if profile != profiles.CI else "")
                            + f" {shlex.quote(str(SUITE_DIR / case['node']))}",
                            impl,
                        ),
                    }
                )
        checks.append(check)
    order = {g.label: k for k, g in enumerate(groups)}
    checks.sort(
        key=lambda c: (
            LEVELS.index(c.level),
            min((v for k, v in order.items() if c.name.startswith(k.split("::")[0])), default=0),
        )
    )
    return checks
