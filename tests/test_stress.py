"""Bounded stress: 4 reader processes, 10**5 puts each read by all four,
checksummed payloads. Zero torn or foreign reads, zero leaked segments."""

from __future__ import annotations

import multiprocessing as mp
import os
import random

from shmref.readers import ReaderProcess, checksummed

PUTS = int(os.environ.get("SHMREF_STRESS_PUTS", 100_000))
READERS = 4
BATCH = 1000


def test_stress_four_reader_processes(impl, impl_name):
    rng = random.Random(20261202)
    ring = impl.SingleWriterShmRingBuffer(4 << 20, create=True)
    writer = impl.SingleWriterShmObjectStorage(
        64 << 10, READERS, ring, reader_lock=mp.get_context("spawn").Lock())
    readers = [ReaderProcess(impl_name, writer.handle(), timeout=300) for _ in range(READERS)]
    good, problems, reclaimed_before = 0, [], 0
    try:
        for start in range(0, PUTS, BATCH):
            handles = []
            for n in range(start, min(start + BATCH, PUTS)):
                key = f"item-{n}"
                payload = rng.randbytes(rng.choice((16, 200, 1500, 9000)))
                address, monotonic_id = writer.put(key, checksummed(key, payload))
                handles.append((address, monotonic_id, writer.get_signature(key), key))
            for reader in readers:
                reader.send("verify", handles)
            for reader in readers:
                status, (n_good, bad) = reader.receive()
                assert status == "ok"
                good += n_good
                problems += bad
            reclaimed_before = max(reclaimed_before, ring.monotonic_id_start)
    finally:
        for reader in readers:
            reader.stop()
        writer.close()
    assert problems == [], problems[:10]
    assert good == PUTS * READERS
    assert reclaimed_before > 0  # the ring wrapped and reclaimed many times


def test_the_checksum_catches_torn_and_foreign_values(impl):
    """The stress test's verifier must be able to fail."""
    from shmref.readers import verify_many

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
