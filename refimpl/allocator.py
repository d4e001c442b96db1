"""The ring's allocator arithmetic as pure functions.

`SingleWriterShmRingBuffer` calls these and nothing else to decide where a
chunk goes and how far reclamation moves the ring, so CrossHair can check the
arithmetic symbolically (see `proofs/`) without any shared memory.

Addresses are *virtual*: they grow by one lap (`capacity`) every time the
writer wraps, and `address % capacity` is the physical offset. `start` is the
address of the oldest live chunk, `end` the address just past the newest;
both are reset to 0 when the ring empties.
"""

from collections.abc import Iterable
from itertools import chain


def place(end: int, start: int, size: int, capacity: int) -> int | None:
    """Address for a new chunk of `size` bytes (header included), or None.

    A chunk never straddles the physical end of the buffer: when the rest of
    the current lap is too short, the chunk starts the next lap. It fits when
    the ring's occupied span, measured from `start`, stays within `capacity`.
    """
    address = end
    if end % capacity + size > capacity:
        address = (end // capacity + 1) * capacity
    if address + size - start > capacity:
        return None
    return address


def next_id(monotonic_id: int, id_max: int) -> int:
    """The id after `monotonic_id`; ids wrap to 0 at `id_max` (exclusive)."""
    return (monotonic_id + 1) % id_max


def reclaim(
    start: int, end: int, next_address: int | None, capacity: int
) -> tuple[int, int]:
    """`(start, end)` after the oldest chunk is reclaimed.

    `next_address` is the address of the chunk that becomes the oldest, or
    None when none is left, in which case the ring resets to `(0, 0)`.
    `start` moves forward to it, possibly into the next lap.
    """
    if next_address is None:
        return 0, 0
    return start + (next_address - start) % capacity, end


def lap_correct(start: int, end: int, capacity: int) -> tuple[int, int]:
    """Move `start` and `end` back one lap once `start` has crossed into the next."""
    if start >= capacity:
        return start - capacity, end - capacity
    return start, end


def freed_ids(id_before: int, id_after: int, id_max: int) -> Iterable[int]:
    """Ids reclaimed when the oldest id moved from `id_before` to `id_after`, in FIFO order."""
    if id_after >= id_before:
        return range(id_before, id_after)
    return chain(range(id_before, id_max), range(0, id_after))
