"""A pytest plugin (`-p bench.citime_plugin`) that records each test's CPU
seconds beside its wall time: on a shared machine wall time grows with the
others' load, CPU time does not. The CPU time is this process's and that of
every child it waited for (the oracle's subprocesses, TLC's JVM, readers),
from setup to teardown, kept as the junit XML property `cpu_s` that
`python -m bench.citime` reads. With `$CITIME_LOG` set, each test's
seconds are also appended to that file as it ends (a JSON line), so that a
run cut short still tells where its time went."""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Generator
from typing import Any

import pytest

_STARTED = "_citime_cpu_started"


def cpu_seconds() -> float:
    """User + system seconds of this process and of its reaped children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    setattr(item, _STARTED, (cpu_seconds(), time.monotonic()))
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None]:
    # junitxml writes the properties of the teardown report: add ours before it is made
    started = getattr(item, _STARTED, None)
    if call.when == "teardown" and started is not None:
        cpu, wall = cpu_seconds() - started[0], time.monotonic() - started[1]
        item.user_properties.append(("cpu_s", f"{cpu:.3f}"))
        if log := os.environ.get("CITIME_LOG"):
            line = {"test": item.nodeid, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}
            with open(log, "a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")
    yield
