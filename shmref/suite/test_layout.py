"""The implementation under test side by side with the seed's own code.

- Seed results (differential): one Hypothesis-chosen sequence of calls runs
  on the seed, on refimpl and on the implementation, each on its own
  segment and all three with the implementation's own serde class (what a
  serde stores or refuses is the serde's business, not the store's); every
  call must give the seed's value, or raise the seed's kind of exception
  (ValueError, MemoryError, KeyError; anything else by class name). Where
  refimpl differs from the seed (by construction only where FINDINGS.md
  documents a fix), refimpl's result is accepted too. Handles are compared
  only by what they do: the numbers in them are layout.
- Seed layout (the level seed-layout): the same sequence must give the same
  addresses and ids, and byte-for-byte the same segment (everything after
  the random 32-byte secret, read from the segment itself); and a writer of
  one with readers of the other on ONE segment must work: handles and
  signatures verify across, reads count where the writer looks, stale and
  forged handles are refused.
- Hardened: the same sequence gives refimpl's result on every call.

The writer is built as vLLM builds it (no reader_lock); readers get the lock.
"""

from __future__ import annotations

import multiprocessing as mp
from contextlib import ExitStack
from types import ModuleType

import pytest

import refimpl
from shmref.seed.impl import load_impl
from shmref.store.readers import close_despite_cycles
from shmref.suite.serde_values import read_back, serde_of, stores
from shmref.suite.sidebyside import BUFFER, MAX_OBJECT, machine, reader_handle


def test_same_results_as_seed(impl):
    """Seed-compatible: the seed's values and exception kinds, call by call
    (refimpl's where it fixes a documented finding)."""
    machine(impl, layout=False).TestCase().runTest()


def test_same_segment_bytes_as_seed(impl):
    """Seed-layout: the seed's addresses, ids and segment bytes, call by call."""
    machine(impl, layout=True).TestCase().runTest()


def test_same_results_as_refimpl(impl):
    """Hardened: refimpl's values and exception kinds on every call, bad input included."""
    machine(impl, layout=False, hardened=True).TestCase().runTest()


# -- one segment, writer of one implementation, readers of the other ------------------


def share_one_segment(writer_impl: ModuleType, reader_impls: list[ModuleType]) -> None:
    """Objects put by `writer_impl` are read by readers of `reader_impls`,
    which count where the writer looks, and refuse stale and forged handles."""
    lock = mp.get_context("spawn").Lock()
    with ExitStack() as resources:
        ring = writer_impl.SingleWriterShmRingBuffer(BUFFER, create=True)
        resources.callback(close_despite_cycles, ring.close)
        writer = writer_impl.SingleWriterShmObjectStorage(MAX_OBJECT, len(reader_impls), ring)
        readers = []
        for impl in reader_impls:
            reader = impl.SingleWriterShmObjectStorage.create_from_handle(
                reader_handle(writer.handle(), lock)
            )
            resources.callback(close_despite_cycles, reader.close)
            readers.append(reader)
        serde = serde_of(writer)
        every = {
            "int": 7,
            "str": "héllo" * 9,
            "bytes": bytes(range(200)),
            "list": [1, [2, 3], None],
            "dict": {"a": 1, "b": [True, 1.5]},
        }
        values = {k: v for k, v in every.items() if stores(serde, v)}  # the serde's business
        handles = {}
        for key, value in values.items():
            address, monotonic_id = writer.put(key, value)
            handles[key] = (address, monotonic_id, writer.get_signature(key), key)
        for key, value in values.items():
            for reader in readers:
                assert reader.get(*handles[key]) == read_back(serde, value), f"{key}: another value"
        address, monotonic_id, signature, key = handles["int"]
        for reader in readers:
            with pytest.raises(ValueError):
                reader.get(address, monotonic_id, [(signature[0] + 1) % 256, *signature[1:]], key)
            with pytest.raises(ValueError):
                reader.get(address, monotonic_id, signature, "str")
        # every reader read every object once: all reclaimable by the writer
        writer.free_unused()
        assert not any(writer.is_cached(k) for k in values), (
            "the writer did not see the readers' counts (counted elsewhere?)"
        )
        # reuse the space: the old handle at that address is stale, the new one reads
        fresh = writer.put("fresh", "x" * 150)
        assert fresh[0] == handles["int"][0], "the emptied ring did not start again at 0"
        fresh_handle = (*fresh, writer.get_signature("fresh"), "fresh")
        for reader in readers:
            with pytest.raises(ValueError):
                reader.get(*handles["int"])
            assert reader.get(*fresh_handle) == "x" * 150


def test_seed_writer_impl_readers(impl):
    share_one_segment(load_impl("seed"), [impl, impl])


def test_impl_writer_seed_readers(impl):
    seed = load_impl("seed")
    share_one_segment(impl, [seed, seed])


def test_mixed_readers_on_one_segment(impl):
    seed = load_impl("seed")
    share_one_segment(seed, [impl, refimpl])
    share_one_segment(impl, [seed, impl])
