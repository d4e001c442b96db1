"""The run's second pass: the failing tests' saved examples replayed and
shrunk, within one budget of examples that the failures share (so that a
store failing many properties is judged about as fast as one failing none,
and each counterexample is shrunk as far on every machine)."""

from __future__ import annotations

import dataclasses
import shutil

from shmref.core.runconfig import RunConfig
from shmref.core.suitegroups import TEST_GROUPS, group_of
from shmref.oracle.isolation import Outcome, default_workers, run_isolated
from shmref.oracle.job import Job
from shmref.oracle.testgroups import suite_node_id
from shmref.render import sink
from shmref.session.shrinkbudget import saved_tests

SHRINK_FOLDER = "shrink"  # the second pass's children, logs and saved examples


def shrink_failures(
    job: Job,
    outcome: Outcome,
    budget: int,
    timeout: float,
    workers: int | None,
    config: RunConfig | None,
) -> None:
    """The run's second pass: the tests that failed with an example saved by
    the first (which did not shrink it) run again in new children, replaying
    that example and shrinking it, each trying at most `budget` // (tests
    that failed) examples: the run shrinks within `budget` examples however
    many fail, and each test's share is the same on every run (its failing
    is). A test that fails again has its output (and drawn calls) replaced
    by the shrunk one's; its status is the first pass's whatever this pass
    gives (a crash, a timeout, a pass or a skip: the unshrunk counterexample stays)."""
    out = job.out
    saved = out / SHRINK_FOLDER / "examples"
    failed = {n for n, case in outcome.cases.items() if case["status"] == "fail"}
    nodes = sorted(failed & {suite_node_id(test) for test in saved_tests(saved)})
    share = budget // len(nodes) if nodes else 0
    if not share:
        return
    folder = out / SHRINK_FOLDER
    owners = {g.label for node in nodes if (g := group_of(node, TEST_GROUPS)) is not None}
    second = dataclasses.replace(
        job,
        out=folder,
        groups=tuple(label for label in job.groups if label in owners),
        nodes=tuple(nodes),
        recordings=(),
        hazards=(),
        shrink_budget=share,
        save_examples=None,
        replay_examples=saved,
    )
    children = min(workers or default_workers(), len(nodes))
    again = run_isolated(second, timeout, children, config=config)
    for node in nodes:
        shrunk = again.cases.get(node)
        if shrunk is None or shrunk["status"] != "fail":
            continue
        outcome.cases[node] = {**outcome.cases[node], "text": shrunk["text"]}
        drawn = folder / sink.FOLDER / sink.file_name(node)
        if drawn.is_file():
            (out / sink.FOLDER).mkdir(exist_ok=True)
            shutil.copyfile(drawn, out / sink.FOLDER / sink.file_name(node))
