"""Ring steps composed from `refimpl.allocator` exactly as the ring composes them.

Each function is one step of `SingleWriterShmRingBuffer` (`refimpl/ring.py`)
reduced to its arithmetic. Its PEP 316 preconditions state the ring invariant
as the input state and its postconditions state that the step preserves it,
so that CrossHair checks the invariant one step at a time. Sequences of steps
are Hypothesis's and TLC's job (see `proofs/README.md`).

The ring state, in the model used here:

* `capacity` is `data_buffer_size`; `start`, `end` are `data_buffer_start`,
  `data_buffer_end`.
* `chunks` lists the live chunks, oldest first, as `(address, size)` in the
  ring's *current frame* (the frame `start` and `end` are in). The ring's
  `metadata` keeps each address as it was at allocation; after a lap
  correction that address is one lap (`capacity`) ahead of the frame address
  (never more: every address ever issued is below `2 * capacity`), which the
  `lag` arguments model.
* `ring_ok` is the invariant: chunks tile `[start, end)` in FIFO order with
  gaps only at lap boundaries, each lies inside the buffer physically,
  `0 <= start <= end`, `end - start <= capacity`; an empty ring is at `(0, 0)`.
  Between two public calls also `start < capacity` (`settled`); inside
  `free_buf`'s loop `start` may be one lap ahead, but `end < 2 * capacity`.

Two kinds of step:

* `*_any` steps talk about the live chunks through one arbitrary live chunk
  (or the oldest two), so they hold for any number of chunks; CrossHair can
  confirm them over all paths.
* the list steps take the whole `chunks` list; CrossHair can only confirm
  them for short lists, so their first precondition bounds `len(chunks)`
  (see `MAX_CHUNKS` in the README).

Ids: live ids are `id_start, id_start + 1, ...` modulo `id_max`; the ring
keeps fewer than `id_max - 1` of them live (it refuses to allocate otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence

from refimpl.allocator import freed_ids, lap_correct, next_id, place, reclaim

Chunk = tuple[int, int]


# -- predicates used in the contracts ----------------------------------------


def inside(address: int, size: int, capacity: int) -> bool:
    """The chunk `[address, address + size)` does not straddle the buffer's physical end."""
    return size > 0 and address % capacity + size <= capacity


def disjoint(a: int, s: int, b: int, t: int, capacity: int) -> bool:
    """Two physically contained chunks share no physical byte."""
    pa = a % capacity
    pb = b % capacity
    return pa + s <= pb or pb + t <= pa


def clear_of(chunks: Sequence[Chunk], address: int, size: int, capacity: int) -> bool:
    """The chunk `[address, address + size)` overlaps none of `chunks` physically."""
    return all(disjoint(address, size, a, s, capacity) for a, s in chunks)


