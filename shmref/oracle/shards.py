"""Work spread over several child processes (one per core by default): each
child collects the whole suite and runs the tests that no other child has
claimed yet, longest first, so that the children finish close together
whatever fails (as pytest-xdist's load scheduling does, with a folder of
claim files instead of a controller). Recordings and hazard replays are
claimed the same way. A test is claimed by exactly one child, one test
ahead of the one it runs: a child that dies loses only the test it was
running (the parent makes that property CRASH or TIMEOUT), the parent
releases the one it had claimed next, and its replacement (or any child
still running) claims what is left.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

# The suite's longest tests first (from `make bench`'s per-test times): a
# long test started last would keep one child busy while the others idle.
LONGEST_FIRST = (
    "test_replay.py::test_allocator_state_graph_every_edge",
    "test_stateful.py::",
    "test_replay.py::",
    "test_layout.py::",
    "test_storage_readers.py::",
    "test_storage.py::",
)


class Claims:
    """A folder of claim files: whoever creates one first owns that work."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def path(self, key: str) -> Path:
        return self.folder / hashlib.sha256(key.encode()).hexdigest()[:24]

    def claim(self, key: str) -> bool:
        try:
            os.close(os.open(self.path(key), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            return False
        return True

    def claimed(self, key: str) -> bool:
        return self.path(key).exists()


def rank(node: str) -> int:
    """Where `node` (`test_x.py::...`) comes in LONGEST_FIRST (last if nowhere)."""
    return next((k for k, p in enumerate(LONGEST_FIRST) if node.startswith(p)), len(LONGEST_FIRST))


def longest_first(
    items: Sequence[pytest.Item], node_of: dict[pytest.Item, str]
) -> list[pytest.Item]:
    order = {item: k for k, item in enumerate(items)}
    return sorted(items, key=lambda item: (rank(node_of[item]), order[item]))


def run_claimed(
    session: pytest.Session,
    items: Sequence[pytest.Item],
    claims: Claims,
    reserved: Callable[[pytest.Item, Path], None],
) -> None:
    """pytest's run loop over the `items` this child claims. The next test is
    claimed before the current one runs, so that the current one's teardown
    knows what comes next (module fixtures kept, the session's torn down
    after the last); `reserved` hears of it, so that the parent can release
    it if this child dies first. The search for the next test wraps around:
    a test released that way is found by any child still running."""
    keys = [item.nodeid for item in items]
    hook = session.config.hook

    def claim_after(start: int) -> int | None:
        order: list[int] = [*range(start, len(items)), *range(start)]
        for k in order:
            if not claims.claimed(keys[k]) and claims.claim(keys[k]):
                return k
        return None

    current = claim_after(0)
    while current is not None:
        following = claim_after(current + 1)
        nextitem = items[following] if following is not None else None
        if nextitem is not None:
            reserved(nextitem, claims.path(nextitem.nodeid))
        hook.pytest_runtest_protocol(item=items[current], nextitem=nextitem)
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)
        current = following
