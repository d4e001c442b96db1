"""The object store: puts, signed handles, counting and reclamation (its
bad input: test_storage_bad_input.py; readers in other processes and
threads: test_storage_readers.py).

Only the contract (shmref.contract) is used: handles come from what put
returns, counts show in what free_unused reclaims (is_cached). Only the
seed-layout test reads the segment's bytes (shmref.store.observe). The writer is
built as vLLM builds it, without a reader lock; readers get one through the
handle."""

from __future__ import annotations

from typing import Any

import pytest

from shmref.contract import require_bytes_values
from shmref.store.readers import close_despite_cycles
from shmref.suite.serde_values import full_size, read_back, serde_of, sized, stores
from shmref.suite.stores import handle_of


def test_put_then_get_roundtrip_types(store_factory, attach):
    """A reader gets back what the store's serde gives back, for each value
    that serde stores."""
    writer = store_factory()
    reader = attach(writer)
    serde = serde_of(writer)
    every = {
        "int": 7,
        "str": "héllo",
        "bytes": b"\x00\xff",
        "list": [1, [2, 3]],
        "dict": {"a": 1, 2: "b"},
        "none": None,
        "float": 1.5,
        "bool": True,
    }
    values = {key: value for key, value in every.items() if stores(serde, value)}
    assert values, f"{type(serde).__name__} stores none of {list(every.values())}"
    for key, value in values.items():
        writer.put(key, value)
    for key, value in values.items():
        assert reader.get(*handle_of(writer, key)) == read_back(serde, value)


def test_object_layout_in_segment(store_factory):
    """Seed-layout: the chunk `[id][size][count 0][serde metadata][data]`,
    little-endian, at the address put returned (read from the segment)."""
    writer = store_factory()
    address, monotonic_id = writer.put("k", "payload")
    raw = writer.segment().data()[address : address + 64]
    chunk_size = int.from_bytes(raw[4:8], "little")
    obj = raw[8:chunk_size]
    assert int.from_bytes(raw[:4], "little") == monotonic_id
    assert obj[:4] == b"\x00\x00\x00\x00"  # reference count starts at 0
    data, data_bytes, metadata, md_bytes = writer.handle().serde_class().serialize("payload")
    body = b"".join(bytes(d) for d in data) if isinstance(data, list) else bytes(data)
    assert obj[4:] == bytes(metadata) + body and chunk_size == 8 + 4 + md_bytes + data_bytes


def test_duplicate_key_is_rejected_and_index_kept(store_factory):
    writer = store_factory()
    first = writer.put("k", 1)
    with pytest.raises(ValueError, match="already exists"):
        writer.put("k", 2)
    assert writer.is_cached("k") and writer.get(*first) == 1


@pytest.mark.parametrize(("key", "other"), [(b"k", b"j"), (1, 2)])
def test_a_key_of_another_type_is_refused_or_kept_as_given(store_factory, key, other):
    """A key that is not a str is refused (refimpl), or kept as the key it
    is (the seed keeps any hashable key): then a second put of it is
    refused and a put of another key of its type is not. Behind the process
    protocol bytes arrive with their value (docs/protocol.md, Values), so a
    program that keeps them tells b"k" from b"j" as the seed does (from
    version 2 of the protocol: a program of version 1 is sent no value, and
    the bytes case is not run)."""
    writer = store_factory()
    if isinstance(key, bytes):
        require_bytes_values(writer.storage)
    try:
        writer.put(key, 1)
    except (ValueError, TypeError):
        return
    with pytest.raises(ValueError, match="already exists"):
        writer.put(key, 2)
    writer.put(other, 3)
    assert writer.is_cached(key) and writer.is_cached(other)


def test_reads_count_and_reclaim_fifo(store_factory, attach):
    writer = store_factory(n_readers=2)
    readers = [attach(writer), attach(writer)]
    for key in "abc":
        writer.put(key, key * 10)
    for reader in readers:
        reader.get(*handle_of(writer, "a"))
    readers[0].get(*handle_of(writer, "c"))
    writer.free_unused()
    assert not writer.is_cached("a") and writer.is_cached("b")  # b blocks c
    for reader in readers:
        reader.get(*handle_of(writer, "b"))
    readers[1].get(*handle_of(writer, "c"))
    writer.free_unused()
    assert not any(writer.is_cached(k) for k in "abc")


