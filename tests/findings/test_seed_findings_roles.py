"""Regression tests for FINDINGS.md, who is the writer and when a store ends:
writer semantics keyed on `reader_lock`, `close()` and `__del__`, a read
across `clear()`, writer-only methods on a reader (findings 6, 9, 10, 18).

As everywhere in tests/findings/: a `_seed` test DEMONSTRATES the defect on
the module built from the seed and a `_refimpl` test shows what refimpl does
instead (`xfail(strict=True)` where refimpl has not fixed it yet); the
fixtures they share are conftest.py's, the helpers findings_support.py's."""

from __future__ import annotations

import gc
from contextlib import suppress
from multiprocessing import Lock
from types import ModuleType
from typing import Any

import pytest
from findings_support import DEV_SHM, HOOKS, HookSerde, Shm, count_of, unique_name

# -- 6. writer semantics keyed on reader_lock ----------------------------------------------


def test_f06_writer_with_lock_reads_like_a_reader_seed(seed: ModuleType, shm: Shm) -> None:
    writer = shm.writer(seed, n_readers=1, lock=Lock())  # what handle() needs
    address, monotonic_id = writer.put("k", "v")
    assert writer.get(address, monotonic_id) == "v"
    assert count_of(writer, address) == 1  # counted as the one reader's read
    writer.free_unused()
    assert not writer.is_cached("k")  # freed though no reader has read it
    with pytest.raises(ValueError, match="signature"):
        writer.touch("k")  # the writer's touch takes the reader path


def test_f06_lockless_writer_cannot_share_a_handle_seed(seed: ModuleType, shm: Shm) -> None:
    writer = shm.writer(seed, n_readers=1)  # as vLLM's ShmObjectStoreSenderCache
    with pytest.raises(ValueError, match="Lock must be provided"):
        seed.SingleWriterShmObjectStorage.create_from_handle(writer.handle())


def test_f06_writer_with_lock_reads_like_a_reader_refimpl(ref: ModuleType, shm: Shm) -> None:
    """refimpl follows the seed: no vLLM caller is harmed (the sender has no
    lock and never calls get), and vLLM's test_blocking_unread_object needs it."""
    writer = shm.writer(ref, n_readers=1, lock=Lock())
    address, monotonic_id = writer.put("k", "v")
    assert writer.get(address, monotonic_id) == "v"
    assert count_of(writer, address) == 1
    writer.free_unused()
    assert not writer.is_cached("k")
    with pytest.raises(ValueError, match="signature"):
        writer.touch("k")


def test_f06_lockless_writer_keeps_writer_semantics_refimpl(ref: ModuleType, shm: Shm) -> None:
    writer = shm.writer(ref, n_readers=1)  # as vLLM's ShmObjectStoreSenderCache
    address, monotonic_id = writer.put("k", "v")
    assert writer.get(address, monotonic_id) == "v"
    assert count_of(writer, address) == 0  # the writer's read is no reader's
    reader = shm.reader(ref, writer)
    assert reader.get(address, monotonic_id, writer.get_signature("k"), "k") == "v"
    writer.touch("k")  # protects: the object owes no read and stays
    writer.free_unused()
    assert writer.is_cached("k")
    writer.release_touches()
    writer.free_unused()
    assert not writer.is_cached("k")


# -- 9. close() and __del__ ----------------------------------------------------------------


def test_f09_close_with_exported_view_leaks_segment_seed(seed: ModuleType, shm: Shm) -> None:
    ring = shm.ring(seed, 256)
    name = ring.shared_memory.name
    view = ring.shared_memory.buf[0:8]
    with pytest.raises(BufferError):
        ring.close()
    assert (DEV_SHM / name).exists()  # unlink was skipped
    view.release()
    ring.close()
    assert not (DEV_SHM / name).exists()


def test_f09_close_with_exported_view_refimpl(ref: ModuleType, shm: Shm) -> None:
    ring = shm.ring(ref, 256)
    name = ring.shared_memory.name
    view = ring.shared_memory.buf[0:8]
    with suppress(BufferError):
        ring.close()
    assert not (DEV_SHM / name).exists()
    view.release()
    ring.close()


def _old_ring_collected_after_new_one_made(mod: ModuleType, shm: Shm) -> bool:
    """vLLM names its segment with a fixed name: a writer closes, a new writer
    is made under the same name, then the old object is garbage-collected."""
    name = unique_name()
    old = mod.SingleWriterShmRingBuffer(256, name=name, create=True)
    old.close()
    shm.ring(mod, 256, name=name)
    del old
    gc.collect()
    return (DEV_SHM / name).exists()


def test_f09_del_after_close_unlinks_a_new_segment_seed(seed: ModuleType, shm: Shm) -> None:
    assert not _old_ring_collected_after_new_one_made(seed, shm)


def test_f09_del_after_close_refimpl(ref: ModuleType, shm: Shm) -> None:
    assert _old_ring_collected_after_new_one_made(ref, shm)


# -- 10. a read that overlaps clear() and reuse returns a foreign object -----------------------


def _read_across_clear(mod: ModuleType, shm: Shm) -> Any:
    writer = shm.writer(mod, n_readers=1, lock=Lock())
    reader = shm.reader(mod, writer, serde=HookSerde)
    address, monotonic_id = writer.put("k0", "value-of-k0")
    signature = writer.get_signature("k0")

    def writer_acts() -> None:  # while the reader copies: clear, then a new put
        writer.clear()
        assert writer.put("k1", "value-of-k1") == (address, monotonic_id + 1)

    HOOKS.clear()
    HOOKS.append(writer_acts)
    try:
        return reader.get(address, monotonic_id, signature, "k0")
    finally:
        HOOKS.clear()


def test_f10_read_across_clear_returns_foreign_object_seed(seed: ModuleType, shm: Shm) -> None:
    assert _read_across_clear(seed, shm) == "value-of-k1"


def test_f10_read_across_clear_refimpl(ref: ModuleType, shm: Shm) -> None:
    with pytest.raises(ValueError):
        _read_across_clear(ref, shm)


# -- 18. writer-only methods on a reader ----------------------------------------------------------

WRITER_ONLY = [
    ("put", ("k", "v")),
    ("is_cached", ("k",)),
    ("get_cached", ("k",)),
    ("get_signature", ("k",)),
    ("release_touches", ()),
    ("free_unused", ()),
]


def _writer_only_on_reader(mod: ModuleType, shm: Shm) -> dict[str, str]:
    writer = shm.writer(mod, lock=Lock())
    writer.put("k", "v")
    reader = shm.reader(mod, writer)
    out = {}
    for name, args in WRITER_ONLY:
        try:
            getattr(reader, name)(*args)
            out[name] = "ok"
        except Exception as exc:
            out[name] = type(exc).__name__
    return out


def test_f18_writer_only_methods_on_a_reader_seed(seed: ModuleType, shm: Shm) -> None:
    out = _writer_only_on_reader(seed, shm)
    expected = {name: "AttributeError" for name, _ in WRITER_ONLY}
    expected["free_unused"] = "AssertionError" if __debug__ else "AttributeError"
    assert out == expected


def test_f18_writer_only_methods_on_a_reader_refimpl(ref: ModuleType, shm: Shm) -> None:
    assert _writer_only_on_reader(ref, shm) == {name: "ValueError" for name, _ in WRITER_ONLY}
