"""The ring as a failing test's calls placed it (shmref.calls.calltrace):
what each returned call did to the chunks, in cells of the picture, and the
ring's own position attributes where it keeps them as plain attributes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shmref.calls.calltext import short
from shmref.render.traceformat import RingTracker

MAX_CELLS = 32  # the ring is drawn in cells of 16 B, doubled until it fits


@dataclass
class RingView:
    """One ring of the test as the picture shows it: its size in bytes, the
    drawing's unit, and what the calls placed on it."""

    size: int
    unit: int = 16
    tracker: RingTracker = field(init=False)
    positions: dict[str, Any] | None = None  # the writer's data_buffer_start/end, last seen
    source: Callable[[], Any] | None = None  # the ring object itself (a weak reference)

    def __post_init__(self) -> None:
        while self.size // self.unit > MAX_CELLS:
            self.unit *= 2
        self.cells = max(-(-self.size // self.unit), 1)
        self.tracker = RingTracker(self.cells, 0)

    def units(self, address: int, up: bool = False) -> int:
        """A logical byte address (growing over laps) in cells, laps kept;
        `up`: the cell a chunk's end falls in counts whole."""
        lap, offset = divmod(int(address), self.size) if self.size else (0, int(address))
        cells = -(-offset // self.unit) if up else offset // self.unit
        return lap * self.cells + cells

    def cell(self, address: int) -> int:
        """The cell a chunk's address falls in (its place in the segment)."""
        return (int(address) % self.size if self.size else int(address)) // self.unit


def follow(ring: RingView, name: str, bound: dict[str, Any], result: Any, lane: str) -> None:
    """What a returned call did to the ring, in cells (RingTracker's fields)."""
    tracker = ring.tracker
    placed = placed_of(result)
    if name == "allocate_buf" and placed is not None:
        address, chunk_id = placed
        size = bound.get("size")
        tracker.address[chunk_id] = ring.cell(address)
        tracker.size[chunk_id] = max(-(-int(size or 1) // ring.unit), 1)
        tracker.key[chunk_id] = ""
    elif name == "put" and placed is not None:
        address, chunk_id = placed
        tracker.address[chunk_id] = ring.cell(address)
        tracker.size[chunk_id] = 1  # until the next chunk (or the ring's end) says more
        tracker.key[chunk_id] = short(bound.get("key")).strip("'")
        tracker.issued[chunk_id], tracker.reads[chunk_id] = 1, 0
    elif name == "get_cached" and placed is not None:
        tracker.issued[placed[1]] = tracker.issued.get(placed[1], 0) + 1
    elif name == "get" and lane != "writer":
        read_id = bound.get("monotonic_id")
        if isinstance(read_id, int) and read_id in tracker.address:
            tracker.reads[read_id] = tracker.reads.get(read_id, 0) + 1
    elif name == "touch" and lane == "writer":
        tracker.touched.add(short(bound.get("key")).strip("'"))
    elif name == "release_touches":
        tracker.touched.clear()
    elif name == "clear":
        tracker.address.clear()
        tracker.touched.clear()
    elif name == "free_buf" and isinstance(result, (list, tuple)):
        for chunk_id in result:
            tracker.address.pop(chunk_id, None)
    tracker.readers = max(tracker.readers, _readers(bound))


def positions(ring: RingView) -> dict[str, Any] | None:
    """data_buffer_start/end in cells, where the ring keeps them as plain
    attributes (never a property: that could be a call into the store)."""
    if ring.source is None:
        return None
    attributes = attributes_of(ring.source())
    start, end = attributes.get("data_buffer_start"), attributes.get("data_buffer_end")
    if not (isinstance(start, int) and isinstance(end, int)):
        return None
    tracker = ring.tracker
    start_u, end_u = ring.units(start), ring.units(end, up=True)
    order = _live_ids(attributes)
    if order is not None:  # the documented id range says which chunks are live
        for chunk_id in set(tracker.address) - set(order):
            del tracker.address[chunk_id]
        _sizes_from_neighbours(tracker, [i for i in order if i in tracker.address], end_u)
    return {"data_buffer_start": start_u, "data_buffer_end": end_u, "metadata": tracker.address}


def _live_ids(attributes: dict[str, Any]) -> list[int] | None:
    """The live ids, oldest first, from monotonic_id_start/end and ID_MAX."""
    first, after = attributes.get("monotonic_id_start"), attributes.get("monotonic_id_end")
    id_max = attributes.get("ID_MAX")
    if not all(isinstance(v, int) for v in (first, after, id_max)) or not id_max:
        return None
    assert isinstance(first, int) and isinstance(after, int) and isinstance(id_max, int)
    count = (after - first) % id_max
    return [(first + k) % id_max for k in range(min(count, 4096))]


def _sizes_from_neighbours(tracker: RingTracker, order: list[int], end: int) -> None:
    """A put's chunk reaches to the next live chunk's cell (the last: the end)."""
    cells = tracker.n
    for here, after in zip(order, [*order[1:], None][: len(order)], strict=True):
        if here not in tracker.issued:
            continue  # allocate_buf's chunks know their size
        reach = tracker.address[after] if after is not None else end % cells or cells
        gap = (reach - tracker.address[here]) % cells
        tracker.size[here] = gap or 1


def attributes_of(obj: Any) -> dict[str, Any]:
    """An object's own attributes (none for one without a __dict__)."""
    try:
        attributes: dict[str, Any] = vars(obj)
        return attributes
    except TypeError:
        return {}


def _readers(bound: dict[str, Any]) -> int:
    count = bound.get("n_readers")
    return count if isinstance(count, int) and 0 < count < 64 else 0


def placed_of(result: Any) -> tuple[int, int] | None:
    """(address, id) if `result` looks like `put`'s or `allocate_buf`'s, else None."""
    if isinstance(result, tuple) and len(result) == 2 and all(isinstance(v, int) for v in result):
        return int(result[0]), int(result[1])
    return None
