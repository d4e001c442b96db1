"""The pytest part of a conformance run: the suite's tests run with a
collecting plugin, and their results turned into properties by the one
table of which test makes up which property (shmref.core.suitegroups,
which the suite reads too: it is re-exported here for the oracle)."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType

from shmref.core.levels import ERROR, FAIL, LEVELS, NOT_RUN, PASS, SKIP
from shmref.core.paths import SUITE_DIR
from shmref.core.suitegroups import (
    TEST_GROUPS,
    TestGroup,
    group_of,
    property_key,
)
from shmref.oracle.isolation import Incident
from shmref.oracle.verdict import Check, shell, shell_impl
from shmref.render.sink import case_of
from shmref.session import profiles
from shmref.session.shrinkbudget import note_in

__all__ = [
    "TEST_GROUPS",
    "TestGroup",
    "failure_trace",
    "group_of",
    "not_run_reason",
    "plugin_args",
    "property_key",
    "pytest_checks",
    "replay_command",
    "suite_node_id",
]


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


def suite_node_id(nodeid: str) -> str:
    """`.../shmref/suite/test_ring.py::t` -> `test_ring.py::t` (the table's form)."""
    return case_of(nodeid)


def not_run_reason(text: str) -> str | None:
    found = re.search(r"not run: missing [^\n]*", text)
    return found.group(0).strip().rstrip("')\"") if found else None


Cases = list[dict[str, str]]  # each case's node, status and text
PropertyKey = tuple[str, str]  # (level, property)


def pytest_checks(
    name: str,
    groups: Sequence[TestGroup],
    cases: Cases,
    impl: ModuleType | str | None = None,
    profile: str = profiles.CI,
    incidents: Mapping[PropertyKey, Incident] | None = None,
) -> list[Check]:
    """The properties of the selected `groups` from the cases' results. A case
    counts for the property the one table assigns it to (property_key),
    whatever was selected; a property whose process crashed or hung
    (`incidents`) is CRASH or TIMEOUT."""
    incidents = incidents or {}
    by_property, owner = cases_by_property(groups, cases, incidents)
    checks = [
        Check(
            group.level,
            group.label,
            group.what,
            ERROR,
            detail="no test result (collection error? see workers/*.log)",
        )
        for group in groups
        if not any(g is group for g in owner.values())
    ]
    replay = ReplayOf(name, impl, profile)
    for key, prop_cases in by_property.items():
        check = property_check(key, owner[key], prop_cases, incidents.get(key))
        check.failures += failures(key, prop_cases, incidents.get(key), replay)
        checks.append(check)
    order = {g.label: k for k, g in enumerate(TEST_GROUPS)}
    checks.sort(
        key=lambda c: (
            LEVELS.index(c.level),
            min((v for k, v in order.items() if c.name.startswith(k.split("::")[0])), default=0),
        )
    )
    return checks


def cases_by_property(
    groups: Sequence[TestGroup], cases: Cases, incidents: Mapping[PropertyKey, Incident]
) -> tuple[dict[PropertyKey, Cases], dict[PropertyKey, TestGroup]]:
    """The selected groups' cases by property (one lost to a crash or a hang
    with none), and the group each property belongs to."""
    selected = {g.label for g in groups}
    by_property: dict[PropertyKey, Cases] = {}
    owner: dict[PropertyKey, TestGroup] = {}
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
    return by_property, owner


def property_check(
    key: PropertyKey, group: TestGroup, prop_cases: Cases, incident: Incident | None
) -> Check:
    """A property's status from its cases' (an incident's first), with the
    count of cases passed and why it did not run."""
    level, prop = key
    counts = {
        s: sum(1 for c in prop_cases if c["status"] == s) for s in ("pass", "fail", "error", "skip")
    }
    reasons = [r for c in prop_cases if c["status"] == "skip" and (r := not_run_reason(c["text"]))]
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
    elif status in (SKIP, NOT_RUN):
        check.detail = (
            reasons[0] if reasons else prop_cases[0]["text"].strip().splitlines()[-1][:200]
        )
    return check


@dataclass(frozen=True)
class ReplayOf:
    """What a failure's replay command names: the implementation and the profile."""

    name: str
    impl: ModuleType | str | None
    profile: str

    def command(self, node: str, shrink_all: bool = False) -> str:
        return replay_command(self.name, node, self.impl, self.profile, shrink_all)


def failures(
    key: PropertyKey, prop_cases: Cases, incident: Incident | None, replay: ReplayOf
) -> list[dict[str, str]]:
    """The property's failures, each with its trace and the command that replays it."""
    found = []
    if incident is not None:
        node = incident.node or key[1]
        found.append({"case": node, "trace": incident.detail, "command": replay.command(node)})
    for case in prop_cases:
        if case["status"] in ("fail", "error"):
            note = note_in(case["text"])  # its shrinking stopped by the budget
            failure = {"case": case["node"], "trace": failure_trace(case["text"])}
            failure["command"] = replay.command(case["node"], bool(note))
            found.append({**failure, "note": note} if note else failure)
    return found


def replay_command(
    name: str, node: str, impl: ModuleType | str | None, profile: str, shrink_all: bool = False
) -> str:
    """`shrink_all`: shrinks as long as Hypothesis itself would (no budget of ours)."""
    return shell(
        f"python -m pytest -p no:cacheprovider --shmref-impl {shell_impl(name)}"
        + (f" --shmref-profile {profile}" if profile != profiles.CI else "")
        + " --shmref-shrink-budget all" * shrink_all
        + f" {shlex.quote(str(SUITE_DIR / node))}",
        impl,
    )
