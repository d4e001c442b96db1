"""What vLLM's own unit tests of this module assert, restated in our words.

Sources (public vLLM, read for facts only): `tests/distributed/test_shm_buffer.py`
(5 tests; a later version adds `test_allocation_cycles`) and
`tests/distributed/test_shm_storage.py` (7 tests before signed handles, 11
after, plus a multiprocess example). Each test below names the upstream test
it stands for. They run on any `--impl` through public attributes only (the
ones vLLM's tests read too: `key_index`, `id_index`, the ring's `metadata`
and counters). Where the upstream assertion is weak, ours is strict: overflow
tests count the evicted objects, blocking tests require the MemoryError,
spawned readers fail the test when they fail.

Set-up as upstream: a 100 KiB ring, 10 KiB objects, two readers, and a writer
built WITH the readers' lock, so that its own `get` counts as a read
(FINDINGS #6: refimpl follows the seed there).
"""

from __future__ import annotations

import dataclasses
import gc
import multiprocessing as mp
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from shmref.store.readers import ReaderProcess

RING_BYTES = 100 * 1024
MAX_OBJECT = 10 * 1024
N_READERS = 2
SIGNATURE_ERROR = "SHM handle signature"
STALE_ERROR = "modified or is invalid"


@pytest.fixture
def lock() -> Any:
    return mp.get_context("spawn").Lock()


@pytest.fixture
def storage(impl: ModuleType, ring_factory: Any, lock: Any) -> Any:
    """vLLM's test set-up: the writer holds the readers' lock."""
    ring = ring_factory(RING_BYTES)
    return impl.SingleWriterShmObjectStorage(MAX_OBJECT, N_READERS, ring, reader_lock=lock)


@pytest.fixture
def open_reader(impl: ModuleType) -> Any:
    """Readers opened from the writer's handle, closed after the test."""
    readers: list[Any] = []

    def make(writer: Any) -> Any:
        reader = impl.SingleWriterShmObjectStorage.create_from_handle(writer.handle())
        readers.append(reader)
        return reader

    yield make
    for reader in readers:
        reader.close()


def item(i: int) -> str:
    """Upstream's filler value: 'data_<i>' repeated 100 times (700-800 bytes)."""
    return f"data_{i}" * 100


def fill(storage: Any, start: int, stop: int = 1000) -> list[tuple[str, str, int, int]]:
    """Put items start, start+1, ... until MemoryError (required) or `stop`."""
    stored = []
    with pytest.raises(MemoryError):
        for i in range(start, stop):
            key, value = f"item_{i}", item(i)
            stored.append((key, value, *storage.put(key, value)))
    return stored


# -- test_shm_buffer.py ---------------------------------------------------------------


def test_reader_ring_opens_the_writers_segment(impl: ModuleType, ring_factory: Any) -> None:
    """test_buffer_opening: a ring opened from the writer's handle is a reader
    on the same segment."""
    writer = ring_factory(4096)
    reader = impl.SingleWriterShmRingBuffer(*writer.handle())
    try:
        assert writer.is_writer and not reader.is_writer
        assert reader.shared_memory.name == writer.shared_memory.name
    finally:
        reader.close()


def test_dropping_a_writer_ring_unlinks_its_segment(impl: ModuleType) -> None:
    """The pre-signature tests' tearDown only drops the ring (`del`): its
    `__del__` must close and unlink the segment (the leak guard also checks)."""
    ring = impl.SingleWriterShmRingBuffer(4096, create=True)
    path = Path("/dev/shm") / ring.shared_memory.name.lstrip("/")
    reader = impl.SingleWriterShmRingBuffer(*ring.handle())
    assert path.exists()
    del ring, reader
    gc.collect()
    assert not path.exists()


def test_bytes_written_through_access_buf_read_back(ring_factory: Any) -> None:
    """test_buffer_access: bytes written into an allocated chunk come back,
    and the header's id is the one allocate_buf returned."""
    ring = ring_factory(4096)
    ring.allocate_buf(10)  # not at address 0, so the address matters
    address, monotonic_id = ring.allocate_buf(100)
    data = bytes(range(91))
    with ring.access_buf(address) as (view, _header):
        view[: len(data)] = data
    with ring.access_buf(address) as (view, (chunk_id, size)):
        assert bytes(view[: len(data)]) == data
        assert (chunk_id, size) == (monotonic_id, 100 + ring.MD_SIZE)


