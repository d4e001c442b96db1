"""Audit of the ring's access_buf and free_buf: a Hypothesis search.

`access_buf(address)` is searched with addresses at and beyond the ring's
bounds (chunk starts, the middle of a chunk, the last byte, negative, huge,
not an int): a clean call yields the header `allocate_buf` wrote at that
address (reduced modulo the ring's size, as the seed's addresses grow past
it), or raises ValueError. `free_buf(is_free_fn, nbytes)` is searched with
byte counts and predicates at and beyond their bounds, and in sequences
with `allocate_buf` (the only other call that changes the ring): after each
call the ring must still hold exactly the chunks not reclaimed, in FIFO
order, each readable at its address, and the ids returned must be the ones
reclaimed.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from audit_support import (
    Audits,
    check_refimpl,
    check_seed,
    check_seed_sound,
    seed,
    unlink_left_since,
)
from hypothesis import find
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from shmref.session import leaks as shmleaks

__all__ = ["seed"]  # the fixture, used by name

RING = 128


def ring_with_chunks(mod: ModuleType, sizes: list[int]) -> tuple[Any, dict[int, tuple[int, int]]]:
    """A 128-byte ring holding chunks of `sizes` data bytes: address -> (id, chunk size)."""
    ring = mod.SingleWriterShmRingBuffer(RING, create=True)
    chunks = {}
    for size in sizes:
        address, monotonic_id = ring.allocate_buf(size)
        chunks[address % RING] = (monotonic_id, size + ring.MD_SIZE)
    return ring, chunks


def audit_access_buf(mod: ModuleType, address: Any) -> str | None:
    before = shmleaks.created()
    ring, chunks = ring_with_chunks(mod, [20, 30])
    try:
        with ring.access_buf(address) as (view, header):
            got = (tuple(header), len(view))
    except ValueError:
        return None
    except Exception:
        return "20"
    finally:
        ring.close()
        unlink_left_since(before)
    if type(address) is not int:
        return "20"  # a look-alike address was taken for an int
    if address < 0:
        return "15"  # aliased onto a chunk (FINDINGS #15)
    expected = chunks.get(address % RING)
    if expected is None:
        return "20"  # a header read where no chunk starts
    return None if got == (expected, expected[1] - 8) else "20"


def audit_free_buf_arguments(mod: ModuleType, args: tuple[Any, Any]) -> str | None:
    nbytes, predicate = args
    before = shmleaks.created()
    ring, chunks = ring_with_chunks(mod, [20, 30])
    try:
        freed = list(ring.free_buf(predicate, nbytes))
    except ValueError:
        return None
    except ZeroDivisionError:
        return None  # the predicate's own exception, passed on (below: nothing freed)
    except Exception:
        return "20"
    finally:
        state = dict(ring.metadata) if ring.metadata is not None else {}
        ring.close()
        unlink_left_since(before)
    if not isinstance(nbytes, int) and nbytes is not None:
        return "20"  # a count that is not an int was taken
    return None if all(i not in state for i in freed) else "20"


PREDICATES = st.sampled_from(
    [
        lambda i, buf: True,
        lambda i, buf: False,
        lambda i, buf: 1 / 0,  # the caller's predicate fails
        None,
        "yes",
        3,
    ]
)


def audit_free_buf_sequence(mod: ModuleType, steps: list[tuple[str, int, int]]) -> str | None:
    """allocate_buf / free_buf in any order; the ring must match a FIFO of live chunks."""
    before = shmleaks.created()
    ring = mod.SingleWriterShmRingBuffer(RING, create=True)
    live: list[tuple[int, int, int]] = []  # (id, address, chunk size), oldest first
    marked: set[int] = set()
    try:
        for kind, size, nbytes in steps:
            if kind == "allocate":
                try:
                    address, monotonic_id = ring.allocate_buf(size)
                except MemoryError:
                    continue
                live.append((monotonic_id, address, size + ring.MD_SIZE))
            elif kind == "mark" and live:
                marked.add(live[size % len(live)][0])
            elif kind == "free":
                freed = list(ring.free_buf(lambda i, buf: i in marked, nbytes))
                expected = []
                reclaimed = 0
                while live and live[0][0] in marked and reclaimed < nbytes:
                    expected.append(live[0][0])
                    reclaimed += live.pop(0)[2]
                if freed != expected:
                    return "4" if len(expected) >= ring.ID_MAX else "20"
            if sorted(ring.metadata) != sorted(i for i, _, _ in live):
                return "20"
            for monotonic_id, address, chunk in live:
                with ring.access_buf(address) as (_, header):
                    if tuple(header) != (monotonic_id, chunk):
                        return "20"
        return None
    finally:
        ring.close()
        unlink_left_since(before)


STEPS = st.lists(
    st.tuples(
        st.sampled_from(["allocate", "mark", "free"]), st.integers(1, 60), st.integers(-1, 200)
    ),
    max_size=30,
)
AUDITS: Audits = {
    "ring.access_buf": (
        audit_access_buf,
        st.one_of(
            st.integers(-2 * RING, 3 * RING),
            st.integers(-(2**70), 2**70),
            st.floats(0, 300),
            st.booleans(),
            st.fractions(0, 300, max_denominator=2),
        ),
    ),
    "ring.free_buf arguments": (
        audit_free_buf_arguments,
        st.tuples(
            st.one_of(st.none(), st.integers(-2, 300), st.floats(0, 300), st.text(max_size=1)),
            PREDICATES,
        ),
    ),
}
SOUND: Audits = {"ring.free_buf with allocate_buf": (audit_free_buf_sequence, STEPS)}


@pytest.mark.parametrize("method", sorted(AUDITS))
def test_seed_defects_are_all_listed(seed: ModuleType, method: str) -> None:
    check_seed(seed, AUDITS, method)


@pytest.mark.parametrize("method", sorted(AUDITS) + sorted(SOUND))
def test_refimpl_shows_only_open_findings(method: str) -> None:
    check_refimpl({**AUDITS, **SOUND}, method)


def test_seed_free_buf_sequences_are_sound(seed: ModuleType) -> None:
    """free_buf interleaved with allocate_buf keeps the FIFO on the seed (with
    the default ID_MAX: fewer live chunks than ids, so finding 4 is out of reach)."""
    check_seed_sound(seed, SOUND, "ring.free_buf with allocate_buf")


def test_the_access_buf_audit_catches_a_broken_refimpl(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refimpl whose access_buf trusts any header (as the seed) is caught."""
    import refimpl
    import refimpl.ring

    audit, strategy = AUDITS["ring.access_buf"]
    with pytest.raises(NoSuchExample):  # refimpl as it is
        find(strategy, lambda address: audit(refimpl, address) == "20")
    monkeypatch.setattr(refimpl.ring, "check_chunk_size", lambda *args: None)
    assert audit(refimpl, find(strategy, lambda a: audit(refimpl, a) == "20")) == "20"
