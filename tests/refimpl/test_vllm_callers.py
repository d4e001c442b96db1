"""What vLLM's callers rely on: the sender and receiver caches of its
multimodal processor cache (`vllm/multimodal/cache`, read for facts only).

- Sender (P0): a writer ring created under a name, a storage with
  `n_readers=world_size`, vLLM's own `serde_class` and NO reader lock. It
  calls `is_cached`, `get_cached`, `put` (catching only `ValueError`, told
  apart by "already exists", and `MemoryError`), `get_signature`, `touch(key)`,
  `release_touches`, reads `key_index` (its length and keys), `clear`, `close`.
- Receivers (one per worker): the same ring name and size with
  `create=False`, built directly (not from a handle) with the shared worker
  lock. They call `get(address, id, signature, key)`,
  `touch(key, address=..., monotonic_id=..., signature=...)` and `clear`.

Every test uses a caller-supplied serde that is not msgpack (`PickleSerde`:
pickle protocol 5 with out-of-band buffers, data as a list of byte parts),
passed through `serde_class=` and the handle, as vLLM passes its own.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import pickle
import struct
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from types import ModuleType
from typing import Any

import pytest

import refimpl
from refimpl.serde import ObjectSerde
from shmref.store.readers import ReaderProcess

WORLD_SIZE = 2
RING_BYTES = 16 * 1024
MAX_OBJECT = 2 * 1024


class PickleSerde(ObjectSerde):
    """A caller's serde: pickle 5, out-of-band buffers as separate byte parts.
    Metadata: the part count and lengths; data: [pickle stream, *buffers]."""

    def serialize(self, value: Any) -> tuple[Any, int, bytes, int]:
        buffers: list[pickle.PickleBuffer] = []
        stream = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
        parts = [stream, *(buffer.raw() for buffer in buffers)]
        lengths = [len(part) for part in parts]
        metadata = struct.pack(f"<I{len(parts)}Q", len(parts), *lengths)
        return parts, sum(lengths), metadata, len(metadata)

    def deserialize(self, data: memoryview) -> Any:
        (count,) = struct.unpack_from("<I", data)
        lengths = struct.unpack_from(f"<{count}Q", data, 4)
        position, parts = 4 + 8 * count, []
        for length in lengths:
            parts.append(bytes(data[position : position + length]))
            position += length
        if position != len(data):
            raise ValueError(f"object has {len(data) - position} bytes after its parts")
        return pickle.loads(parts[0], buffers=parts[1:])


@dataclasses.dataclass
class Features:
    """A value msgpack could not store: a dataclass with a tuple, a set, a
    bytearray (sent out of band) and an int beyond 64 bits."""

    shape: tuple[int, ...]
    tags: set[str]
    pixels: bytearray
    seed: int

    def __reduce_ex__(self, protocol: Any) -> Any:
        """With protocol 5 the pixels travel out of band (a separate byte part),
        as tensors do; older protocols (multiprocessing's queues) copy them."""
        pixels = pickle.PickleBuffer(self.pixels) if protocol >= 5 else bytes(self.pixels)
        return _rebuild, (self.shape, self.tags, pixels, self.seed)


def _rebuild(shape: tuple[int, ...], tags: set[str], pixels: Any, seed: int) -> Features:
    return Features(shape, tags, bytearray(pixels), seed)


def features(n: int) -> Features:
    return Features((n, 3), {f"t{n}", "img"}, bytearray([n % 256]) * 300, 2**70 + n)


class Deployment:
    """One sender and WORLD_SIZE receivers on a named segment, built as vLLM builds them."""

    def __init__(self, impl: ModuleType, resources: ExitStack, name: str) -> None:
        self.impl = impl
        ring = impl.SingleWriterShmRingBuffer(RING_BYTES, name=name, create=True)
        resources.callback(ring.close)
        self.sender = impl.SingleWriterShmObjectStorage(
            max_object_size=MAX_OBJECT,
            n_readers=WORLD_SIZE,
            ring_buffer=ring,
            serde_class=PickleSerde,
        )
        self.lock = mp.get_context("spawn").Lock()
        self.receivers = []
        for _ in range(WORLD_SIZE):
            reader_ring = impl.SingleWriterShmRingBuffer(RING_BYTES, name=name, create=False)
            resources.callback(reader_ring.close)
            self.receivers.append(
                impl.SingleWriterShmObjectStorage(
                    max_object_size=MAX_OBJECT,
                    n_readers=WORLD_SIZE,
                    ring_buffer=reader_ring,
                    serde_class=PickleSerde,
                    reader_lock=self.lock,
                )
            )

    def send(self, key: str, value: Any) -> tuple[int, int, list[int], str]:
        """The sender's miss path: put, then a signed handle."""
        address, monotonic_id = self.sender.put(key, value)
        return address, monotonic_id, self.sender.get_signature(key), key

    def hit(self, key: str) -> tuple[int, int, list[int], str]:
        """The sender's hit path: hand the cached object out once more."""
        assert self.sender.is_cached(key)
        address, monotonic_id = self.sender.get_cached(key)
        return address, monotonic_id, self.sender.get_signature(key), key

    def receive(self, handle: tuple[int, int, list[int], str]) -> list[Any]:
        return [receiver.get(*handle) for receiver in self.receivers]


@pytest.fixture
def deployment(impl: ModuleType) -> Iterator[Deployment]:
    with ExitStack() as resources:
        yield Deployment(impl, resources, f"shmref_test_{uuid.uuid4().hex[:12]}")


def test_caller_serde_values_reach_every_receiver(deployment: Deployment) -> None:
    """put with the caller's serde (a list of byte parts); each receiver's
    get returns an equal value, tuple, set and big int intact."""
    handles = [deployment.send(f"mm{n}", features(n)) for n in range(4)]
    for n, handle in enumerate(handles):
        assert deployment.receive(handle) == [features(n)] * WORLD_SIZE


def test_default_serde_stores_what_the_callers_serde_stores(impl: ModuleType) -> None:
    """The default serde is the releases' (it pickles what vLLM's encoder does
    not take); the msgpack-only serde refuses the caller's object by name."""
    data, data_bytes, metadata, md_bytes = impl.MsgpackSerde().serialize(features(1))
    assert impl.MsgpackSerde().deserialize(memoryview(metadata + data)) == features(1)
    with pytest.raises(TypeError, match="cannot store a Features"):
        refimpl.MsgpackOnlySerde().serialize(features(1))
    data, data_bytes, metadata, md_bytes = PickleSerde().serialize(features(1))
    assert isinstance(data, list) and len(data) == 2  # the bytearray went out of band
    assert data_bytes == sum(len(part) for part in data) and md_bytes == len(metadata)


def test_a_value_read_by_every_receiver_is_evicted(deployment: Deployment) -> None:
    """Production accounting: the lockless sender never reads; an object is
    reclaimed once all world_size receivers read it, and not before."""
    first = deployment.send("first", features(0))
    deployment.receivers[0].get(*first)  # one of two reads
    added = 0
    with pytest.raises(MemoryError):  # full: "first" owes a read and blocks FIFO
        for n in range(1, 100):
            deployment.send(f"mm{n}", features(n))
            added += 1
    assert deployment.sender.is_cached("first") and added > 0
    deployment.receivers[1].get(*first)
    for n in range(1, added + 1):
        deployment.receive(deployment.hit(f"mm{n}"))  # a hit: one more read each
    with pytest.raises(MemoryError):  # mm1 owes the hit's reads: only "first" goes
        for n in range(added + 1, 100):
            deployment.send(f"mm{n}", features(n))
    assert not deployment.sender.is_cached("first")
    assert "first" not in deployment.sender.key_index.keys()  # vLLM's dangling check


def test_cache_hit_owes_one_more_read_per_receiver(deployment: Deployment) -> None:
    handle = deployment.send("mm", features(1))
    deployment.receive(handle)
    assert deployment.hit("mm")[:2] == handle[:2]  # same object, handed out again
    deployment.sender.free_unused()
    assert deployment.sender.is_cached("mm")  # the second hand-out is unread
    deployment.receive(handle)
    deployment.sender.free_unused()
    assert not deployment.sender.is_cached("mm")


def test_put_failures_are_the_two_exceptions_the_sender_catches(
    deployment: Deployment,
) -> None:
    """Duplicate key: ValueError with "already exists"; oversize: a
    ValueError without it; full: MemoryError."""
    deployment.send("mm", features(1))
    with pytest.raises(ValueError, match="already exists"):
        deployment.sender.put("mm", features(2))
    with pytest.raises(ValueError) as oversize:
        deployment.sender.put("big", b"x" * MAX_OBJECT)
    assert "already exists" not in str(oversize.value)
    with pytest.raises(MemoryError):
        for n in range(100):
            deployment.sender.put(f"fill{n}", features(n))
    assert len(deployment.sender.key_index) < 100


def test_sender_touch_protects_until_looked_up_or_released(deployment: Deployment) -> None:
    handle = deployment.send("mm", features(1))
    deployment.receive(handle)  # fully read: reclaimable
    deployment.sender.touch("mm")
    deployment.sender.touch("never-put")  # unknown keys are ignored
    deployment.sender.free_unused()
    assert deployment.sender.is_cached("mm")
    deployment.sender.release_touches()
    deployment.sender.free_unused()
    assert not deployment.sender.is_cached("mm")
    deployment.receive(deployment.send("mm2", features(2)))
    deployment.sender.touch("mm2")
    deployment.receive(deployment.hit("mm2"))  # a lookup ends the protection
    deployment.sender.free_unused()
    assert not deployment.sender.is_cached("mm2")


def test_receiver_touch_validates_the_handle(deployment: Deployment) -> None:
    """Receivers touch by keyword; a forged or stale handle is a ValueError."""
    address, monotonic_id, signature, key = deployment.send("mm", features(1))
    receiver = deployment.receivers[0]
    receiver.touch(key, address=address, monotonic_id=monotonic_id, signature=signature)
    with pytest.raises(ValueError, match="signature"):
        receiver.touch("other", address=address, monotonic_id=monotonic_id, signature=signature)
    deployment.receive((address, monotonic_id, signature, key))
    deployment.sender.clear()
    deployment.send("new", features(2))  # reuses the address
    # stale: the address was reused under a new id (the secret stays across a clear)
    with pytest.raises(ValueError, match="modified or is invalid"):
        receiver.touch(key, address=address, monotonic_id=monotonic_id, signature=signature)


def test_clear_on_sender_and_receivers(deployment: Deployment) -> None:
    """reset_mm_cache: the sender forgets everything; a receiver's clear does nothing."""
    handles = [deployment.send(f"mm{n}", features(n)) for n in range(3)]
    for receiver in deployment.receivers:
        receiver.clear()
    assert deployment.receive(handles[0]) == [features(0)] * WORLD_SIZE
    deployment.sender.clear()
    assert len(deployment.sender.key_index) == 0
    assert not any(deployment.sender.is_cached(f"mm{n}") for n in range(3))
    handle = deployment.send("mm0", features(9))  # the same key can be put again
    assert deployment.receive(handle) == [features(9)] * WORLD_SIZE


def test_a_restarted_sender_recreates_the_named_segment(impl: ModuleType) -> None:
    """close() unlinks the named segment, so the next engine can create it."""
    name = f"shmref_test_{uuid.uuid4().hex[:12]}"
    for attempt in range(2):
        with ExitStack() as resources:
            deployment = Deployment(impl, resources, name)
            handle = deployment.send("mm", features(attempt))
            assert deployment.receive(handle) == [features(attempt)] * WORLD_SIZE


def test_caller_serde_travels_with_the_handle_to_spawned_readers(
    impl_name: str, deployment: Deployment
) -> None:
    """create_from_handle in another process gets the caller's serde class;
    a reader that fails fails the test."""
    handles = [deployment.send(f"mm{n}", features(n)) for n in range(3)]
    storage_handle = dataclasses.replace(deployment.sender.handle(), reader_lock=deployment.lock)
    assert storage_handle.serde_class is PickleSerde
    reader = ReaderProcess(impl_name, storage_handle)
    try:
        for handle in handles:
            assert reader.call("get", *handle) == ("ok", features(handles.index(handle)))
        forged = (*handles[0][:2], [0] * 32, handles[0][3])
        assert reader.call("get", *forged)[0] == "ValueError"
    finally:
        reader.stop()
