"""Differential check: the seed's ring arithmetic against `refimpl.allocator`.

One side is the seed's own `SingleWriterShmRingBuffer` on an in-memory
segment (`proofs.seedring`), the other `ref_allocate` / `ref_free` /
`ref_clear`, the `refimpl.allocator` functions composed the way
`refimpl/ring.py` does, on a plain `RefState` (`proofs.refring`). Both sides
are driven

* by `crosshair diffbehavior` on one step from a valid state given as
  `(capacity, id_max, start, id_start, sizes, wraps, lagged)` (`*_diff`
  functions below; both share the same leading assert preconditions and map
  every exception to its class name), and
* by Hypothesis over random sequences of `allocate_buf` / mark free /
  `free_buf` / `clear` (`proofs.lockstep.hypothesis_differential`), which also checks the
  `proofs.steps.ring_ok` invariant after every step.

Domain: fewer than `id_max - 1` chunks live, the ring's precondition for ids
(the seed does not enforce it; `refimpl` refuses to allocate beyond it).
"""

from __future__ import annotations

from typing import Any

from proofs.refring import (
    MD_SIZE,
    PlaceFn,
    RefState,
    outcome,
    ref_allocate,
    ref_free,
    ref_snapshot,
)
from proofs.seedring import seed_ring, seed_snapshot
from proofs.steps import ring_ok
from refimpl.allocator import place


def _layout(
    capacity: int, id_max: int, start: int, id_start: int, sizes: list[int], wraps: list[bool]
) -> list[tuple[int, int]]:
    """Frame addresses of live chunks of `sizes` from `start`; `wraps[i]` puts
    chunk i at the next lap boundary. Also the shared preconditions."""
    assert 0 < capacity <= 48
    assert len(sizes) <= 3 and len(wraps) == len(sizes)
    assert id_max <= 2**31  # ids are 4-byte signed in the chunk header
    assert 0 <= id_start < id_max and len(sizes) < id_max - 1
    chunks: list[tuple[int, int]] = []
    address = start
    for size, wrap in zip(sizes, wraps, strict=True):
        if wrap and chunks:
            address = (address // capacity + 1) * capacity
        chunks.append((address, size))
        address += size
    end = chunks[-1][0] + chunks[-1][1] if chunks else 0
    assert ring_ok(start, end, capacity, chunks)
    assert start < capacity
    assert all(size > MD_SIZE for size in sizes)
    return chunks


def _metadata_addresses(chunks: list[tuple[int, int]], lagged: int, capacity: int) -> list[int]:
    """Metadata addresses: the oldest `lagged` chunks were allocated one lap
    ahead of the current frame (a lap correction has happened since)."""
    assert 0 <= lagged <= len(chunks)
    assert all(address < capacity for address, _ in chunks[:lagged])
    return [a + capacity if i < lagged else a for i, (a, _) in enumerate(chunks)]


def _seed_at(
    capacity: int, id_max: int, id_start: int, chunks: list[tuple[int, int]], addresses: list[int]
) -> Any:
    ring = seed_ring(capacity, id_max)
    buf = ring.shared_memory.buf
    for i, ((_, size), address) in enumerate(zip(chunks, addresses, strict=True)):
        monotonic_id = (id_start + i) % id_max
        offset = ring.DATA_OFFSET + address % capacity
        buf[offset : offset + 4] = ring.int2byte(monotonic_id)
        buf[offset + 4 : offset + 8] = ring.int2byte(size)
        ring.metadata[monotonic_id] = address
    ring.monotonic_id_start = id_start
    ring.monotonic_id_end = (id_start + len(chunks)) % id_max
    ring.data_buffer_start = chunks[0][0] if chunks else 0
    ring.data_buffer_end = chunks[-1][0] + chunks[-1][1] if chunks else 0
    return ring


def _ref_at(
    capacity: int, id_max: int, id_start: int, chunks: list[tuple[int, int]], addresses: list[int]
) -> RefState:
    state = RefState(capacity, id_max, id_start=id_start)
    for i, ((_, size), address) in enumerate(zip(chunks, addresses, strict=True)):
        monotonic_id = (id_start + i) % id_max
        state.metadata[monotonic_id] = address
        state.sizes[monotonic_id] = size
    state.id_end = (id_start + len(chunks)) % id_max
    state.start = chunks[0][0] if chunks else 0
    state.end = chunks[-1][0] + chunks[-1][1] if chunks else 0
    return state


def seed_allocate_diff(
    capacity: int,
    id_max: int,
    start: int,
    id_start: int,
    sizes: list[int],
    wraps: list[bool],
    lagged: int,
    size: int,
) -> object:
    """The seed's `allocate_buf(size)` from the given state: (outcome, state after)."""
    chunks = _layout(capacity, id_max, start, id_start, sizes, wraps)
    addresses = _metadata_addresses(chunks, lagged, capacity)
    assert 0 < size <= capacity
    ring = _seed_at(capacity, id_max, id_start, chunks, addresses)
    return outcome(lambda: tuple(ring.allocate_buf(size))), seed_snapshot(ring)


def ref_allocate_diff(
    capacity: int,
    id_max: int,
    start: int,
    id_start: int,
    sizes: list[int],
    wraps: list[bool],
    lagged: int,
    size: int,
) -> object:
    """`ref_allocate(size)` from the given state: (outcome, state after)."""
    return ref_allocate_with(place, capacity, id_max, start, id_start, sizes, wraps, lagged, size)


def ref_allocate_with(
    place_fn: PlaceFn,
    capacity: int,
    id_max: int,
    start: int,
    id_start: int,
    sizes: list[int],
    wraps: list[bool],
    lagged: int,
    size: int,
) -> object:
    chunks = _layout(capacity, id_max, start, id_start, sizes, wraps)
    addresses = _metadata_addresses(chunks, lagged, capacity)
    assert 0 < size <= capacity
    state = _ref_at(capacity, id_max, id_start, chunks, addresses)
    return outcome(lambda: ref_allocate(state, size, place_fn)), ref_snapshot(state)


def seed_free_diff(
    capacity: int,
    id_max: int,
    start: int,
    id_start: int,
    sizes: list[int],
    wraps: list[bool],
    lagged: int,
    n_free: int,
    nbytes: int,
) -> object:
    """The seed's `free_buf` from the given state, the oldest `n_free` chunks marked free."""
    chunks = _layout(capacity, id_max, start, id_start, sizes, wraps)
    addresses = _metadata_addresses(chunks, lagged, capacity)
    assert 0 <= n_free <= len(chunks) and nbytes >= 0
    ring = _seed_at(capacity, id_max, id_start, chunks, addresses)
    marked = {(id_start + i) % id_max for i in range(n_free)}
    result = outcome(lambda: list(ring.free_buf(lambda i, _buf: i in marked, nbytes)))
    return result, seed_snapshot(ring)


def ref_free_diff(
    capacity: int,
    id_max: int,
    start: int,
    id_start: int,
    sizes: list[int],
    wraps: list[bool],
    lagged: int,
    n_free: int,
    nbytes: int,
) -> object:
    """`ref_free` from the given state, the oldest `n_free` chunks marked free."""
    chunks = _layout(capacity, id_max, start, id_start, sizes, wraps)
    addresses = _metadata_addresses(chunks, lagged, capacity)
    assert 0 <= n_free <= len(chunks) and nbytes >= 0
    state = _ref_at(capacity, id_max, id_start, chunks, addresses)
    marked = {(id_start + i) % id_max for i in range(n_free)}
    result = outcome(lambda: ref_free(state, lambda i: i in marked, nbytes))
    return result, ref_snapshot(state)
