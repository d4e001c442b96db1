"""Regression pair for FINDINGS H6: a hot key in the oldest chunk can starve `put`.

`MCHotKey` (spec/HotKey.tla) finds a lasso where every delivery is read
(weak fairness for readers) and yet `put` fails for ever: the writer hands
the oldest chunk out again (`get_cached`) after the reader drained it and
before each `put`, so FIFO reclamation always meets a pinned head. These
tests replay that lasso's loop on the code: the `_seed` test shows it, the
`_refimpl` test is `xfail(strict=True)` because refimpl's `get_cached`
re-issues the chunk wherever it sits too (the model's `RENEW` design fix,
which passes `MCHotKeyRenew`, is in neither).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from audit_support import seed, writer_and_reader

__all__ = ["seed"]  # the fixture, used by name

ROUNDS = 5


@pytest.fixture(scope="module")
def ref() -> ModuleType:
    return pytest.importorskip("refimpl")


def _read(writer: Any, reader: Any, key: str, handle: tuple[int, int]) -> None:
    """The reader reads one delivery of `key` (its count reaches n_readers)."""
    address, monotonic_id = handle
    reader.get(address, monotonic_id, writer.get_signature(key), key)


def _fill(mod: ModuleType, writer: Any, reader: Any) -> int:
    """Put "hot" first (the oldest chunk), then other objects, each read, as long as
    "hot" stays (tried first on a probe store of the same size): the ring is then
    full, and the next put must reclaim "hot". Returns how many others fit."""
    _read(writer, reader, "hot", writer.put("hot", "h" * 40))
    n = 0
    while True:
        with writer_and_reader(mod) as (probe_writer, probe_reader):
            _read(probe_writer, probe_reader, "hot", probe_writer.put("hot", "h" * 40))
            for i in range(n + 1):
                _read(probe_writer, probe_reader, f"k{i}", probe_writer.put(f"k{i}", "v" * 40))
            if not probe_writer.is_cached("hot"):
                break
        _read(writer, reader, f"k{n}", writer.put(f"k{n}", "v" * 40))
        n += 1
        assert n < 64, "the ring never filled"
    assert writer.is_cached("hot")
    return n


def puts_that_succeed(mod: ModuleType) -> int:
    """ROUNDS rounds of: the writer hands "hot" out again, tries one put, and the
    reader then reads that delivery (every delivery is read: the fair schedule)."""
    succeeded = 0
    with writer_and_reader(mod) as (writer, reader):
        others = _fill(mod, writer, reader)
        assert others >= 1 and writer.is_cached("hot")
        for r in range(ROUNDS):
            hot = writer.get_cached("hot")  # the hot key, handed out before the put
            try:
                writer.put(f"new{r}", "n" * 40)
                succeeded += 1
            except MemoryError:
                pass
            _read(writer, reader, "hot", hot)
    return succeeded


def test_h6_hot_key_in_the_oldest_chunk_starves_put_seed(seed: ModuleType) -> None:
    assert puts_that_succeed(seed) == 0


def test_h6_without_the_re_issue_the_put_succeeds_seed(seed: ModuleType) -> None:
    """The control: the same full ring, no hand-out before the put: it succeeds."""
    with writer_and_reader(seed) as (writer, reader):
        _fill(seed, writer, reader)
        writer.put("new", "n" * 40)
        assert not writer.is_cached("hot")


@pytest.mark.xfail(
    strict=True, reason="FINDINGS H6: refimpl's get_cached re-issues the oldest chunk too"
)
def test_h6_a_hot_key_does_not_starve_put_refimpl(ref: ModuleType) -> None:
    assert puts_that_succeed(ref) > 0
