"""Regression tests for FINDINGS.md, what stops `put` from reclaiming: a failed
put or read, an unread hand-out, a reclaim target too small, an object
larger than the ring, a delivery never read (findings 3, 8, 8b, 11, 19, H5).

As everywhere in tests/findings/: a `_seed` test DEMONSTRATES the defect on
the module built from the seed and a `_refimpl` test shows what refimpl does
instead (`xfail(strict=True)` where refimpl has not fixed it yet); the
fixtures they share are conftest.py's, the helpers findings_support.py's."""

from __future__ import annotations

from collections.abc import Iterator
from multiprocessing import Lock
from types import ModuleType
from typing import Any

import pytest
from findings_support import HOOKS, FailFirstRead, LyingSerde, RawSerde, Shm, consistent, read

# -- 3. a put that fails after allocating wedges the store ------------------------------


def _fill_after_bad_put(mod: ModuleType, shm: Shm, bad: str) -> tuple[Any, BaseException]:
    """Put 'a', a bad value, then small values until a put needs reclaiming."""
    writer = shm.writer(mod, size=256, max_object_size=64, n_readers=0, serde=LyingSerde)
    writer.put("a", "x" * 10)
    with pytest.raises(ValueError) as bad_put:
        writer.put("b", bad)
    return writer, bad_put.value


@pytest.mark.parametrize("bad", ["zero-length-claim-for-a-longer-value", "bytearray"])
def test_f03_failed_put_wedges_the_store_seed(seed: ModuleType, shm: Shm, bad: str) -> None:
    writer, _ = _fill_after_bad_put(seed, shm, bad)
    orphan = max(writer.ring_buffer.metadata)
    assert orphan not in writer.writer_flag  # allocated, never indexed
    with pytest.raises(KeyError):  # the first put that needs reclaiming...
        for n in range(100):
            writer.put(f"k{n}", "y" * 20)
    with pytest.raises(KeyError):  # ...and every later one
        writer.put("later", "y" * 20)
    # free_buf had already dropped 'a''s chunk when the KeyError hit, so the
    # writer still hands out a handle whose chunk is gone.
    assert writer.is_cached("a")
    assert not consistent(writer)


@pytest.mark.parametrize("bad", ["zero-length-claim-for-a-longer-value", "bytearray"])
def test_f03_failed_put_leaves_store_usable_refimpl(ref: ModuleType, shm: Shm, bad: str) -> None:
    writer = shm.writer(ref, size=256, max_object_size=64, n_readers=0, serde=LyingSerde)
    writer.put("a", "x" * 10)
    live = dict(writer.ring_buffer.metadata)
    try:
        writer.put("b", bad)
    except ValueError:
        assert writer.ring_buffer.metadata == live  # validated before allocating
    for n in range(100):
        writer.put(f"k{n}", "y" * 20)
    assert consistent(writer)


class SlowList(list):
    """A serializer's list of buffers; iterating it lets the writer be re-entered."""

    def __iter__(self) -> Iterator[Any]:
        pending = HOOKS[:]
        HOOKS.clear()
        for hook in pending:
            hook()
        return super().__iter__()


class ListSerde:
    def serialize(self, value: str) -> tuple[Any, int, bytes, int]:
        payload = value.encode()
        return SlowList([payload]), len(payload), b"", 0

    def deserialize(self, data: memoryview) -> Any:
        return bytes(data).decode()


def _reentrant_put(mod: ModuleType, shm: Shm) -> tuple[Any, list[BaseException]]:
    """A second thread's puts land while the first put is copying its object
    (as with vLLM's renderer workers > 1): the second one must reclaim and
    meets the first put's chunk, allocated but not yet indexed. Returns the
    errors of the interleaved puts; the first put itself completes."""
    writer = shm.writer(mod, size=64, max_object_size=24, n_readers=0, serde=ListSerde)
    writer.put("a", "a" * 10)  # 22-byte chunks
    writer.put("b", "b" * 10)
    errors: list[BaseException] = []

    def interleave() -> None:
        untracked = [i for i in writer.ring_buffer.metadata if i not in writer.writer_flag]
        if not untracked:
            HOOKS.append(interleave)  # not in the window yet
            return
        for key in ("d", "e"):
            try:
                writer.put(key, key * 10)
            except Exception as exc:  # what the other thread would see
                errors.append(exc.with_traceback(None))  # keep no frame (and view) alive

    HOOKS.clear()
    HOOKS.append(interleave)
    try:
        writer.put("c", "c" * 10)
    finally:
        HOOKS.clear()
    return writer, errors