def test_full_ring_raises_memory_error(ring_factory: Any) -> None:
    """test_memory_error_on_full_buffer: 108 + 88 of 200 bytes used, a
    9-byte chunk does not fit (and a 4-byte one still does)."""
    ring = ring_factory(200)
    ring.allocate_buf(100)
    ring.allocate_buf(80)
    with pytest.raises(MemoryError):
        ring.allocate_buf(1)
    assert ring.data_buffer_end == 196 and len(ring.metadata) == 2


def test_free_buf_returns_the_freed_ids_in_order(ring_factory: Any) -> None:
    """test_allocation_and_free: allocate and free one 88-byte chunk five
    times in a 200-byte ring; each free returns exactly that chunk's id, and
    the result can be indexed."""
    ring = ring_factory(200)
    for i in range(5):
        address, monotonic_id = ring.allocate_buf(80)
        with ring.access_buf(address) as (view, _):
            view[:4] = (0).to_bytes(4, "little")
        freed = ring.free_buf(lambda *_: True)
        assert (freed[0], list(freed)) == (i, [i]) and monotonic_id == i


def test_clear_empties_the_ring_but_keeps_ids_increasing(ring_factory: Any) -> None:
    """test_clear_buffer. The pre-signature test also expects the id counter
    back at 0; the seed's code and refimpl keep it (ids keep increasing, so
    that a handle issued before the clear cannot name a new object: the harm
    is shown in test_resetting_ids_on_clear_lets_an_old_handle_read_a_new_object,
    FINDINGS H2)."""
    ring = ring_factory(4096)
    for _ in range(3):
        ring.allocate_buf(100)
    ring.clear()
    assert len(ring.metadata) == 0
    assert (ring.data_buffer_start, ring.data_buffer_end) == (0, 0)
    assert (ring.monotonic_id_start, ring.monotonic_id_end) == (3, 3)
    assert ring.allocate_buf(100) == (0, 3)


def test_allocation_cycles_never_overlap(ring_factory: Any) -> None:
    """test_allocation_cycles: in a 100-byte ring, 33 allocations of 10-byte
    chunks, freeing 2x the chunk when full, never overlap a live chunk; each
    freed id was live; once all is freed, one chunk of the whole ring fits."""
    capacity = 100
    ring = ring_factory(capacity)
    owner: list[int | None] = [None] * capacity  # byte -> id of the live chunk
    live: dict[int, tuple[int, int]] = {}

    def free(nbytes: int | None = None) -> None:
        for freed in ring.free_buf(lambda *_: True, nbytes):
            start, size = live.pop(freed)
            assert owner[start : start + size] == [freed] * size
            owner[start : start + size] = [None] * size

    def allocate(size: int) -> None:
        try:
            address, monotonic_id = ring.allocate_buf(size)
        except MemoryError:
            free(2 * (size + ring.MD_SIZE))
            address, monotonic_id = ring.allocate_buf(size)
        start, total = address % capacity, size + ring.MD_SIZE
        assert owner[start : start + total] == [None] * total
        owner[start : start + total] = [monotonic_id] * total
        live[monotonic_id] = (start, total)

    for _ in range(33):
        allocate(2)
    assert len(live) < 33  # the ring wrapped and reclaimed
    free()
    assert live == {} and owner == [None] * capacity
    allocate(capacity - ring.MD_SIZE)


# -- test_shm_storage.py ---------------------------------------------------------------


def test_put_indexes_and_get_returns_the_value(storage: Any) -> None:
    """test_minimal_put_get_cycle (upstream stores a MultiModalKwargsItem with
    vLLM's serde; see test_vllm_callers.py for a caller's serde)."""
    value = {"field1": list(range(10)), "field2": b"\x00" * 20}
    address, monotonic_id = storage.put("test_key", value)
    assert storage.key_index["test_key"] == (address, monotonic_id)
    assert storage.id_index[monotonic_id] == "test_key"
    assert storage.get(address, monotonic_id) == value