def test_get_cached_owes_another_read_per_reader(store_factory, attach):
    writer = store_factory(n_readers=1)
    reader = attach(writer)
    writer.put("k", 1)
    reader.get(*handle_of(writer, "k"))
    writer.get_cached("k")
    writer.free_unused()
    assert writer.is_cached("k")  # one read of two
    reader.get(*handle_of(writer, "k"))
    writer.free_unused()
    assert not writer.is_cached("k")


def test_touch_protects_until_looked_up_or_released(store_factory, attach):
    writer = store_factory(n_readers=1)
    reader = attach(writer)
    writer.put("k", 1)
    reader.get(*handle_of(writer, "k"))
    writer.touch("k")
    writer.touch("absent")  # ignored, as in the seed
    writer.free_unused()
    assert writer.is_cached("k")
    writer.release_touches()
    writer.free_unused()
    assert not writer.is_cached("k")


def test_get_cached_ends_a_touch(store_factory, attach):
    """The lookup a touch waits for ends its protection: the item is then
    reclaimed once its reads are done, with no release_touches."""
    writer = store_factory(n_readers=1)
    reader = attach(writer)
    writer.put("k", 1)
    reader.get(*handle_of(writer, "k"))
    writer.touch("k")
    writer.get_cached("k")
    reader.get(*handle_of(writer, "k"))
    writer.free_unused()
    assert not writer.is_cached("k")


def test_a_closed_writer_serves_nothing(store_factory):
    """After close() the writer no longer holds its segment: a get or a put
    raises (which exception, and its message, is the hardened level's)."""
    writer = store_factory()
    handle = writer.put("k", 1)
    writer.close()
    for call in (lambda: writer.get(*handle), lambda: writer.put("j", 1)):
        with pytest.raises(Exception):  # noqa: B017 - any refusal; not a value
            call()


def test_put_frees_oldest_when_full(store_factory, attach):
    writer = store_factory(buffer_size=256, max_object_size=64, n_readers=1)
    reader = attach(writer)
    keys = []
    value = sized(serde_of(writer), 45)
    for i in range(40):
        key = f"k{i}"
        writer.put(key, value)
        keys.append(key)
        reader.get(*handle_of(writer, key))
    assert writer.is_cached("k39") and not writer.is_cached("k0")


def test_free_unused_frees_two_full_size_objects(store_factory, attach):
    """free_unused stops once it has freed room for two objects of
    max_object_size (the seed's target, 2 * max_object_size bytes; refimpl's
    fixed one, two chunks' worth): of four read full-size objects, the two
    oldest go and the two newest stay (not three, as a larger target would)."""
    probe = store_factory()
    max_size, value = full_size(serde_of(probe), 200)
    writer = store_factory(buffer_size=8 * max_size, max_object_size=max_size, n_readers=1)
    reader = attach(writer)
    keys = [f"k{i}" for i in range(4)]
    for key in keys:
        writer.put(key, value)
        reader.get(*handle_of(writer, key))
    writer.free_unused()
    assert [writer.is_cached(key) for key in keys] == [False, False, True, True]


def test_put_raises_memory_error_when_all_busy(store_factory):
    writer = store_factory(buffer_size=256, max_object_size=64, n_readers=1)
    value = sized(serde_of(writer), 45)
    with pytest.raises(MemoryError):
        for i in range(40):
            writer.put(f"k{i}", value)
    cached = sum(writer.is_cached(f"k{i}") for i in range(40))
    assert cached > 0
    if hasattr(writer.ring, "monotonic_id_end"):  # no chunk outside the index
        assert writer.ring.monotonic_id_end - writer.ring.monotonic_id_start == cached


def test_reader_touch_validates_handle(store_factory, attach):
    writer = store_factory()
    reader = attach(writer)
    writer.put("k", 1)
    reader.touch("k", *handle_of(writer, "k")[:3])
    address, monotonic_id, signature, _ = handle_of(writer, "k")
    with pytest.raises(ValueError):
        reader.touch("other", address, monotonic_id, signature)


