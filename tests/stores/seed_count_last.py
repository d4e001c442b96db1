"""A store that behaves as the seed through the API and lays its objects out
its own way inside a chunk: `[serde metadata][serde data][4-byte read count]`
(the count LAST, big-endian), where the seed's object is
`[count][serde metadata][serde data]` (little-endian).

The ring is the seed's (chunk headers, secret, addresses and ids are its
documented ring API); the storage is the seed's class with the methods that
touch an object's bytes written anew here: `put` (where the count and the
serde's bytes go), `get` (what it deserializes and where it counts),
`default_is_free_check` (where it reads the count) and
`increment_reader_flag` (a count's 4-byte view, big-endian). It offers the
seed's optional pieces (`ring_buffer.access_buf`, `verify_signature`,
`increment_reader_flag`), so a checker that composed a read from them with
the seed's object layout would deserialize the wrong bytes and count into
the metadata. Object sizes are the seed's (4 + metadata + data), so every
address, id, eviction and exception is the seed's. No `shmref_read_count`
hook: its counts are judged through the API alone.

The oracle must give it the seed's verdict on every property outside the
seed-layout level (tests/oracle/test_layout_claim.py).
"""

from __future__ import annotations

from typing import Any

from shmref.seed.build import build_seed_module

_seed = build_seed_module()
SingleWriterShmRingBuffer = _seed.SingleWriterShmRingBuffer
ShmObjectStorageHandle = _seed.ShmObjectStorageHandle
MsgpackSerde = _seed.MsgpackSerde
ObjectSerde = _seed.ObjectSerde
COUNT = 4


def _count_of(view: memoryview) -> int:
    return int.from_bytes(view[-COUNT:], "big", signed=True)


class SingleWriterShmObjectStorage(_seed.SingleWriterShmObjectStorage):  # type: ignore[misc,name-defined]
    """The seed's storage with its objects laid out `[metadata][data][count]`."""

    def put(self, key: str, value: Any) -> tuple[int, int]:
        if key in self.key_index:
            raise ValueError(f"Key '{key}' already exists in the storage.")
        data, data_bytes, metadata, md_bytes = self.ser_de.serialize(value)
        size = COUNT + data_bytes + md_bytes
        if size > self.max_object_size:
            raise ValueError(
                f"Serialized object size ({size} bytes) exceeds "
                f"max object size ({self.max_object_size} bytes)"
            )
        try:
            address, monotonic_id = self.ring_buffer.allocate_buf(size)
        except MemoryError:
            self.free_unused()
            address, monotonic_id = self.ring_buffer.allocate_buf(size)
        with self.ring_buffer.access_buf(address) as (view, _header):
            view[:md_bytes] = metadata
            at = md_bytes
            for part in data if isinstance(data, list) else [data]:
                view[at : at + len(part)] = part
                at += len(part)
            view[-COUNT:] = (0).to_bytes(COUNT, "big", signed=True)
        self.increment_writer_flag(monotonic_id)
        self.key_index[key] = (address, monotonic_id)
        self.id_index[monotonic_id] = key
        return address, monotonic_id

    def get(
        self,
        address: int,
        monotonic_id: int,
        signature: list[int] | None = None,
        key: str | None = None,
    ) -> Any:
        if not self.is_writer:
            self.verify_signature(key, address, monotonic_id, signature)
        with self.ring_buffer.access_buf(address) as (view, header):
            if header[0] != monotonic_id:
                raise ValueError(
                    f"Data for address:id '{address}:{monotonic_id}'"
                    " has been modified or is invalid."
                )
            value = self.ser_de.deserialize(view[:-COUNT])
            if self._reader_lock is not None:
                with self._reader_lock:
                    self.increment_reader_flag(view[-COUNT:])
        return value

    def increment_reader_flag(self, data_view: memoryview) -> None:
        """One more read, in a count's 4-byte view (big-endian)."""
        count = int.from_bytes(data_view, "big", signed=True)
        data_view[:] = (count + 1).to_bytes(COUNT, "big", signed=True)

    def default_is_free_check(self, id: int, buf: memoryview) -> bool:
        if id in self._touched:
            return False
        return bool(_count_of(buf) >= self.writer_flag[id] * self.n_readers)

    @staticmethod
    def create_from_handle(handle: Any) -> SingleWriterShmObjectStorage:
        ring = SingleWriterShmRingBuffer(*handle.ring_buffer_handle)
        return SingleWriterShmObjectStorage(
            max_object_size=handle.max_object_size,
            n_readers=handle.n_readers,
            ring_buffer=ring,
            serde_class=handle.serde_class,
            reader_lock=handle.reader_lock,
        )