def test_f03_interleaved_put_raises_key_error_seed(seed: ModuleType, shm: Shm) -> None:
    writer, errors = _reentrant_put(seed, shm)
    assert len(errors) == 1 and isinstance(errors[0], KeyError)
    assert errors[0].args == (writer.key_index["c"][1],)  # the unindexed chunk's id


@pytest.mark.xfail(strict=True, reason="FINDINGS #3: refimpl's writer is single-threaded too")
def test_f03_interleaved_put_refimpl(ref: ModuleType, shm: Shm) -> None:
    writer, errors = _reentrant_put(ref, shm)
    assert not any(isinstance(e, KeyError) for e in errors)
    assert consistent(writer)


# -- 8. a failed read pins its chunk and stops FIFO reclamation ----------------------------


def _fill_after_failed_read(mod: ModuleType, shm: Shm) -> tuple[list[str], Any]:
    FailFirstRead.failed.clear()
    writer = shm.writer(mod, size=256, max_object_size=40, n_readers=1, lock=Lock())
    reader = shm.reader(mod, writer, serde=FailFirstRead)
    outcomes = []
    for n in range(30):
        try:
            writer.put(f"k{n}", f"value {n}")
        except MemoryError:
            outcomes.append("put:MemoryError")
            continue
        try:
            read(writer, reader, f"k{n}")
            outcomes.append("read")
        except MemoryError:
            outcomes.append("read failed")
    return outcomes, writer


def test_f08_failed_read_wedges_the_ring_seed(seed: ModuleType, shm: Shm) -> None:
    outcomes, writer = _fill_after_failed_read(seed, shm)
    assert outcomes[0] == "read failed"
    assert outcomes[-5:] == ["put:MemoryError"] * 5  # though every later object was read
    assert writer.ring_buffer.monotonic_id_start == 0  # stuck at the failed read


def test_f08_failed_read_is_counted_refimpl(ref: ModuleType, shm: Shm) -> None:
    outcomes, _ = _fill_after_failed_read(ref, shm)
    assert outcomes[0] == "read failed"
    assert "put:MemoryError" not in outcomes


# -- 11. put's reclaim target can be too small -------------------------------------------------


def _spurious_memory_error(mod: ModuleType, shm: Shm) -> Any:
    """42-byte ring, max_object_size 13 (reclaim target 26 bytes), every object
    reclaimable (n_readers=0): five 14-byte chunks, then one of 15 bytes."""
    writer = shm.writer(mod, size=42, max_object_size=13, n_readers=0, serde=RawSerde)
    for n in range(5):
        writer.put(f"k{n}", 1)
    return writer


def test_f11_put_fails_though_everything_is_reclaimable_seed(seed: ModuleType, shm: Shm) -> None:
    writer = _spurious_memory_error(seed, shm)
    with pytest.raises(MemoryError):
        writer.put("last", 2)
    writer.put("last", 2)  # the same put succeeds when tried again


def test_f11_put_reclaims_enough_refimpl(ref: ModuleType, shm: Shm) -> None:
    writer = _spurious_memory_error(ref, shm)
    writer.put("last", 2)


# -- 8b. one unread hand-out stops reclamation of everything behind it -----------------------------


def _unread_head_then_fill(mod: ModuleType, shm: Shm) -> tuple[list[str], Any, Any]:
    """k0 is handed out but not read yet (its request waits in the scheduler's
    queue); every later object is read at once. Puts until one fails."""
    writer = shm.writer(mod, size=256, max_object_size=40, n_readers=1, lock=Lock())
    reader = shm.reader(mod, writer)
    writer.put("k0", "value 0")
    outcomes = []
    for n in range(1, 30):
        try:
            writer.put(f"k{n}", f"value {n}")
        except MemoryError:
            outcomes.append("put:MemoryError")
            break
        read(writer, reader, f"k{n}")
        outcomes.append("read")
    return outcomes, writer, reader


