"""Differential check: the seed's ring arithmetic against `refimpl.allocator`.

The seed's code is never committed. At run time this module reads the seed
text (`shmref.seed.build`, `$SHMREF_SEED` or `../shared/seed/...`), takes the
complete `class SingleWriterShmRingBuffer:` listing and executes it in a
private namespace whose `shared_memory` is an in-memory fake: `SharedMemory`
is a `bytearray` behind a `memoryview`. `allocate_buf`, `access_buf` and
`free_buf` then run unmodified, header bytes and all; only the operating
system's shared memory is replaced.

The other side, `ref_allocate` / `ref_free` / `ref_clear`, composes the
`refimpl.allocator` functions the way `refimpl/ring.py` does, on a plain
`RefState`. Both sides are driven

* by `crosshair diffbehavior` on one step from a valid state given as
  `(capacity, id_max, start, id_start, sizes, wraps, lagged)` (`*_diff`
  functions below; both share the same leading assert preconditions and map
  every exception to its class name), and
* by Hypothesis over random sequences of `allocate_buf` / mark free /
  `free_buf` / `clear` (`hypothesis_differential`), which also checks the
  `proofs.steps.ring_ok` invariant after every step.

Domain: fewer than `id_max - 1` chunks live, the ring's precondition for ids
(the seed does not enforce it; `refimpl` refuses to allocate beyond it).
"""

from __future__ import annotations

import copy
import os
import types
from collections.abc import Callable, Iterable
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any
from unittest.mock import patch

from proofs.steps import ring_ok

try:
    from crosshair import deep_realize
except ImportError:  # plain runs (Hypothesis) need no realization

    def deep_realize(value: Any) -> Any:  # type: ignore[misc]
        return value


from refimpl.allocator import freed_ids, lap_correct, next_id, place, reclaim

MD_SIZE = 8  # [4-byte id][4-byte size], as in the seed and refimpl
PlaceFn = Callable[[int, int, int, int], "int | None"]


# -- loading the seed ----------------------------------------------------------


class _FakeBuffer:
    """A `memoryview` over a `bytearray`, behind a Python-level `__setitem__`
    (CrossHair's symbolic `int.to_bytes` results are not buffer objects, so
    they are realized to `bytes` before the real `memoryview` stores them)."""

    def __init__(self, size: int) -> None:
        self._view = memoryview(bytearray(size))

    def __len__(self) -> int:
        return len(self._view)

    def __getitem__(self, key: slice) -> memoryview:
        return self._view[key]

    def __setitem__(self, key: slice, value: bytes) -> None:
        self._view[key] = deep_realize(value)


class _FakeSharedMemory:
    """`multiprocessing.shared_memory.SharedMemory` in process memory."""

    def __init__(self, name: str | None = None, create: bool = False, size: int = 0) -> None:
        self.name = name or "fake-shm"
        self.size = size
        self.buf: _FakeBuffer | None = _FakeBuffer(size)

    def close(self) -> None:
        self.buf = None

    def unlink(self) -> None:
        pass


class _SilentLogger:
    def debug(self, *args: object, **kwargs: object) -> None:
        pass


def _seed_text_path() -> Path:
    with suppress(ImportError):
        from shmref.seed.build import default_seed_path

        found = default_seed_path()
        if found is not None:
            return found
    env = os.environ.get("SHMREF_SEED")
    if env:
        return Path(env)
    return (
        Path(__file__).resolve().parents[2]
        / "shared"
        / "seed"
        / ("shm_object_storage_reference.txt")
    )


def _ring_listing(text: str) -> str:
    """The complete `class SingleWriterShmRingBuffer:` listing of the seed text."""
    with suppress(ImportError):
        from shmref.seed.build import extract_classes

        return extract_classes(text)["SingleWriterShmRingBuffer"]
    lines = text.splitlines()
    begin = lines.index("class SingleWriterShmRingBuffer:")
    end = begin + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t"):
        end += 1
    return "\n".join(lines[begin:end]) + "\n"


def load_seed_ring_class(seed_path: Path | None = None) -> type:
    """The seed's `SingleWriterShmRingBuffer`, bound to the in-memory fake."""
    path = Path(seed_path) if seed_path is not None else _seed_text_path()
    if not path.is_file():
        raise FileNotFoundError(f"seed text not found: {path} (set $SHMREF_SEED)")
    source = _ring_listing(path.read_text(encoding="utf-8"))
    namespace: dict[str, Any] = {
        "__name__": "shmref_seed_ring",
        "Any": Any,
        "Callable": Callable,
        "Iterable": Iterable,
        "chain": chain,
        "contextmanager": contextmanager,
        "suppress": suppress,
        "patch": patch,
        "secrets": __import__("secrets"),
        "logger": _SilentLogger(),
        "shared_memory": types.SimpleNamespace(SharedMemory=_FakeSharedMemory),
    }
    exec(compile(source, f"<seed {path.name}: SingleWriterShmRingBuffer>", "exec"), namespace)
    seed_class = namespace["SingleWriterShmRingBuffer"]

    class SeedRing(seed_class):  # type: ignore[misc, valid-type]
        """The seed's ring without its finalizer (nothing to close in memory;
        a finalizer running inside CrossHair's tracing only makes noise)."""

        def __del__(self) -> None:
            pass

    return SeedRing


