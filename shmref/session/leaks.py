"""Test plugin: which shared-memory segments this test process created, and
which of them leaked (the session fails on a leaked segment).

Comparing /dev/shm before and after a run blames us for every segment that
other processes on the machine create meanwhile; recording the names our own
`SharedMemory(create=True)` calls produce does not. Recording wraps
`SharedMemory.__init__` for the test session: that is test code, so the
library (refimpl, shmref) patches nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from multiprocessing import shared_memory
from typing import Any

import pytest

from shmref.process import segments

_created: dict[str, str] = {}  # name -> the test that created it (`owner` then)
# The recorded names not yet seen gone: a test's check looks only at these, so
# that it costs what is live, not every segment the session ever made (the
# state-graph replay makes ten thousand).
_maybe_live: set[str] = set()
owner = "(outside any test)"  # the running test's node id, set by the hook below
_original_init = shared_memory.SharedMemory.__init__


def _recording_init(
    self: Any, name: Any = None, create: Any = False, size: Any = 0, *args: Any, **kwargs: Any
) -> None:
    try:
        _original_init(self, name, create, size, *args, **kwargs)
    finally:
        # Also when __init__ fails after shm_open (e.g. a non-int size makes
        # ftruncate raise): Python 3.11 leaves that segment behind.
        if create and getattr(self, "_name", None):
            _created.setdefault(self._name, owner)
            _maybe_live.add(self._name)


def _take_program_segments() -> None:
    """What store programs behind the process protocol were found to have
    created (shmref.process.segments) since last asked: charged to the
    running test, as our own are, named as SharedMemory names them (a
    leading slash)."""
    for name in segments.found():
        _created.setdefault("/" + name.lstrip("/"), owner)
        _maybe_live.add("/" + name.lstrip("/"))


def start() -> None:
    """Record every segment this process, or a store program it talks to,
    creates from now on (idempotent)."""
    shared_memory.SharedMemory.__init__ = _recording_init  # type: ignore[method-assign]
    segments.found()  # what programs made before: not this session's to charge


def created() -> set[str]:
    """Every segment name recorded since `start`, leaked or not."""
    return set(_created)


def creator(name: str) -> str:
    """The node id of the test that created `name`, for the leak report."""
    return _created.get(name, "(unknown)")


def leaked() -> set[str]:
    """Segments this process created that still exist."""
    _take_program_segments()
    gone = {n for n in _maybe_live if not os.path.exists(f"/dev/shm/{n.lstrip('/')}")}
    _maybe_live.difference_update(gone)
    return set(_maybe_live)


@pytest.fixture(scope="session", autouse=True)
def no_leaked_segments() -> Iterator[None]:
    """Every segment the session creates must be gone at its end."""
    start()
    yield
    segments.settle_all()
    found = leaked()
    if found:
        blamed = "; ".join(f"{n} created by {creator(n)}" for n in sorted(found))
        pytest.fail(f"test session leaked shared-memory segments: {blamed}")


@pytest.fixture(autouse=True)
def no_segment_leaked_by_this_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """A segment a test creates and leaves behind fails that test (and is
    then removed, so that the session's guard does not charge it to another)."""
    yield
    segments.settle_all()  # what a store program made in this test, found now
    mine = sorted(n for n in leaked() if creator(n) == request.node.nodeid)
    if mine:
        for name in mine:
            segments.unlink(name)
        pytest.fail(f"test leaked shared-memory segments: {', '.join(mine)} (removed)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """Segments are charged to the test that creates them (`creator`)."""
    global owner
    _take_program_segments()  # found between tests: charged to none of them
    owner = item.nodeid
    try:
        return (yield)
    finally:
        _take_program_segments()
        owner = "(outside any test)"