def test_stale_handle_after_reuse_is_rejected(store_factory, attach):
    writer = store_factory(buffer_size=128, max_object_size=60, n_readers=1)
    reader = attach(writer)
    writer.put("old", sized(serde_of(writer), 45, "o"))
    old = handle_of(writer, "old")
    reader.get(*old)
    writer.free_unused()
    writer.put("new", sized(serde_of(writer), 45, "n"))  # at address 0 again, new id
    assert writer.placed["new"][0] % 128 == old[0] % 128
    with pytest.raises(ValueError, match="modified or is invalid"):
        reader.get(*old)


def test_clear_then_old_handles_fail(store_factory, attach):
    writer = store_factory()
    reader = attach(writer)
    writer.put("k", 1)
    old = handle_of(writer, "k")
    writer.clear()
    assert not writer.is_cached("k")
    writer.put("j", 2)
    with pytest.raises(ValueError):
        reader.get(*old)


def test_clear_forgets_hand_out_counts(store_factory, attach):
    """After clear() an id issued again (the ids run on across a clear and
    wrap) owes one read per hand-out since the clear, not the ones before:
    read once by the one reader, its object is reclaimed."""
    writer = store_factory(n_readers=1, id_max=4)
    reader = attach(writer)
    writer.put("before", 0)  # id 0, handed out once, never read
    writer.clear()
    each_id_after_a_clear_is_reclaimed_once_read(writer, reader)


def test_clear_forgets_touches(store_factory, attach):
    """After clear() a touch from before it protects nothing: the id it named,
    issued again after the ids wrap, is reclaimed once read."""
    writer = store_factory(n_readers=1, id_max=4)
    reader = attach(writer)
    writer.put("before", 0)  # id 0
    writer.touch("before")
    writer.clear()
    each_id_after_a_clear_is_reclaimed_once_read(writer, reader)


def each_id_after_a_clear_is_reclaimed_once_read(writer: Any, reader: Any) -> None:
    """Ids 1, 2, 3 and then 0 again (id_max 4): each read once, then reclaimed."""
    for n in range(1, 5):  # ids 1, 2, 3, then 0 again
        key = f"k{n}"
        writer.put(key, n)
        assert reader.get(*handle_of(writer, key)) == n
        writer.free_unused()
        assert not writer.is_cached(key), f"{key} (id {writer.placed[key][1]}) not reclaimed"


def test_lockless_writer_get_does_not_count(store_factory):
    """vLLM's sender has no reader lock: its own reads are no reader's."""
    writer = store_factory(n_readers=1)
    address, monotonic_id = writer.put("k", 1)
    assert writer.get(address, monotonic_id) == 1
    writer.free_unused()
    assert writer.is_cached("k")


def test_writer_with_lock_counts_its_gets_as_the_seed(store_factory, reader_lock):
    """FINDINGS #6: with the readers' lock, a writer's get is one read (as in
    the seed; vLLM's tests make objects reclaimable that way)."""
    writer = store_factory(n_readers=2, lock=reader_lock)
    address, monotonic_id = writer.put("k", 1)
    assert writer.get(address, monotonic_id) == 1
    writer.free_unused()
    assert writer.is_cached("k")  # one read of two
    assert writer.get(address, monotonic_id) == 1
    writer.free_unused()
    assert not writer.is_cached("k")


def test_lock_is_required_for_readers(impl, store_factory):
    writer = store_factory()
    ring = impl.SingleWriterShmRingBuffer(*writer.ring.handle())
    try:
        with pytest.raises(ValueError, match="Lock must be provided"):
            impl.SingleWriterShmObjectStorage(256, 1, ring)
    finally:
        ring.close()