def test_second_put_of_a_key_is_refused(storage: Any) -> None:
    """test_put_same_key_twice: ValueError "already exists in the storage",
    and the first value stays."""
    address, monotonic_id = storage.put("duplicate_key", "first value")
    assert storage.get(address, monotonic_id) == "first value"
    with pytest.raises(ValueError, match="already exists in the storage"):
        storage.put("duplicate_key", "second value")
    assert storage.get(address, monotonic_id) == "first value"
    assert len(storage.ring_buffer.metadata) == 1


def test_oversize_object_is_refused(storage: Any) -> None:
    """test_large_object_rejection: ValueError "exceeds max object size",
    nothing allocated."""
    with pytest.raises(ValueError, match="exceeds max object size"):
        storage.put("large_key", "x" * (storage.max_object_size + 100))
    assert storage.key_index == {} and len(storage.ring_buffer.metadata) == 0


def test_objects_read_by_every_reader_are_evicted_for_new_ones(storage: Any) -> None:
    """test_buffer_overflow_and_cleanup, with the eviction counted: fill the
    ring (MemoryError), read every object n_readers times through the
    writer, fill again (MemoryError again): every first-round object was
    evicted, and the second round's values fill at least 90% of the ring."""
    first = fill(storage, 0)
    for _key, value, address, monotonic_id in first:
        for _ in range(storage.n_readers):
            assert storage.get(address, monotonic_id) == value
    second = fill(storage, len(first))
    evicted = [key for key, *_ in first if not storage.is_cached(key)]
    assert evicted == [key for key, *_ in first]  # all of them
    assert sum(len(value) for _key, value, *_ in second) > 0.9 * RING_BYTES
    assert all(storage.is_cached(key) for key, *_ in second)
    for _key, value, address, monotonic_id in second:
        assert storage.get(address, monotonic_id) == value


def test_one_unread_object_blocks_eviction_until_read(storage: Any) -> None:
    """test_blocking_unread_object: all objects but the oldest read n_readers
    times; the next put must raise MemoryError (FIFO stops at the unread
    oldest); once it is read, at least 10 more objects fit."""
    first = fill(storage, 0)
    for _key, value, address, monotonic_id in first[1:]:
        for _ in range(storage.n_readers):
            assert storage.get(address, monotonic_id) == value
    with pytest.raises(MemoryError):
        storage.put(f"item_{len(first)}", item(len(first)))
    assert all(storage.is_cached(key) for key, *_ in first)
    _key, value, address, monotonic_id = first[0]
    for _ in range(storage.n_readers):
        assert storage.get(address, monotonic_id) == value
    second = fill(storage, len(first))
    assert len(second) >= 10
    assert not any(storage.is_cached(key) for key, *_ in first[: len(second) - 2])


def test_writer_counts_its_gets_only_with_the_readers_lock(
    impl: ModuleType, ring_factory: Any
) -> None:
    """FINDINGS #6, what the two tests above rely on: without the lock (vLLM's
    sender) the writer's gets are not reads, and nothing becomes reclaimable."""
    writer = impl.SingleWriterShmObjectStorage(MAX_OBJECT, N_READERS, ring_factory(RING_BYTES))
    first = fill(writer, 0)
    for _key, _value, address, monotonic_id in first:
        for _ in range(N_READERS):
            writer.get(address, monotonic_id)
    with pytest.raises(MemoryError):
        writer.put(f"item_{len(first)}", item(len(first)))
    assert all(writer.is_cached(key) for key, *_ in first)


