"""The calls of any test on a store, for tests outside the suite (FINDINGS'
regression tests): `pytest -p shmref.calls.callplugin --shmref-run FILE`
with a run configuration (shmref.core.runconfig) that has a `trace_dir`
instruments every store module a fixture returns (shmref.calls.calltrace)
and leaves each failing test's calls as a trace; with `trace_passed`, a
passing test's too (a finding's demonstration passes on the seed: its calls
are the picture)."""

from __future__ import annotations

from collections.abc import Generator
from types import ModuleType
from typing import Any

import pytest

from shmref.calls import calltrace
from shmref.core.runconfig import current_run
from shmref.render import sink


def passed_kept() -> bool:
    """The run keeps a passing test's calls too (`trace_passed`)."""
    run = current_run()
    return run is not None and run.trace_passed


def case_name(item: pytest.Item) -> str:
    """A test as reports name it: `test_x.py::test_y[p]`."""
    return sink.case_of(item.nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup() -> Generator[None, Any, Any]:
    """Instrument a store module a fixture returns (when a report asks for traces).
    (pluggy passes a hook only the arguments it names: this one needs none.)"""
    value = yield
    if isinstance(value, ModuleType) and all(hasattr(value, c) for c in calltrace.CLASSES):
        calltrace.instrument(value)
    return value


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Each test starts its own record of calls."""
    calltrace.RECORDER.reset(case_name(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Save a failed test's calls as its trace (a passed one's too if the run asks)."""
    report = yield
    if report.when == "call" and report.failed and call.excinfo is not None:
        calltrace.save_failure(case_name(item), call.excinfo.exconly().splitlines()[0])
    elif report.when == "call" and report.passed and passed_kept():
        calltrace.save_failure(case_name(item), "")
    return report
