"""The other side of the seed differential: `refimpl.allocator`'s functions
composed the way `refimpl/ring.py` composes them, on a plain `RefState`
(no shared memory), and `outcome`, how either side's step is compared."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from refimpl.allocator import freed_ids, lap_correct, next_id, place, reclaim

MD_SIZE = 8  # [4-byte id][4-byte size], as in the seed and refimpl
PlaceFn = Callable[[int, int, int, int], "int | None"]


def outcome(run: Callable[[], object]) -> object:
    """("ok", result) or ("raise", the exception's class name): both sides'
    steps compare by this (one class for all, the name only)."""
    try:
        return ("ok", run())
    except Exception as exc:
        return ("raise", type(exc).__name__)


@dataclass
class RefState:
    """The writer's state in `refimpl/ring.py`, without the shared memory."""

    capacity: int
    id_max: int
    start: int = 0
    end: int = 0
    id_start: int = 0
    id_end: int = 0
    metadata: dict[int, int] = field(default_factory=dict)  # id -> address
    sizes: dict[int, int] = field(default_factory=dict)  # id -> chunk size (header)


def ref_allocate(state: RefState, size: int, place_fn: PlaceFn = place) -> tuple[int, int]:
    """`allocate_buf(size)`: place + next_id + end update."""
    total = size + MD_SIZE
    address = place_fn(state.end, state.start, total, state.capacity)
    if address is None:
        raise MemoryError("Not enough space in the data buffer")
    monotonic_id = state.id_end
    state.metadata[monotonic_id] = address
    state.sizes[monotonic_id] = total
    state.end = address + total
    state.id_end = next_id(monotonic_id, state.id_max)
    return address, monotonic_id


def ref_free(state: RefState, is_free: Callable[[int], bool], nbytes: int | None) -> list[int]:
    """`free_buf(is_free, nbytes)`: reclaim + next_id per chunk, then lap_correct."""
    if nbytes is None:
        nbytes = state.capacity
    id_before = state.id_start
    freed = 0
    while freed < nbytes and state.id_start in state.metadata:
        oldest = state.id_start
        if not is_free(oldest):
            break
        del state.metadata[oldest]
        size = state.sizes.pop(oldest)
        state.id_start = next_id(oldest, state.id_max)
        state.start, state.end = reclaim(
            state.start, state.end, state.metadata.get(state.id_start), state.capacity
        )
        freed += size
    state.start, state.end = lap_correct(state.start, state.end, state.capacity)
    return list(freed_ids(id_before, state.id_start, state.id_max))


def ref_clear(state: RefState) -> None:
    state.metadata.clear()
    state.sizes.clear()
    state.id_start = state.id_end
    state.start = state.end = 0


def ref_chunks(state: RefState) -> list[tuple[int, int]]:
    """The live chunks `(frame address, size)`, oldest first, in the current frame."""
    chunks = []
    for monotonic_id, address in state.metadata.items():
        frame = address - (address - state.start) // state.capacity * state.capacity
        chunks.append((frame, state.sizes[monotonic_id]))
    return chunks


def ref_snapshot(state: RefState) -> tuple[int, int, int, int, tuple[tuple[int, int], ...]]:
    return state.start, state.end, state.id_start, state.id_end, tuple(state.metadata.items())