def test_upstream_overflow_assertions_hold_without_eviction(
    impl: ModuleType, ring_factory: Any
) -> None:
    """Why test_buffer_overflow_and_cleanup does not depend on FINDINGS #6:
    its two count assertions, restated, also hold on a writer whose gets
    evict nothing (no lock), where the second round stores 0 objects."""
    writer = impl.SingleWriterShmObjectStorage(MAX_OBJECT, N_READERS, ring_factory(RING_BYTES))
    stored = fill(writer, 0)
    accessible = sum(writer.get(a, i) == v for _k, v, a, i in stored for _ in range(N_READERS))
    assert accessible == N_READERS * len(stored)  # upstream counts once per object
    accessible = len(stored)
    second = fill(writer, len(stored))
    stored += second
    accessible += sum(writer.get(a, i) == v for _k, v, a, i in stored)
    assert second == [] and accessible >= len(stored)  # passes with nothing evicted


def test_invalid_handles_on_the_writer(storage: Any) -> None:
    """test_invalid_get_operations: an address with no chunk, and a wrong id,
    raise ValueError (the latter "has been modified or is invalid")."""
    with pytest.raises(ValueError):
        storage.get(99999, 1)
    address, monotonic_id = storage.put("test", "value")
    with pytest.raises(ValueError, match=STALE_ERROR):
        storage.get(address, monotonic_id + 100)
    assert storage.get(address, monotonic_id) == "value"


def test_clear_storage_keeps_ids_increasing(storage: Any) -> None:
    """test_clear_storage: indexes empty after clear, and new puts work. The
    signature-era test expects the next put at (0, 5), as the seed and
    refimpl do; the pre-signature one expected (0, 0) (see
    test_clear_empties_the_ring_but_keeps_ids_increasing)."""
    for i in range(5):
        storage.put(f"item_{i}", f"value_{i}")
    storage.clear()
    assert len(storage.key_index) == len(storage.id_index) == 0
    assert len(storage.ring_buffer.metadata) == 0
    assert storage.put("new_item", "new_value") == (0, 5)
    assert "new_item" in storage.key_index


def test_resetting_ids_on_clear_lets_an_old_handle_read_a_new_object(
    impl: ModuleType, storage: Any, open_reader: Any
) -> None:
    """The harm that keeping ids prevents: if clear reset the id counter (as
    the pre-signature test wanted), a handle issued before the clear would
    name the first object put after it (same address, same id) and verify."""
    address, monotonic_id = storage.put("old", "value of old")
    signature = storage.get_signature("old")
    reader = open_reader(storage)
    storage.clear()
    assert storage.put("new", "value of new") == (0, 1)
    # stale: the address was reused under a new id
    with pytest.raises(ValueError, match=STALE_ERROR):
        reader.get(address, monotonic_id, signature, "old")
    ring = storage.ring_buffer
    storage.clear()
    ring.monotonic_id_start = ring.monotonic_id_end = 0  # what a resetting clear does
    assert storage.put("new2", "value of new2") == (address, monotonic_id)
    try:
        assert reader.get(address, monotonic_id, signature, "old") == "value of new2"  # harm
    except ValueError as exc:  # refimpl's fence (F4) rotated the secret before id 0 came back
        assert SIGNATURE_ERROR in str(exc)


def test_reader_get_and_touch_require_a_valid_signature(storage: Any, open_reader: Any) -> None:
    """test_reader_get_and_touch_each_require_valid_signature."""
    address, monotonic_id = storage.put("key", "value")
    signature = storage.get_signature("key")
    reader = open_reader(storage)
    reader.touch("key", address, monotonic_id, signature)
    assert reader.get(address, monotonic_id, signature, "key") == "value"
    flipped = [signature[0] ^ 1, *signature[1:]]
    for bad in (None, flipped, [signature], signature[:-1], [256] * 32):
        with pytest.raises(ValueError, match=SIGNATURE_ERROR):
            reader.get(address, monotonic_id, bad, "key")
        with pytest.raises(ValueError, match=SIGNATURE_ERROR):
            reader.touch("key", address, monotonic_id, bad)


def test_signature_is_bound_to_key_and_address(storage: Any, open_reader: Any) -> None:
    """test_signature_is_bound_to_key_and_address."""
    address, monotonic_id = storage.put("key", "value")
    signature = storage.get_signature("key")
    reader = open_reader(storage)
    for handle in (
        (address, monotonic_id, signature, "other_key"),
        (address + 1, monotonic_id, signature, "key"),
        (address, monotonic_id + 1, signature, "key"),
    ):
        with pytest.raises(ValueError, match=SIGNATURE_ERROR):
            reader.get(*handle)


