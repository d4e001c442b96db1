"""The ring's limits as the seed keeps them (seed-compatible): the id bound
that decides where ids wrap, and the size a reader may attach with. Each
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
