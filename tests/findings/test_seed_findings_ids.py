"""Regression tests for FINDINGS.md, ids and read counts: more live chunks than
ids, a stale handle after the ids wrap, the reader count's overflow, a
double read (findings 4, 5, 7, H1).

As everywhere in tests/findings/: a `_seed` test DEMONSTRATES the defect on
the module built from the seed and a `_refimpl` test shows what refimpl does
instead (`xfail(strict=True)` where refimpl has not fixed it yet); the
fixtures they share are conftest.py's, the helpers findings_support.py's."""

from __future__ import annotations

from multiprocessing import Lock
from types import ModuleType
from typing import Any

import pytest
from findings_support import Shm, consistent, read

# -- 4. id exhaustion ---------------------------------------------------------------------


def test_f04_more_live_chunks_than_ids_seed(seed: ModuleType, shm: Shm) -> None:
    ring = shm.ring(seed, 1024)
    ring.ID_MAX = 4
    handles = [ring.allocate_buf(8) for _ in range(5)]
    assert handles[0][1] == handles[4][1] == 0  # two live chunks with id 0
    assert ring.metadata[0] == handles[4][0]  # the first one is forgotten


def test_f04_freeing_id_max_chunks_at_once_seed(seed: ModuleType, shm: Shm) -> None:
    writer = shm.writer(seed, size=1024, n_readers=0, id_max=4)
    for n in range(4):
        writer.put(f"k{n}", n)
    writer.free_unused()  # reclaims all 4 chunks, reports none
    assert writer.ring_buffer.metadata == {}
    assert sorted(writer.key_index) == ["k0", "k1", "k2", "k3"]
    # k0's stale entry now names the new object's address and id.
    assert writer.put("new", "other") == writer.key_index["k0"]
    with pytest.raises(ValueError):
        writer.put("k0", 0)  # "already exists"


def test_f04_id_exhaustion_refimpl(ref: ModuleType, shm: Shm) -> None:
    ring = shm.ring(ref, 1024)
    ring.ID_MAX = 4
    for _ in range(3):
        ring.allocate_buf(8)
    with pytest.raises(MemoryError):
        ring.allocate_buf(8)
    writer = shm.writer(ref, size=1024, n_readers=0, id_max=4)
    for n in range(8):
        writer.put(f"k{n}", n)
        assert consistent(writer)
    writer.free_unused()
    assert consistent(writer)


# -- 5. id wrap: a stale handle reads a foreign object -------------------------------------


def _stale_handle_after_wrap(mod: ModuleType, shm: Shm) -> Any:
    writer = shm.writer(mod, size=1024, n_readers=1, lock=Lock(), id_max=4)
    reader = shm.reader(mod, writer)
    address, monotonic_id = writer.put("k0", "v0")
    signature = writer.get_signature("k0")
    read(writer, reader, "k0")
    for n in range(1, 5):  # ids 1, 2, 3, 0 again, each at address 0
        writer.free_unused()
        writer.put(f"k{n}", f"v{n}")
        read(writer, reader, f"k{n}")
    assert writer.key_index["k4"] == (address, monotonic_id)
    return reader.get(address, monotonic_id, signature, "k0")


def test_f05_stale_handle_after_id_wrap_seed(seed: ModuleType, shm: Shm) -> None:
    assert _stale_handle_after_wrap(seed, shm) == "v4"


@pytest.mark.xfail(
    strict=True, reason="FINDINGS #5: refimpl keeps 31-bit ids and (key, address, id) signatures"
)
def test_f05_stale_handle_after_id_wrap_refimpl(ref: ModuleType, shm: Shm) -> None:
    with pytest.raises(ValueError):
        _stale_handle_after_wrap(ref, shm)


# -- 7. the reader count overflows ---------------------------------------------------------


def _count_at_limit(mod: ModuleType, shm: Shm) -> tuple[Any, Any, int]:
    writer = shm.writer(mod, n_readers=2, lock=Lock())
    reader = shm.reader(mod, writer)
    address, _ = writer.put("k", "v")
    with writer.ring_buffer.access_buf(address) as (view, _):
        view[:4] = (2**31 - 1).to_bytes(4, "little", signed=True)  # 2**31 - 1 reads so far
    return writer, reader, address


def test_f07_reader_count_overflows_seed(seed: ModuleType, shm: Shm) -> None:
    writer, reader, address = _count_at_limit(seed, shm)
    with pytest.raises(OverflowError):
        read(writer, reader, "k")
    # 2**30 hand-outs to 2 readers owe 2**31 reads: more than the count holds.
    writer.writer_flag[writer.key_index["k"][1]] = 2**30
    writer.free_unused()
    assert writer.is_cached("k")  # can never be reclaimed


def test_f07_reader_count_at_limit_refimpl(ref: ModuleType, shm: Shm) -> None:
    writer, reader, _ = _count_at_limit(ref, shm)
    overflowed = False
    try:
        value = read(writer, reader, "k")
    except OverflowError:  # not kept: its frames hold views of the segment
        overflowed = True
    assert not overflowed
    assert value == "v"
    # 2**30 hand-outs to 2 readers owe 2**31 reads: the wrapped count has them all.
    writer.writer_flag[writer.key_index["k"][1]] = 2**30
    writer.free_unused()
    assert not writer.is_cached("k")


# -- hazard H1: the TLC stories as seed/refimpl pairs (tests/spec/test_stories.py plays both)


def _double_read(mod: ModuleType) -> tuple[Any, dict[int, int]]:
    """MCDoubleRead: reader 0 reads one delivery twice; reader 1's read completes
    the count while reader 0 is mid-read; the chunk is reclaimed and reused."""
    from shmref.store.driver import Driver

    with Driver(mod, 4, n_readers=2, id_max=5, max_obj=2, layout=True) as story:
        k1 = ("k1", 0, 0)
        story.put("k1", 1)
        story.get_begin(0, k1), story.get_begin(1, k1)
        story.get_copy(0), story.get_copy(1)
        story.get_end(0)
        story.get_begin(0, k1)  # the same delivery read again
        story.get_end(1)
        story.free_unused()
        assert story.put("k2", 1).result == (0, 1)
        story.get_copy(0)
        outcome = story.get_end(0)
        return outcome, story.observe()["counts"]


def test_h1_double_read_returns_another_keys_value_seed(seed: ModuleType) -> None:
    outcome, counts = _double_read(seed)
    assert outcome.result == "k2" and counts == {1: 1}


def test_h1_double_read_is_refused_refimpl(ref: ModuleType) -> None:
    outcome, counts = _double_read(ref)
    assert outcome.status == "stale" and counts == {1: 0}
