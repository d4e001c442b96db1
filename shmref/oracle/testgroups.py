"""The pytest part of a conformance run: which tests of shmref.suite make up
which property of which level, running them in this process with a
collecting plugin, and turning their results into properties."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType

from shmref.core.paths import SUITE_DIR
from shmref.oracle.isolation import Incident
from shmref.oracle.verdict import (
    ERROR,
    FAIL,
    HARDENED,
    LAYOUT,
    LEVELS,
    NOT_RUN,
    PASS,
    PROTOCOL,
    SEED,
    SKIP,
    Check,
    shell,
    shell_impl,
)
from shmref.render.sink import case_of
from shmref.testing import profiles
from shmref.testing.shrinkbudget import note_in


@dataclass(frozen=True)
class TestGroup:
    """A pytest selection that makes up one or more properties of a level. A
    case belongs to the group with the longest matching selection. A group
    whose selection is a file or a class gives one property per test
    function; any other group is one property named `name` (default: the
    selection)."""

    __test__ = False  # not a test class, whatever pytest guesses from the name

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
    TestGroup(SEED, "test_ring_limits.py", "ring: id bound, attach size, free_buf's stop, __del__"),
    TestGroup(SEED, "test_storage.py", "storage: handles, counting, reclamation"),
    TestGroup(SEED, "test_storage_readers.py", "storage: readers in other processes and threads"),
    TestGroup(SEED, "test_storage_bad_input.py", "storage: its validation kept under python -O"),
    TestGroup(
        SEED,
        "test_layout.py::test_same_results_as_seed",
        "differential: one call sequence on the seed and the impl, same results",
    ),
    TestGroup(
        LAYOUT,
        "test_layout.py::test_same_segment_bytes_as_seed",
        "same addresses, ids and segment bytes as the seed after every call",
    ),
    TestGroup(
        LAYOUT,
        "test_layout.py::test_seed_writer_impl_readers",
        "the seed's writer, impl readers, one segment",
    ),
    TestGroup(
        LAYOUT,
        "test_layout.py::test_impl_writer_seed_readers",
        "impl writer, the seed's readers, one segment",
    ),
    TestGroup(
        LAYOUT,
        "test_layout.py::test_mixed_readers_on_one_segment",
        "readers of the seed, refimpl and the impl on one segment",
    ),
    TestGroup(
        LAYOUT,
        "test_ring.py::test_secret_at_segment_start",
        "the 32-byte secret is the segment's first bytes",
    ),
    TestGroup(
        LAYOUT,
        "test_ring.py::test_int_encoding_is_little_endian_signed",
        "int2byte/byte2int: 4-byte little-endian signed (headers, counts)",
    ),
    TestGroup(
        LAYOUT,
        "test_storage.py::test_object_layout_in_segment",
        "a chunk's bytes: id, size, count, serde metadata and data at the seed's offsets",
    ),
    TestGroup(
        HARDENED,
        "test_ring.py::TestBadInput",
        "ring: bad input is a clear ValueError",
        closes="findings 1, 4, 9, 12, 14",
    ),
    TestGroup(
        HARDENED,
        "test_storage_bad_input.py::TestBadHandles",
        "storage: every malformed handle is a ValueError",
        closes="finding 2",
    ),
    TestGroup(
        HARDENED,
        "test_storage_bad_input.py::TestBadPuts",
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


def plugin_args() -> list[str]:
    """`-p shmref.pytest_plugin` unless pytest loads it by its entry point."""
    from importlib.metadata import entry_points

    autoload = not os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    installed = any(ep.value == "shmref.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if autoload and installed else ["-p", "shmref.pytest_plugin"]


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


def property_key(node: str) -> tuple[str, str] | None:
    """(level, property) of a suite test: the same in every mode (--quick,
    --level, --all-groups, the plugin's markers), since it is decided by the
    one table TEST_GROUPS and never by which groups a run selected."""
    group = group_of(node, TEST_GROUPS)
    if group is None:
        return None
    return group.level, property_of(node) if group.split else group.label


def suite_node_id(nodeid: str) -> str:
    """`.../shmref/suite/test_ring.py::t` -> `test_ring.py::t` (the table's form)."""
    return case_of(nodeid)


def not_run_reason(text: str) -> str | None:
    found = re.search(r"not run: missing [^\n]*", text)
    return found.group(0).strip().rstrip("')\"") if found else None


def pytest_checks(
    name: str,
    groups: Sequence[TestGroup],
    cases: list[dict[str, str]],
    impl: ModuleType | str | None = None,
    profile: str = profiles.CI,
    incidents: Mapping[tuple[str, str], Incident] | None = None,
) -> list[Check]:
    """The properties of the selected `groups` from the cases' results. A case
    counts for the property the one table assigns it to (property_key),
    whatever was selected; a property whose process crashed or hung
    (`incidents`) is CRASH or TIMEOUT."""
    incidents = incidents or {}
    selected = {g.label for g in groups}
    by_property: dict[tuple[str, str], list[dict[str, str]]] = {}
    owner: dict[tuple[str, str], TestGroup] = {}
    for case in cases:
        group = group_of(case["node"], TEST_GROUPS)
        key = property_key(case["node"])
        if group is None or key is None or group.label not in selected:
            continue
        by_property.setdefault(key, []).append(case)
        owner[key] = group
    for key, lost in incidents.items():
        group = group_of(lost.node, TEST_GROUPS) if lost.node else None
        if group is not None and group.label in selected:
            by_property.setdefault(key, [])
            owner[key] = group
    checks: list[Check] = []
    for group in groups:
        if not any(g is group for g in owner.values()):
            checks.append(
                Check(
                    group.level,
                    group.label,
                    group.what,
                    ERROR,
                    detail="no test result (collection error? see workers/*.log)",
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
        incident = incidents.get((level, prop))
        if incident is not None:
            status = incident.status
        elif counts["fail"]:
            status = FAIL
        elif counts["error"]:
            status = ERROR
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
        if incident is not None:
            check.detail = incident.detail.splitlines()[0]
            check.failures.append(
                {
                    "case": incident.node or prop,
                    "trace": incident.detail,
                    "command": replay_command(name, incident.node or prop, impl, profile),
                }
            )
        elif status in (SKIP, NOT_RUN):
            check.detail = (
                reasons[0] if reasons else prop_cases[0]["text"].strip().splitlines()[-1][:200]
            )
        for case in prop_cases:
            if case["status"] in ("fail", "error"):
                note = note_in(case["text"])  # its shrinking stopped by the budget
                failure = {"case": case["node"], "trace": failure_trace(case["text"])}
                failure["command"] = replay_command(name, case["node"], impl, profile, bool(note))
                check.failures.append({**failure, "note": note} if note else failure)
        checks.append(check)
    order = {g.label: k for k, g in enumerate(TEST_GROUPS)}
    checks.sort(
        key=lambda c: (
            LEVELS.index(c.level),
            min((v for k, v in order.items() if c.name.startswith(k.split("::")[0])), default=0),
        )
    )
    return checks


def replay_command(
    name: str, node: str, impl: ModuleType | str | None, profile: str, shrink_all: bool = False
) -> str:
    """`shrink_all`: shrinks as long as Hypothesis itself would (no budget of ours)."""
    return shell(
        f"python -m pytest -p no:cacheprovider --shmref-impl {shell_impl(name)}"
        + (f" --shmref-profile {profile}" if profile != profiles.CI else "")
        + " --shmref-shrink-budget 300" * shrink_all
        + f" {shlex.quote(str(SUITE_DIR / node))}",
        impl,
    )
