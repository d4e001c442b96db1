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

    Contracts (PEP 316, checked by CrossHair in `proofs/`):

    pre: capacity > 0
    pre: 0 <= start <= end
    pre: end - start <= capacity
    pre: size > 0
    post: __return__ is None or __return__ % capacity + size <= capacity
    post: __return__ is None or __return__ + size - start <= capacity
    post: __return__ is None or (__return__ == end) == (end % capacity + size <= capacity)
    post: __return__ is None or __return__ == end or __return__ == (end // capacity + 1) * capacity
    post: __return__ is not None or max(end % capacity + size, end + size - start) > capacity
    post: __return__ is not None or start != 0 or end != 0 or size > capacity
    """
    address = end
    if end % capacity + size > capacity:
        address = (end // capacity + 1) * capacity
    if address + size - start > capacity:
        return None
    return address


def next_id(monotonic_id: int, id_max: int) -> int:
    """The id after `monotonic_id`; ids wrap to 0 at `id_max` (exclusive).

    pre: 0 <= monotonic_id < id_max
    post: 0 <= __return__ < id_max
    post: __return__ == monotonic_id + 1 or (monotonic_id == id_max - 1 and __return__ == 0)
    """
    return (monotonic_id + 1) % id_max


def reclaim(start: int, end: int, next_address: int | None, capacity: int) -> tuple[int, int]:
    """`(start, end)` after the oldest chunk is reclaimed.

    `next_address` is the address of the chunk that becomes the oldest, or
    None when none is left, in which case the ring resets to `(0, 0)`.
    `start` moves forward to it, possibly into the next lap.
    `next_address` may lag whole laps behind the ring's current frame (the
    ring keeps chunk addresses as they were when allocated); only its
    physical position `next_address % capacity` matters.

    pre: capacity > 0
    pre: 0 <= start <= end
    pre: end - start <= capacity
    post: next_address is not None or __return__ == (0, 0)
    post: next_address is None or __return__[1] == end
    post: next_address is None or start <= __return__[0] < start + capacity
    post: next_address is None or __return__[0] % capacity == next_address % capacity
    """
    if next_address is None:
        return 0, 0
    return start + (next_address - start) % capacity, end


def lap_correct(start: int, end: int, capacity: int) -> tuple[int, int]:
    """Move `start` and `end` back one lap once `start` has crossed into the next.

    pre: capacity > 0
    pre: 0 <= start <= end
    pre: start < 2 * capacity
    post: 0 <= __return__[0] < capacity
    post: __return__[0] <= __return__[1]
    post: __return__[0] - start == __return__[1] - end
    post: (__return__[0] - start) % capacity == 0
    post: __return__ == (start, end) or start >= capacity
    """
    if start >= capacity:
        return start - capacity, end - capacity
    return start, end


def freed_ids(id_before: int, id_after: int, id_max: int) -> Iterable[int]:
    """Ids reclaimed when the oldest id moved from `id_before` to `id_after`, in FIFO order.

    Fewer than `id_max` ids can be reclaimed at once: moving all the way
    round (`id_max` ids) is indistinguishable from moving not at all.
    (No `post:` here: checking one would consume the returned iterator;
    `proofs.steps.freed_list` states the result.)

    pre: 0 <= id_before < id_max
    pre: 0 <= id_after < id_max
    """
    if id_after >= id_before:
        return range(id_before, id_after)
    return chain(range(id_before, id_max), range(0, id_after))
