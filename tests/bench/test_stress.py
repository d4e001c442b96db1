"""Multi-process stress (bench/stress.py): the writer keeps putting and
evicting while four reader processes verify checksums, each in its own order,
so that a reclaim racing a read shows. Under the protocol's assumption A1
every read is intact: 0 refused, 0 torn, 0 foreign, 0 other (the session's
leak guard adds 0 leaked segments). The ring is small (STRESS_RING) so that
the writer wraps while batches are still being read; a store that reclaims
after one reader's read (mutant free_rule_without_n_readers) is caught, one
of its readers made slow so that the race is certain on any machine.
`make bench` runs 10**5 puts beside the seed; here PUTS."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import sys
import threading
from typing import Any

import pytest

import refimpl
from bench import stress
from shmref.seed.mutants import build_mutant
from shmref.store.readers import checksummed

PUTS = 2_000
# A ring about two batches large: the writer wraps while readers still read
# the batches in flight, so an early reclaim overwrites an unread object.
STRESS_RING = 1 << 19


def stress_run(impl_name: str) -> stress.StressResult:
    return stress.run(impl_name, PUTS, ring_bytes=STRESS_RING)


def test_stress_writer_evicts_while_four_readers_verify(impl_name, capsys):
    result = stress_run(impl_name)
    with capsys.disabled():
        print(f"\n{result.line()}")
    assert (result.torn, result.foreign, result.other) == (0, 0, 0), result.examples
    # under A1 no read may be refused: every reader reads every object, once
    assert result.refused == 0, result.examples
    assert result.reads == result.intact == PUTS * stress.READERS
    # the writer put and evicted while reads were in flight, and outran the readers
    assert result.evicted > PUTS // 2 and result.waits > 0


ONE_SLOW_READER = """
import os
import time

from {store} import *  # noqa: F403
from {store} import SingleWriterShmObjectStorage as Broken


class SingleWriterShmObjectStorage(Broken):
    \"\"\"The store under test; the first reader to attach reads 1 ms slower per
    object, so it lags behind the others on any machine.\"\"\"

    slow = False

    @staticmethod
    def create_from_handle(handle):
        reader = Broken.create_from_handle(handle)
        reader.__class__ = SingleWriterShmObjectStorage
        try:
            os.close(os.open({marker!r}, os.O_CREAT | os.O_EXCL))
            reader.slow = True
        except FileExistsError:
            pass
        return reader

    def get(self, *args, **kwargs):
        if self.slow:
            time.sleep(0.001)
        return super().get(*args, **kwargs)
"""


@pytest.mark.parametrize("broken", [True, False], ids=["reclaims-early", "refimpl"])
def test_the_stress_catches_a_store_that_reclaims_before_every_reader_read(
    tmp_path, monkeypatch, broken
):
    """The stress test must be able to fail: refimpl reclaiming an object
    after one reader's read (mutant free_rule_without_n_readers) overwrites
    objects that a slower reader has yet to read. One reader is made slow, so
    that it lags behind the others whatever the machine; refimpl with the
    same slow reader waits for it and loses no read."""
    store = build_mutant("free_rule_without_n_readers").__name__ if broken else "refimpl"
    module = tmp_path / f"one_slow_reader_of_{store}.py"
    module.write_text(ONE_SLOW_READER.format(store=store, marker=str(tmp_path / "slow")))
    monkeypatch.syspath_prepend(str(tmp_path))  # spawned readers inherit sys.path
    result = stress_run(module.stem)
    assert (tmp_path / "slow").is_file()  # one reader was slow
    if broken:
        assert result.refused + result.torn + result.foreign > 0, result.line()
        assert result.intact < PUTS * stress.READERS
    else:
        assert result.ok and result.intact == PUTS * stress.READERS, result.line()


def test_the_stress_counts_torn_foreign_and_refused_reads():
    """The stress test's classification must be able to fail."""
    result = stress.StressResult("x", 0, 4)
    stress.classify(
        result,
        [
            "k1: torn value",
            "k2: foreign value of b'k3'",
            "k4: KeyError: 'x'",
            "k5: ValueError: Data for address:id '0:1' has been modified or is invalid.",
            "k6: ValueError: no valid chunk at address 8: header size 0 is outside [8, 92]",
            "k7: ValueError: corrupt object in shared memory: x",
        ],
    )
    assert (result.torn, result.foreign, result.other, result.refused) == (1, 1, 2, 2)
    assert not result.ok


