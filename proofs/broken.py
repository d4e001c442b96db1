"""Deliberately broken allocator arithmetic that CrossHair must refute.

Each `place_*` function is `refimpl.allocator.place` with one off-by-one and
the very same contract (`tests/refimpl/test_proofs.py` checks that the contract lines
are identical); `python -m proofs --broken` and the tests expect CrossHair to
find a counterexample for each, showing that the contracts have teeth.
`allocate_any_overcommit` puts an off-by-one `place` (without a contract of
its own) into the `proofs.steps.allocate_any` step, so that the step's
contract alone must catch it.
"""

from __future__ import annotations

from proofs.seeddiff import ref_allocate_with
from proofs.steps import disjoint, inside  # noqa: F401 (used in the contracts)


def place_straddle(end: int, start: int, size: int, capacity: int) -> int | None:
    """`place` whose lap check is one byte too lenient: a chunk may straddle the end.

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
    return _straddle(end, start, size, capacity)


def place_early_wrap(end: int, start: int, size: int, capacity: int) -> int | None:
    """`place` that wraps when the chunk would exactly fill the lap (`>=` for `>`).

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
    return _early_wrap(end, start, size, capacity)


def place_overcommit(end: int, start: int, size: int, capacity: int) -> int | None:
    """`place` whose room check is one byte too lenient (`size - 1`).

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
    return _overcommit(end, start, size, capacity)


def _straddle(end: int, start: int, size: int, capacity: int) -> int | None:
    address = end
    if end % capacity + size - 1 > capacity:  # off by one: should be `+ size > capacity`
        address = (end // capacity + 1) * capacity
    if address + size - start > capacity:
        return None
    return address


def _early_wrap(end: int, start: int, size: int, capacity: int) -> int | None:
    address = end
    if end % capacity + size >= capacity:  # off by one: should be `>`
        address = (end // capacity + 1) * capacity
    if address + size - start > capacity:
        return None
    return address


def _overcommit(end: int, start: int, size: int, capacity: int) -> int | None:
    address = end
    if end % capacity + size > capacity:
        address = (end // capacity + 1) * capacity
    if address + size - 1 - start > capacity:  # off by one: should be `address + size`
        return None
    return address


def allocate_any_overcommit(
    start: int, end: int, capacity: int, size: int, live_address: int, live_size: int
) -> int | None:
    """`proofs.steps.allocate_any` over the overcommitting `place`.

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
    return _overcommit(end, start, size, capacity)


# The differential against the seed must notice each of them too, e.g.
#   crosshair diffbehavior proofs.seeddiff.seed_allocate_diff \
#       proofs.broken.ref_allocate_straddle_diff


def ref_allocate_straddle_diff(
    capacity: int,
    id_max: int,
    start: int,
    id_start: int,
    sizes: list[int],
    wraps: list[bool],
    lagged: int,
    size: int,
) -> object:
    """`proofs.seeddiff.ref_allocate_diff` over the straddling `place`."""
    return ref_allocate_with(
        _straddle, capacity, id_max, start, id_start, sizes, wraps, lagged, size
    )


def ref_allocate_early_wrap_diff(
    capacity: int,
    id_max: int,
    start: int,
    id_start: int,
    sizes: list[int],
    wraps: list[bool],
    lagged: int,
    size: int,
) -> object:
    """`proofs.seeddiff.ref_allocate_diff` over the early-wrapping `place`."""
    return ref_allocate_with(
        _early_wrap, capacity, id_max, start, id_start, sizes, wraps, lagged, size
    )


def ref_allocate_overcommit_diff(
    capacity: int,
    id_max: int,
    start: int,
    id_start: int,
    sizes: list[int],
    wraps: list[bool],
    lagged: int,
    size: int,
) -> object:
    """`proofs.seeddiff.ref_allocate_diff` over the overcommitting `place`."""
    return ref_allocate_with(
        _overcommit, capacity, id_max, start, id_start, sizes, wraps, lagged, size
    )