_TEMPLATE: list[Any] = []


def _template() -> Any:
    """One seed ring built by the seed's own constructor (for its constants)."""
    if not _TEMPLATE:
        _TEMPLATE.append(load_seed_ring_class()(MD_SIZE + 1, name="fake", create=True))
    return _TEMPLATE[0]


def seed_ring(capacity: int, id_max: int) -> Any:
    """A fresh, empty seed ring writer of `capacity` bytes, ids wrapping at `id_max`.

    A copy of the template with what the seed's `__init__` derives from
    `data_buffer_size` redone: the size and a zeroed segment of
    `capacity + DATA_OFFSET` bytes (secret included).
    """
    template = _template()
    ring = copy.copy(template)
    ring.data_buffer_size = capacity
    ring.shared_memory = _FakeSharedMemory("fake", True, capacity + template.DATA_OFFSET)
    ring.metadata = {}
    ring.ID_MAX = id_max
    return ring


with suppress(FileNotFoundError):  # build the template outside any symbolic execution
    _template()


# -- the refimpl side: allocator functions composed as in refimpl/ring.py ------


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


def seed_snapshot(ring: Any) -> tuple[int, int, int, int, tuple[tuple[int, int], ...]]:
    return (
        ring.data_buffer_start,
        ring.data_buffer_end,
        ring.monotonic_id_start,
        ring.monotonic_id_end,
        tuple(ring.metadata.items()),
    )


def ref_snapshot(state: RefState) -> tuple[int, int, int, int, tuple[tuple[int, int], ...]]:
    return state.start, state.end, state.id_start, state.id_end, tuple(state.metadata.items())


# -- one step from a given state (for crosshair diffbehavior) -----------------


def _layout(
    capacity: int, id_max: int, start: int, id_start: int, sizes: list[int], wraps: list[bool]
) -> list[tuple[int, int]]:
    """Frame addresses of live chunks of `sizes` from `start`; `wraps[i]` puts
    chunk i at the next lap boundary. Also the shared preconditions."""
    assert 0 < capacity <= 48
    assert len(sizes) <= 3 and len(wraps) == len(sizes)
    assert id_max <= 2**31  # ids are 4-byte signed in the chunk header
    assert 0 <= id_start < id_max and len(sizes) < id_max - 1
    chunks = []
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


def _outcome(run: Callable[[], object]) -> object:
    try:
        return ("ok", run())
    except Exception as exc:  # one class for all: compare the name only
        return ("raise", type(exc).__name__)


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
    return _outcome(lambda: tuple(ring.allocate_buf(size))), seed_snapshot(ring)


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
    return _outcome(lambda: ref_allocate(state, size, place_fn)), ref_snapshot(state)


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
    result = _outcome(lambda: list(ring.free_buf(lambda i, _buf: i in marked, nbytes)))
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
    result = _outcome(lambda: ref_free(state, lambda i: i in marked, nbytes))
    return result, ref_snapshot(state)


# -- sequences (Hypothesis) ----------------------------------------------------

Op = tuple[Any, ...]


class InvariantViolation(AssertionError):
    """A reachable state of the allocator-based ring breaks `proofs.steps.ring_ok`."""


def _require(condition: bool, what: str, state: RefState) -> None:
    if not condition:
        raise InvariantViolation(f"{what}: {state}")


@dataclass
class Divergence:
    """The first step at which the seed and the allocator-based ring differ."""

    capacity: int
    id_max: int
    ops: list[Op]
    step: int
    seed: object
    ref: object

    def __str__(self) -> str:
        return (
            f"capacity={self.capacity} id_max={self.id_max} "
            f"ops={self.ops[: self.step + 1]}\n  seed: {self.seed}\n  ref:  {self.ref}"
        )


def check_ref_invariants(state: RefState) -> None:
    """The invariants of `proofs.steps` on a reachable state (else InvariantViolation)."""
    chunks = ref_chunks(state)
    _require(ring_ok(state.start, state.end, state.capacity, chunks), "ring_ok", state)
    _require(0 <= state.start < state.capacity, "start < capacity", state)
    live = list(state.metadata)
    first = state.id_start
    ids_ok = live == [(first + i) % state.id_max for i in range(len(live))]
    _require(ids_ok, "live ids are consecutive from id_start", state)
    _require(state.id_end == (first + len(live)) % state.id_max, "id_end", state)
    _require(0 <= first < state.id_max and 0 <= state.id_end < state.id_max, "id range", state)


def _ref_step(state: RefState, op: Op, marked: set[int], place_fn: PlaceFn) -> object:
    if op[0] == "allocate":
        return _outcome(lambda: ref_allocate(state, op[1], place_fn))
    if op[0] == "free":
        before = list(state.metadata)
        out = _outcome(lambda: ref_free(state, marked.__contains__, op[1]))
        popped = [i for i in before if i not in state.metadata]
        _require(out == ("ok", popped), f"freed ids {out} are the popped ids {popped}", state)
        return out
    ref_clear(state)
    return ("ok", None)