def test_the_checksum_catches_torn_and_foreign_values(impl):
    """The stress test's verifier must be able to fail."""
    from shmref.store.readers import verify_many

    ring = impl.SingleWriterShmRingBuffer(4096, create=True)
    writer = impl.SingleWriterShmObjectStorage(1024, 1, ring, reader_lock=mp.Lock())
    try:
        a = writer.put("a", checksummed("a", b"x" * 100))
        b = writer.put("b", checksummed("b", b"y" * 100))
        reader = impl.SingleWriterShmObjectStorage.create_from_handle(writer.handle())
        try:
            handle_a = (*a, writer.get_signature("a"), "a")
            assert verify_many(reader, [handle_a]) == (1, [])
            offset = ring.DATA_OFFSET + a[0] + ring.MD_SIZE + 60
            ring.shared_memory.buf[offset] ^= 0xFF  # one flipped byte in a's payload
            assert "torn" in verify_many(reader, [handle_a])[1][0]
            _address, _id = b
            with ring.access_buf(a[0]) as (view_a, _), ring.access_buf(b[0]) as (view_b, _):
                view_a[:] = view_b  # a's chunk now holds b's object
            assert "foreign" in verify_many(reader, [handle_a])[1][0]
        finally:
            reader.close()
    finally:
        writer.close()


def test_with_a1_broken_a_late_increment_tears_the_next_object(is_refimpl):
    """Why the stress keeps A1. FINDINGS H1's residual, step by step: with a
    read repeated, an object is reclaimable while a read of it is between its
    re-check and its increment; the writer reclaims it and puts the next
    object over it, and the late 4-byte increment lands inside that object's
    payload, which every reader then gets torn."""
    if not is_refimpl:
        pytest.skip("refimpl's read steps")
    ring = refimpl.SingleWriterShmRingBuffer(4096, create=True)
    # The writer as vLLM's sender builds it, without the readers' lock: a writer
    # holding the lock would wait for the reader's increment instead (spec SPLIT_END).
    writer = refimpl.SingleWriterShmObjectStorage(1024, 2, ring)
    reader = refimpl.SingleWriterShmObjectStorage.create_from_handle(
        dataclasses.replace(writer.handle(), reader_lock=threading.Lock())
    )
    try:
        handles = {}
        for key in ("k0", "k1"):
            handles[key] = (*writer.put(key, key.encode() * 40), writer.get_signature(key), key)
        for key in ("k0", "k0", "k1", "k1"):  # as both readers: both reclaimable
            reader.get(*handles[key])
        late = reader.get_begin(*handles["k1"])  # a repeated read of k1 (A1 broken)
        reader.get_copy(late)
        put: list[tuple[int, int]] = []

        def writer_steps_in(frame: Any, event: str, arg: Any) -> None:
            if frame.f_code.co_name == "increment_reader_flag" and not put:
                writer.free_unused()  # k0 and k1 are reclaimable: the ring empties
                put.append(writer.put("k2", b"c" * 300))  # from address 0, over k1
            return None

        sys.settrace(writer_steps_in)
        try:
            assert reader.get_end(late) == b"k1" * 40  # the re-check passed before the put
        finally:
            sys.settrace(None)
        assert put, "refimpl no longer counts a read in increment_reader_flag: adapt the hook"
        assert writer.get(*put[0]) != b"c" * 300  # k2 is torn by k1's late increment
    finally:
        reader.close()
        writer.close()