def test_f08_unread_head_blocks_reclamation_seed(seed: ModuleType, shm: Shm) -> None:
    outcomes, writer, reader = _unread_head_then_fill(seed, shm)
    assert outcomes[-1] == "put:MemoryError"
    live = len(writer.ring_buffer.metadata)
    assert live >= 5 and writer.ring_buffer.monotonic_id_start == 0
    # Every live chunk but the head is reclaimable: the head alone blocks them.
    read(writer, reader, "k0")
    writer.put("after", "value after")
    assert len(writer.ring_buffer.metadata) < live


@pytest.mark.xfail(
    strict=True, reason="FINDINGS #8b: refimpl reclaims in FIFO order too (spec's free rule)"
)
def test_f08_unread_head_does_not_block_reclamation_refimpl(ref: ModuleType, shm: Shm) -> None:
    outcomes, _, _ = _unread_head_then_fill(ref, shm)
    assert "put:MemoryError" not in outcomes


# -- hazard H5: the TLC story as a seed/refimpl pair (tests/spec/test_stories.py plays it)


def _never_read_delivery(mod: ModuleType) -> tuple[list[str], int]:
    """MCLostReader: reader 1 never reads the first delivery (request aborted
    while queued); every later object is read by both readers."""
    from shmref.store.driver import Driver

    with Driver(mod, 4, n_readers=2, id_max=64, max_obj=2, layout=True) as story:
        story.put("pinned", 1)
        story.get_begin(0, ("pinned", 0, 0)), story.get_copy(0), story.get_end(0)
        outcomes = []
        for i in range(6):
            outcome = story.put(f"k{i}", 1)
            outcomes.append(outcome.status)
            if outcome.status == "ok":
                for reader in (0, 1):
                    story.get_begin(reader, (f"k{i}", *outcome.result))
                    story.get_copy(reader), story.get_end(reader)
        return outcomes, story.observe()["monotonic_id_start"]


def test_h5_delivery_never_read_pins_the_ring_seed(seed: ModuleType) -> None:
    outcomes, start = _never_read_delivery(seed)
    assert outcomes[-1] == "MemoryError" and start == 0


@pytest.mark.xfail(strict=True, reason="H5: reads that never happen need a release (assumption)")
def test_h5_delivery_never_read_is_released_refimpl(ref: ModuleType) -> None:
    outcomes, _ = _never_read_delivery(ref)
    assert "MemoryError" not in outcomes


# -- 19. an object larger than the ring evicts the whole cache, then fails ---------------------


def _put_larger_than_the_ring(mod: ModuleType, shm: Shm) -> tuple[str, list[str]]:
    """max_object_size (1000) above the ring's size (256): five small objects,
    all reclaimable (n_readers=0), then one 400-byte object."""
    writer = shm.writer(mod, size=256, max_object_size=1000, n_readers=0)
    for n in range(5):
        writer.put(f"k{n}", "x" * 20)
    try:
        writer.put("big", "y" * 400)
        outcome = "ok"
    except (ValueError, MemoryError) as exc:
        outcome = type(exc).__name__
    return outcome, sorted(writer.key_index)


def test_f19_object_larger_than_the_ring_flushes_the_cache_seed(seed: ModuleType, shm: Shm) -> None:
    outcome, cached = _put_larger_than_the_ring(seed, shm)
    assert outcome == "MemoryError"
    assert cached == []  # every cached object was evicted for a put that could never fit


def test_f19_object_larger_than_the_ring_refused_first_refimpl(ref: ModuleType, shm: Shm) -> None:
    outcome, cached = _put_larger_than_the_ring(ref, shm)
    assert outcome in ("ValueError", "MemoryError")
    assert cached == [f"k{n}" for n in range(5)]