def _seed_step(ring: Any, op: Op, marked: set[int]) -> object:
    if op[0] == "allocate":
        return _outcome(lambda: tuple(ring.allocate_buf(op[1])))
    if op[0] == "free":
        return _outcome(lambda: list(ring.free_buf(lambda i, _buf: i in marked, op[1])))
    ring.clear()
    return ("ok", None)


class Lockstep:
    """The seed's ring and the allocator-based ring driven by the same ops.

    ops: ("allocate", payload size) | ("mark", k: the k-th live chunk, oldest
    first, mod the number live) | ("free", nbytes or None) | ("release", k:
    mark the oldest k live chunks, then free) | ("clear",). An allocation
    that would leave `id_max - 1` chunks live is skipped (outside the
    domain; `refimpl` refuses it, the seed does not).
    """

    def __init__(self, capacity: int, id_max: int, place_fn: PlaceFn = place) -> None:
        self.capacity = capacity
        self.id_max = id_max
        self.place_fn = place_fn
        self.ring = seed_ring(capacity, id_max)
        self.state = RefState(capacity, id_max)
        self.marked: set[int] = set()
        self.ops: list[Op] = []

    def apply(self, op: Op) -> Divergence | None:
        """One op on both sides; a Divergence if they now differ."""
        self.ops.append(op)
        live = list(self.state.metadata)
        if op[0] == "mark":
            if live:
                self.marked.add(live[op[1] % len(live)])
            return None
        if op[0] == "release":
            self.marked.update(live[: op[1]])
            op = ("free", None)
        if op[0] == "allocate" and len(live) >= self.id_max - 2:
            return None
        seed_view = (_seed_step(self.ring, op, self.marked), seed_snapshot(self.ring))
        ref_view = (
            _ref_step(self.state, op, self.marked, self.place_fn),
            ref_snapshot(self.state),
        )
        if seed_view != ref_view:
            return Divergence(
                self.capacity,
                self.id_max,
                list(self.ops),
                len(self.ops) - 1,
                seed_view,
                ref_view,
            )
        check_ref_invariants(self.state)
        return None

    def payloads(self) -> list[int]:
        """Payload sizes at the edges of the current state: the rest of the
        lap and the free room, each give or take a byte, and the extremes."""
        state = self.state
        rest = self.capacity - state.end % self.capacity
        room = self.capacity - (state.end - state.start)
        sizes = {1, self.capacity - MD_SIZE}
        for edge in (rest, room, state.start % self.capacity):
            sizes.update(edge - MD_SIZE + d for d in (-1, 0, 1))
        return sorted(size for size in sizes if 1 <= size <= self.capacity - MD_SIZE)


def run_ops(
    capacity: int, id_max: int, ops: list[Op], place_fn: PlaceFn = place
) -> Divergence | None:
    """Replay `ops` (see `Lockstep`); the first divergence, or None."""
    lockstep = Lockstep(capacity, id_max, place_fn)
    for op in ops:
        divergence = lockstep.apply(op)
        if divergence is not None:
            return divergence
    return None


def hypothesis_differential(
    max_examples: int = 1000, derandomize: bool = True, place_fn: PlaceFn = place
) -> Divergence | None:
    """Random op sequences on both sides; the (shrunk) first divergence, or None.

    Allocation sizes are drawn mostly from `Lockstep.payloads`, the edges of
    the current state. An `InvariantViolation` of the allocator-based ring
    propagates.
    """
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    found: list[Divergence] = []

    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=derandomize,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        st.integers(MD_SIZE + 1, 48),
        st.sampled_from([2**31, 2, 3, 5]),
        st.data(),
    )
    def differential(capacity: int, id_extra: int, data: st.DataObject) -> None:
        most_live = capacity // (MD_SIZE + 1)
        id_max = id_extra if id_extra == 2**31 else most_live + id_extra
        lockstep = Lockstep(capacity, id_max, place_fn)
        for _ in range(data.draw(st.integers(1, 30), label="length")):
            kind = data.draw(
                st.sampled_from(["allocate", "allocate", "release", "mark", "free", "clear"])
            )
            if kind == "allocate":
                edges = st.sampled_from(lockstep.payloads())
                anywhere = st.integers(1, capacity - MD_SIZE)
                op: Op = ("allocate", data.draw(st.one_of(edges, edges, anywhere)))
            elif kind == "release":
                op = ("release", data.draw(st.integers(1, 3)))
            elif kind == "mark":
                op = ("mark", data.draw(st.integers(0, 3)))
            elif kind == "free":
                op = ("free", data.draw(st.one_of(st.none(), st.integers(0, 2 * capacity))))
            else:
                op = ("clear",)
            divergence = lockstep.apply(op)
            if divergence is not None:
                found.append(divergence)
                raise _Diverged(str(divergence))

    with suppress(_Diverged):
        differential()
    return found[-1] if found else None  # the last one Hypothesis tried is the shrunk one


class _Diverged(Exception):
    pass