def test_writer_rejects_a_handle_no_longer_indexed(storage: Any) -> None:
    """test_writer_rejects_handle_no_longer_in_key_index."""
    address, monotonic_id = storage.put("key", "value")
    signature = storage.get_signature("key")
    storage.verify_signature("key", address, monotonic_id, signature)
    storage.clear()
    with pytest.raises(ValueError, match=SIGNATURE_ERROR):
        storage.verify_signature("key", address, monotonic_id, signature)


def test_clear_revokes_old_handles_only_when_their_ids_come_back(
    storage: Any, open_reader: Any, is_refimpl: bool
) -> None:
    """F4: a clear keeps the secret (vLLM's test below), and leaves a fence at
    the oldest id it forgot; the put that issues that id again writes a new
    secret first, so a handle held back across the clear cannot name the new
    object (FINDINGS H3; spec/MCIdWrapFixed). Ids wrap at ID_MAX (4 here)."""
    if not is_refimpl:
        pytest.skip("pins refimpl's fence (F4); the seed has none")
    storage.ring_buffer.ID_MAX = 4
    address, monotonic_id = storage.put("key", "value")  # id 0
    signature = storage.get_signature("key")
    reader = open_reader(storage)
    storage.clear()  # fence at id 0
    assert reader.get(address, monotonic_id, signature, "key") == "value"  # draining
    for n in (1, 2, 3):
        storage.put(f"k{n}", "v")
        storage.clear()  # the fence at 0 stays: the counter reaches it first
    secret = storage.ring_buffer.get_auth_secret()
    assert storage.put("again", "value") == (address, monotonic_id)  # id 0 again, address 0
    assert storage.ring_buffer.get_auth_secret() != secret
    for call in (reader.get, lambda *h: reader.touch(h[3], *h[:3])):
        with pytest.raises(ValueError, match=SIGNATURE_ERROR):
            call(address, monotonic_id, signature, "key")
    signature = storage.get_signature("again")  # signed with the new secret
    assert reader.get(address, monotonic_id, signature, "again") == "value"


def test_handle_from_before_clear_reads_its_data_until_reused(
    storage: Any, open_reader: Any
) -> None:
    """test_handle_issued_before_clear_reads_own_data_until_reused: after a
    clear the old handle still reads its own object; once a put reuses the
    address, get and touch with it raise "modified or is invalid"."""
    address, monotonic_id = storage.put("key", "value")
    signature = storage.get_signature("key")
    reader = open_reader(storage)
    storage.clear()
    assert reader.get(address, monotonic_id, signature, "key") == "value"
    assert storage.put("key", "new_value")[0] == address
    with pytest.raises(ValueError, match=STALE_ERROR):
        reader.get(address, monotonic_id, signature, "key")
    with pytest.raises(ValueError, match=STALE_ERROR):
        reader.touch("key", address, monotonic_id, signature)


def test_spawned_readers_read_every_value(impl_name: str, storage: Any) -> None:
    """run_multiprocess_example, strict: readers in spawned processes, opened
    from the handle with a fresh lock, read every value; any failure fails."""
    values = {
        "user_data": {"name": "Alice", "age": 30, "scores": [95, 87, 92]},
        "simple_string": "Hello, World!",
        "number": 42,
        "list_data": [1, 2, 3, "four", 5.0],
    }
    handles = []
    for key, value in values.items():
        address, monotonic_id = storage.put(key, value)
        handles.append((address, monotonic_id, storage.get_signature(key), key))
    handle = dataclasses.replace(storage.handle(), reader_lock=mp.get_context("spawn").Lock())
    readers = [ReaderProcess(impl_name, handle) for _ in range(3)]
    try:
        for reader in readers:
            for h in handles:
                reader.send("get", *h)
        for reader in readers:
            assert [reader.receive() for _ in handles] == [("ok", v) for v in values.values()]
    finally:
        for reader in readers:
            reader.stop()
