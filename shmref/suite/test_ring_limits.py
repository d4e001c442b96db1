"""The ring's limits as the seed keeps them (seed-compatible): the id bound
that decides where ids wrap, the size a reader may attach with, how much
free_buf frees, and a dropped writer's segment. Each
kills a mutant of the seed's own code that the rest of the level let
through (docs/seed-mutants.md)."""

from __future__ import annotations

import sys

import pytest


def test_the_id_bound_is_four_signed_bytes(ring_factory):
    """Ids are 4-byte signed ints: the largest is 2**31 - 1, so the id bound
    (ID_MAX, exclusive, where the ring shows it: an optional capability) is
    2**31 and the ids wrap there. (Reaching the wrap through the API takes
    2**31 allocations; the bound is what decides it.)"""
    ring = ring_factory(100)
    if not hasattr(ring, "ID_MAX"):
        pytest.skip("not run: missing ring.ID_MAX")
    assert ring.ID_MAX == 2**31


def test_a_reader_cannot_attach_beyond_the_segment(impl, ring_factory):
    """A reader whose size is larger than the writer's segment, by even one
    byte, is refused (the seed by an assertion; a ValueError is the hardened
    level's): its reads near the end would run past the segment."""
    if sys.flags.optimize:
        pytest.skip("python -O: the seed's own refusal is an assertion")
    size, name = ring_factory(100).handle()
    with pytest.raises(Exception):  # noqa: B017 - any refusal
        impl.SingleWriterShmRingBuffer(size + 1, name=name)


def test_free_buf_stops_once_it_freed_nbytes(ring_factory):
    """free_buf frees oldest-first while it has freed fewer than `nbytes`:
    asked for exactly one chunk's bytes (its size with the 8-byte header),
    it frees that chunk and no more."""
    ring = ring_factory(256)
    for _ in range(3):
        ring.allocate_buf(8)  # 16-byte chunks at 0, 16, 32
    assert list(ring.free_buf(lambda _id, _buf: True, 16)) == [0]
    assert list(ring.free_buf(lambda _id, _buf: True, 17)) == [1, 2]


def test_a_dropped_writer_ring_removes_its_segment(impl):
    """A writer ring that is dropped without close() still removes its
    segment when it is collected (the seed's __del__ closes it): no leak."""
    import gc
    import os

    ring = impl.SingleWriterShmRingBuffer(64, create=True)
    name = str(ring.handle()[1]).lstrip("/")
    del ring
    gc.collect()
    if os.path.exists(f"/dev/shm/{name}"):
        os.unlink(f"/dev/shm/{name}")  # the leak guard is not the point here
        pytest.fail(f"segment {name} left after its writer ring was collected")


def test_a_size_of_one_is_allocated(ring_factory):
    """The smallest chunk: one byte of data after the 8-byte header."""
    ring = ring_factory(100)
    assert ring.allocate_buf(1) == (0, 0)
    assert ring.allocate_buf(1) == (9, 1)