def test_signatures_interoperate_across_instances(store_factory, attach):
    """The signature is the documented HMAC, keyed by the ring's secret
    (get_auth_secret), and a reader attached by handle accepts it."""
    writer = store_factory()
    reader = attach(writer)
    writer.put("k", "v")
    address, monotonic_id, signature, key = handle_of(writer, "k")
    import hashlib
    import hmac

    message = (
        hashlib.sha256(b"k").digest()
        + address.to_bytes(8, "little")
        + monotonic_id.to_bytes(4, "little")
    )
    expected = hmac.new(writer.ring.get_auth_secret(), message, hashlib.sha256)
    assert bytes(signature) == expected.digest()
    writer.verify_signature(key, address, monotonic_id, signature)
    reader.verify_signature(key, address, monotonic_id, signature)


class PartsSerde:
    """A serde that hands the store its payload in three parts (the contract
    allows a list of bytes-likes, as vLLM's serde does for tensors); reads
    back the whole chunk, metadata first."""

    def serialize(self, value):
        parts = [value[:2], value[2:4], value[4:]]
        return parts, len(value), b"\x07", 1

    def deserialize(self, data):
        return bytes(data)


def test_a_payload_in_parts_is_stored_in_order(store_factory, attach):
    """The parts of a payload follow each other in the chunk, in order."""
    writer = store_factory(serde=PartsSerde)
    reader = attach(writer)
    writer.put("k", b"abcdef")
    assert reader.get(*handle_of(writer, "k")) == b"\x07abcdef"


@pytest.mark.parametrize("signature", [["1"] * 32, [1.0] * 32, [None] * 32])
def test_a_signature_of_non_ints_is_a_value_error(store_factory, attach, signature):
    """The seed's reader checks that a signature is 32 ints in 0..255 and
    raises ValueError otherwise, before comparing anything."""
    writer = store_factory()
    reader = attach(writer)
    writer.put("k", "v")
    address, monotonic_id, _signature, key = handle_of(writer, "k")
    with pytest.raises(ValueError):
        reader.get(address, monotonic_id, signature, key)


@pytest.mark.parametrize("form", [tuple, bytes], ids=["tuple", "bytes"])
def test_a_correct_signature_of_another_type_is_refused(store_factory, attach, form):
    """The seed checks a signature's type before its bytes: the right 32
    values as a tuple or as bytes (not the list get_signature gives) are a
    ValueError in get, touch and verify_signature, on a reader and on the
    writer."""
    writer = store_factory()
    reader = attach(writer)
    writer.put("k", "v")
    address, monotonic_id, signature, key = handle_of(writer, "k")
    other = form(signature)
    for call in (
        lambda: reader.get(address, monotonic_id, other, key),
        lambda: reader.touch(key, address, monotonic_id, other),
        lambda: reader.verify_signature(key, address, monotonic_id, other),
        lambda: writer.verify_signature(key, address, monotonic_id, other),
    ):
        with pytest.raises(ValueError):
            call()
    assert reader.get(address, monotonic_id, signature, key) == "v"  # the list is the handle


def test_a_reader_made_from_the_writers_own_handle_reads(impl, store_factory, reader_lock):
    """vLLM's tests attach readers with the handle of a writer made with the
    readers' lock, as it is: handle() carries that lock, so such a reader
    reads what the writer put and its read counts."""
    writer = store_factory(n_readers=1, lock=reader_lock)
    writer.put("k", "v")
    reader = impl.SingleWriterShmObjectStorage.create_from_handle(writer.storage.handle())
    try:
        assert reader.get(*handle_of(writer, "k")) == "v"
        writer.free_unused()
        assert not writer.is_cached("k")
    finally:
        close_despite_cycles(reader.close)


def test_writer_refuses_the_handle_of_a_reclaimed_object(store_factory, attach):
    """The writer checks a handle against its key index as well as the HMAC:
    once the object is reclaimed its handle is refused, though its signature
    is still the ring's HMAC of it."""
    writer = store_factory(n_readers=1)
    reader = attach(writer)
    writer.put("k", "v")
    address, monotonic_id, signature, key = handle_of(writer, "k")
    writer.verify_signature(key, address, monotonic_id, signature)
    assert reader.get(address, monotonic_id, signature, key) == "v"
    writer.free_unused()
    assert not writer.is_cached("k")
    with pytest.raises(ValueError):
        writer.verify_signature(key, address, monotonic_id, signature)
