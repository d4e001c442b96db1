"""The seed's ring and the allocator-based ring in lockstep over sequences of
operations (Hypothesis): the first step at which they differ, shrunk, and the
`proofs.steps.ring_ok` invariant checked after every step of the
allocator-based ring (`proofs.seeddiff` checks one step from any state)."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from proofs.refring import (
    MD_SIZE,
    PlaceFn,
    RefState,
    outcome,
    ref_allocate,
    ref_chunks,
    ref_clear,
    ref_free,
    ref_snapshot,
)
from proofs.seedring import seed_ring, seed_snapshot
from proofs.steps import ring_ok
from refimpl.allocator import place

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
        return outcome(lambda: ref_allocate(state, op[1], place_fn))
    if op[0] == "free":
        before = list(state.metadata)
        out = outcome(lambda: ref_free(state, marked.__contains__, op[1]))
        popped = [i for i in before if i not in state.metadata]
        _require(out == ("ok", popped), f"freed ids {out} are the popped ids {popped}", state)
        return out
    ref_clear(state)
    return ("ok", None)


def _seed_step(ring: Any, op: Op, marked: set[int]) -> object:
    if op[0] == "allocate":
        return outcome(lambda: tuple(ring.allocate_buf(op[1])))
    if op[0] == "free":
        return outcome(lambda: list(ring.free_buf(lambda i, _buf: i in marked, op[1])))
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