def follows(prev_end: int, address: int, capacity: int) -> bool:
    """A chunk at `address` may come right after one ending at `prev_end`: adjacent,
    or at the start of the next lap (the rest of the lap is skipped)."""
    return address == prev_end or address == (prev_end // capacity + 1) * capacity


def ring_ok(start: int, end: int, capacity: int, chunks: Sequence[Chunk]) -> bool:
    """The ring invariant (see the module docstring)."""
    if capacity <= 0:
        return False
    if not chunks:
        return start == 0 and end == 0
    if start < 0 or chunks[0][0] != start:
        return False
    prev_end = start
    for address, size in chunks:
        if not inside(address, size, capacity) or not follows(prev_end, address, capacity):
            return False
        prev_end = address + size
    return end == prev_end and end - start <= capacity


def popped_ids(id_before: int, count: int, id_max: int) -> list[int]:
    """The ids `free_buf` pops when it reclaims `count` chunks, one `next_id` at a time."""
    ids = []
    current = id_before
    for _ in range(count):
        ids.append(current)
        current = next_id(current, id_max)
    return ids


# -- allocate_buf --------------------------------------------------------------


def allocate_any(
    start: int, end: int, capacity: int, size: int, live_address: int, live_size: int
) -> int | None:
    """allocate_buf's placement against one arbitrary live chunk, any number of chunks.

    pre: capacity > 0
    pre: 0 <= start <= end < 2 * capacity
    pre: start < capacity
    pre: end - start <= capacity
    pre: size > 0
    pre: start <= live_address and live_address + live_size <= end
    pre: inside(live_address, live_size, capacity)
    post: __return__ is None or disjoint(__return__, size, live_address, live_size, capacity)
    post: __return__ is None or __return__ >= live_address + live_size
    """
    return place(end, start, size, capacity)


def allocate_bounds(start: int, end: int, capacity: int, size: int) -> tuple[int, int] | None:
    """allocate_buf on the ring's span: `(address, new end)`, or None (MemoryError).

    pre: capacity > 0
    pre: 0 <= start <= end
    pre: start < capacity
    pre: end - start <= capacity
    pre: size > 0
    post: __return__ is None or inside(__return__[0], size, capacity)
    post: __return__ is None or start <= end <= __return__[0] < __return__[1]
    post: __return__ is None or __return__[1] - start <= capacity
    post: __return__ is None or __return__[1] < 2 * capacity
    post: __return__ is None or follows(end, __return__[0], capacity)
    """
    address = place(end, start, size, capacity)
    if address is None:
        return None
    return address, address + size


def allocate_step(
    start: int, end: int, capacity: int, chunks: list[Chunk], size: int
) -> Chunk | None:
    """allocate_buf on the whole state: the new chunk `(address, size)`, or None
    (MemoryError); the ring's new end is `address + size`.

    pre: len(chunks) <= 3
    pre: ring_ok(start, end, capacity, chunks)
    pre: start < capacity
    pre: size > 0
    post: __return__ is None or inside(*__return__, capacity)
    post: __return__ is None or clear_of(chunks, *__return__, capacity)
    post: __return__ is None or ring_ok(start, sum(__return__), capacity, [*chunks, __return__])
    post: __return__ is None or sum(__return__) < 2 * capacity
    post: __return__ is not None or len(chunks) > 0 or size > capacity
    """
    address = place(end, start, size, capacity)
    if address is None:
        return None
    return address, size


def allocate_ids(id_start: int, id_end: int, live: int, id_max: int) -> tuple[int, int]:
    """allocate_buf's ids: `(id issued, new id_end)`.

    The issued id takes FIFO position `live` after `id_start`; positions below
    `id_max` are distinct, so it collides with no live id.

    pre: 0 <= id_start < id_max
    pre: 0 <= live < id_max - 1
    pre: id_end == (id_start + live) % id_max
    post: (__return__[0] - id_start) % id_max == live
    post: 0 <= __return__[1] < id_max
    post: __return__[1] == (id_start + live + 1) % id_max
    """
    return id_end, next_id(id_end, id_max)


# -- free_buf ------------------------------------------------------------------


def reclaim_any(
    start: int, end: int, capacity: int, oldest_size: int, next_address: int, lag: bool
) -> tuple[int, int]:
    """free_buf reclaiming the oldest chunk when another one follows, any number of chunks.

    `next_address` is the following chunk's frame address; the ring passes
    its metadata address, one lap ahead when `lag`.

    pre: capacity > 0
    pre: 0 <= start < next_address < end < 2 * capacity
    pre: end - start <= capacity
    pre: inside(start, oldest_size, capacity)
    pre: follows(start + oldest_size, next_address, capacity)
    post: __return__ == (next_address, end)
    post: 0 <= __return__[0] <= __return__[1] < 2 * capacity
    post: __return__[1] - __return__[0] < end - start
    """
    metadata_address = next_address + capacity if lag else next_address
    return reclaim(start, end, metadata_address, capacity)


def reclaim_step(
    start: int, end: int, capacity: int, chunks: list[Chunk], lag: bool
) -> tuple[int, int]:
    """free_buf reclaiming `chunks[0]` (one loop iteration): the new `(start, end)`.

    pre: 1 <= len(chunks) <= 3
    pre: ring_ok(start, end, capacity, chunks)
    pre: end < 2 * capacity
    post: ring_ok(__return__[0], __return__[1], capacity, chunks[1:])
    post: __return__[1] < 2 * capacity
    post: __return__[1] - __return__[0] < end - start
    """
    if len(chunks) > 1:
        following = chunks[1][0] + capacity if lag else chunks[1][0]
        return reclaim(start, end, following, capacity)
    return reclaim(start, end, None, capacity)


def lap_step(
    start: int, end: int, capacity: int, chunks: list[Chunk]
) -> tuple[int, int, list[Chunk]]:
    """free_buf's lap correction after the loop; also shifts the model's frame addresses.

    pre: len(chunks) <= 3
    pre: ring_ok(start, end, capacity, chunks)
    pre: end < 2 * capacity
    post: __return__[0] < capacity
    post: ring_ok(__return__[0], __return__[1], capacity, __return__[2])
    post: all(a % capacity == b % capacity for (a, _), (b, _) in zip(chunks, __return__[2]))
    """
    new_start, new_end = lap_correct(start, end, capacity)
    shift = start - new_start
    return new_start, new_end, [(a - shift, s) for a, s in chunks]


def freed_list(id_before: int, id_after: int, id_max: int) -> list[int]:
    """`freed_ids` as a list: the ids from `id_before` up to `id_after`, wrapping at `id_max`.

    pre: 0 <= id_before < id_max
    pre: 0 <= id_after < id_max
    post: __return__ == [(id_before + i) % id_max for i in range((id_after - id_before) % id_max)]
    post: len(__return__) < id_max
    """
    return list(freed_ids(id_before, id_after, id_max))


def free_ids(id_before: int, count: int, live: int, id_max: int) -> tuple[list[int], int]:
    """free_buf's ids after reclaiming `count` chunks: `(ids returned, new id_start)`.

    pre: 0 <= count <= live < id_max
    pre: count <= 4
    pre: 0 <= id_before < id_max
    post: __return__[0] == popped_ids(id_before, count, id_max)
    post: 0 <= __return__[1] < id_max
    post: __return__[1] == (id_before + count) % id_max
    """
    id_after = id_before
    for _ in range(count):
        id_after = next_id(id_after, id_max)
    return list(freed_ids(id_before, id_after, id_max)), id_after
