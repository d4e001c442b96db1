"""The object store with its readers elsewhere: readers in other processes
(spawned, or killed mid-read), and many threads of one reader, judged
through the contract: what they read, and what free_unused reclaims."""

from __future__ import annotations

import dataclasses
import os
import signal

import pytest

from shmref.contract import split_read_missing
from shmref.store import racing
from shmref.store.readers import CTX, ReaderProcess, receive_race
from shmref.suite.serde_values import read_back, serde_of, storable
from shmref.suite.stores import handle_of

# The race across processes: each round the three reader processes read one
# object PROCESS_READS times back to back, all released by one barrier
# (shmref.store.racing). A count that is not atomic across processes (a
# store whose readers lock on their own, "own" behind the process protocol,
# or C) loses increments where reads overlap. The chance of a miss, measured
# per round (python -m bench.races): docs/conformance.md, "Races".
PROCESSES, RACE_ROUNDS, RACE_READS = racing.PROCESSES, racing.PROCESS_ROUNDS, racing.PROCESS_READS


def test_readers_in_other_processes(impl_name, store_factory):
    """PROCESSES (three) spawned readers attach by handle, read every object
    and count; then all of them race on one object, RACE_ROUNDS rounds of
    RACE_READS reads, each round at once (owed one read more each than that
    by get_cached): one read short of what is owed keeps it (none counted
    twice), the last frees it (none lost)."""
    writer = store_factory(buffer_size=4096, max_object_size=512, n_readers=PROCESSES)
    serde = serde_of(writer)
    values = [
        storable(serde, ({"i": i, "blob": bytes([i]) * 100}, {"i": i, "blob": "ab"[i % 2] * 100}))
        for i in range(10)
    ]
    handles = []
    for i in range(10):
        writer.put(f"k{i}", values[i])
        handles.append(handle_of(writer, f"k{i}"))
    start = CTX.Barrier(PROCESSES)
    readers = [
        ReaderProcess(impl_name, writer.reader_handle(), start=start) for _ in range(PROCESSES)
    ]
    try:
        for reader in readers:
            for handle in handles:
                reader.send("get", *handle)
        for reader in readers:
            got = [reader.receive() for _ in handles]
            assert got == [("ok", read_back(serde, value)) for value in values]
        writer.free_unused()  # reclaims up to 2 * max_object_size bytes per call
        writer.free_unused()
        assert not any(writer.is_cached(f"k{i}") for i in range(10))  # all read: all reclaimed
        writer.put("burst", "b" * 100)
        raced = RACE_ROUNDS * RACE_READS
        for _ in range(raced):
            writer.get_cached("burst")  # one more read owed by each reader
        burst = handle_of(writer, "burst")
        for reader in readers:
            reader.send("race", RACE_ROUNDS, RACE_READS, *burst)
        assert receive_race(readers, start) == [("ok", raced)] * PROCESSES
        for reader in readers[:-1]:
            assert reader.call("get", *burst)[0] == "ok"
        writer.free_unused()
        owed = PROCESSES * (raced + 1)
        assert writer.is_cached("burst"), f"freed after {owed - 1} of {owed} reads: a double count"
        assert readers[-1].call("get", *burst)[0] == "ok"
        writer.free_unused()
        assert not writer.is_cached("burst"), f"kept after {owed} of {owed} reads: a read was lost"
    finally:
        for reader in readers:
            reader.stop()


def test_killed_reader_mid_read_leaks_nothing(impl_name, store_factory):
    """A reader killed while it holds a read open: no segment is leaked, and
    the object stays pinned (its count never reached n_readers)."""
    writer = store_factory(n_readers=1)
    lacking = split_read_missing(writer.storage)
    if lacking:
        pytest.skip(f"not run: missing {lacking}")
    writer.put("k", "v")
    reader = ReaderProcess(impl_name, writer.reader_handle())
    try:
        assert reader.call("begin", *handle_of(writer, "k"))[0] == "ok"
        assert reader.process.pid is not None
        os.kill(reader.process.pid, signal.SIGKILL)
        reader.process.join(10)
    finally:
        reader.stop()
    writer.free_unused()
    assert writer.is_cached("k")


class ChainingSerde:
    """Fails to read with a chained error, whose traceback keeps the frame
    (and the view of the segment) that deserialize was given."""

    def serialize(self, value):
        return b"x", 1, b"", 0

    def deserialize(self, data):
        try:
            raise KeyError("inner")
        except KeyError as exc:
            raise ValueError("outer") from exc


def test_failed_read_leaves_the_segment_closable(impl, store_factory, reader_lock, is_refimpl):
    """The view given to a failed deserialize is released, even if its frame
    lives on in a chained error: the reader can close (FINDINGS #9a: in the
    seed, close then raises BufferError)."""
    if not is_refimpl:
        pytest.skip("the seed keeps the view (FINDINGS #9a)")
    writer = store_factory()
    writer.put("k", "v")
    handle = dataclasses.replace(
        writer.handle(), serde_class=ChainingSerde, reader_lock=reader_lock
    )
    reader = impl.SingleWriterShmObjectStorage.create_from_handle(handle)
    with pytest.raises(ValueError, match="outer") as failure:
        reader.get(*handle_of(writer, "k"))
    assert isinstance(failure.value.__cause__, KeyError)  # the chained error is still alive
    reader.close()  # must not raise BufferError


# 16 threads, 16 rounds: each round the 16 threads read at once, released by
# a barrier and interleaved line by line (shmref.store.racing). The chance
# of a miss, measured per round: docs/conformance.md, "Races".
RACING_THREADS, ROUNDS = racing.THREADS, racing.THREAD_ROUNDS


def test_concurrent_reader_threads_count_exactly(store_factory, attach):
    """The reader lock makes increments from many threads exact, as
    free_unused shows it: with 257 readers owed, 256 reads by 16 threads
    made to collide (shmref.store.racing) keep the object (none counted
    twice), the 257th frees it (none lost)."""
    owed = RACING_THREADS * ROUNDS
    writer = store_factory(n_readers=owed + 1)
    writer.put("k", list(range(50)))
    handle = handle_of(writer, "k")
    reader = attach(writer)

    racing.race(RACING_THREADS, ROUNDS, lambda: reader.get(*handle))
    writer.free_unused()
    assert writer.is_cached("k"), f"freed after {owed} of {owed + 1} reads: a read counted twice"
    reader.get(*handle)
    writer.free_unused()
    assert not writer.is_cached("k"), f"kept after {owed + 1} of {owed + 1} reads: a read was lost"
