"""`SingleWriterShmObjectStorage`: a key -> object store on the shared ring.

Object layout inside a chunk: ``[4-byte reference count][metadata][payload]``.
The writer puts objects and hands out signed handles
``(key, address, monotonic_id, signature)``; readers in other processes
verify a handle, copy the object and then add one to its count under a
shared lock. The writer reclaims an object (oldest first) once its count
reaches ``writer_count * n_readers``, where ``writer_count`` is how many
times the writer handed the object out, and no `touch` protects it.

As in the seed, what a `get` or `touch` does is decided by whether the
storage holds the readers' lock, not by `is_writer`: a writer built with the
lock (as vLLM's tests build it, and as `handle()` needs) counts its own gets
as reads and validates handles in `touch` (FINDINGS #6).

Each method is one action of ``spec/ShmObjectStorage.tla``; a read is three
(`get_begin`, `get_copy`, `get_end`) so that tests can interleave the writer
between them, exactly as the model checker does.
"""

from __future__ import annotations

import hmac
import struct
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from multiprocessing.synchronize import Lock as LockType
from typing import Any

from refimpl.handle import HANDLE_FIELDS, ShmObjectStorageHandle, sign
from refimpl.readerlock import READER_LOCK_TIMEOUT, hold
from refimpl.ring import SingleWriterShmRingBuffer
from refimpl.serde import MsgpackSerde, ObjectSerde, byte_parts
from refimpl.validate import (
    MAX_CHUNK_DATA,
    check_fields,
    check_handle_fields,
    check_instance,
    check_int,
    check_key,
    signature_bytes,
)

__all__ = ["Read", "ShmObjectStorageHandle", "SingleWriterShmObjectStorage"]

COUNT = struct.Struct("<i")  # an object's reader count: 4 bytes, little-endian, signed


@dataclass(slots=True)
class Read:
    """One reader's read in flight, between `get_begin` and `get_end`."""

    address: int
    monotonic_id: int
    size: int
    view: memoryview  # the chunk's data, from the ring's chunk_view
    value: Any = None
    error: BaseException | None = None
    copied: bool = False

    def close(self) -> None:
        """Release the view of the segment (idempotent)."""
        self.view.release()


class SingleWriterShmObjectStorage:
    """Single-writer, multi-reader object store with FIFO eviction.

    Built on a ring: on the writer's ring it is the writer, which puts; a
    reader's comes from `create_from_handle` and needs the readers'
    `reader_lock`. `n_readers` is how many reads each hand-out owes before
    its object may be reclaimed; `serde_class()` turns values into bytes.
    """

    READER_LOCK_TIMEOUT: float | None = READER_LOCK_TIMEOUT  # see refimpl.readerlock

    def __init__(
        self,
        max_object_size: int,
        n_readers: int,
        ring_buffer: SingleWriterShmRingBuffer,
        serde_class: type[ObjectSerde] = MsgpackSerde,
        reader_lock: LockType | None = None,
    ) -> None:
        self.max_object_size = check_int(
            "max_object_size", max_object_size, low=1, high=MAX_CHUNK_DATA
        )
        self.n_readers = check_int("n_readers", n_readers, low=0, high=2**31 - 1)
        self.serde_class = serde_class
        self.ser_de = serde_class()
        self.ring_buffer = ring_buffer
        self.is_writer = ring_buffer.is_writer
        self.flag_bytes = 4
        if self.is_writer:
            self.key_index: dict[str, tuple[int, int]] = {}  # key -> (address, id)
            self.id_index: dict[int, str] = {}  # id -> key
            self.writer_flag: dict[int, int] = {}  # id -> times handed out
            self._touched: set[int] = set()  # ids protected until looked up
        elif reader_lock is None:
            raise ValueError("Lock must be provided for readers.")
        self._reader_lock = reader_lock

    # -- writer actions --------------------------------------------------------

    def put(self, key: str, value: Any) -> tuple[int, int]:
        """Store `value` under a new `key`; returns (address, monotonic_id).

        Everything that can fail is checked before the chunk is allocated, so
        a failed put leaves the store as it was (apart from reclaimed space).
        Raises ValueError (key exists, object too large, unserializable) or
        MemoryError (no room even after reclaiming).
        """
        self._require_writer("put")
        check_key(key)
        if key in self.key_index:
            raise ValueError(f"Key '{key}' already exists in the storage.")
        data, data_bytes, metadata, md_bytes = self.ser_de.serialize(value)
        parts = byte_parts(metadata, data, md_bytes, data_bytes)
        size = self.flag_bytes + md_bytes + data_bytes
        if size > self.max_object_size:
            raise ValueError(
                f"Serialized object size ({size} bytes) exceeds "
                f"max object size ({self.max_object_size} bytes)"
            )
        if size + self.ring_buffer.MD_SIZE > self.ring_buffer.data_buffer_size:
            # Reclaiming cannot help: refuse before evicting anything (FINDINGS #19).
            raise MemoryError(
                f"an object of {size} bytes never fits in a ring of "
                f"{self.ring_buffer.data_buffer_size} bytes"
            )
        with self._writer_lock():  # no reader's re-check + increment in between
            try:
                address, monotonic_id = self.ring_buffer.allocate_buf(size)
            except MemoryError:
                self._free_unused_locked()
                address, monotonic_id = self.ring_buffer.allocate_buf(size)
            view, _ = self.ring_buffer.chunk_view(address)
            with view:  # one copy of each part into the segment, after a zero count
                COUNT.pack_into(view, 0, 0)
                position = self.flag_bytes
                for part in parts:
                    end = position + len(part)
                    view[position:end] = part
                    position = end
        self.increment_writer_flag(monotonic_id)
        self.key_index[key] = (address, monotonic_id)
        self.id_index[monotonic_id] = key
        return address, monotonic_id

    def get_cached(self, key: str) -> tuple[int, int]:
        """Hand out `key`'s object once more: one more read per reader is owed."""
        self._require_writer("look up cached objects")
        address, monotonic_id = self.key_index[check_key(key)]
        self.increment_writer_flag(monotonic_id)
        self._touched.discard(monotonic_id)
        return address, monotonic_id

    def release_touches(self) -> None:
        """Stop protecting touched objects that were not looked up."""
        self._require_writer("release touches")
        self._touched.clear()

    # Bytes free_unused reclaims beyond the seed's 2 * max_object_size: 2*8 - 1
    # (see reclaim_target). A class default that an instance may set to 0 to
    # behave as the seed (the replayer does, for models of the seed's code).
    RECLAIM_EXTRA = 15

    def reclaim_target(self) -> int:
        """Bytes `free_unused` reclaims (at least, unless it meets a pinned chunk).

        A chunk is at most ``T = max_object_size + MD_SIZE`` bytes. A failed
        allocation may skip at most ``T - 1`` bytes to the next lap and then
        needs ``T``, and the ring's start moves by at least the bytes freed,
        so ``2*T - 1`` always makes room (the seed's ``2 * max_object_size``
        falls short by up to 15 bytes: FINDINGS #11, spec/MCRingBytes).
        """
        return 2 * self.max_object_size + self.RECLAIM_EXTRA

    def free_unused(self) -> None:
        """Reclaim the oldest free objects, up to `reclaim_target` bytes."""
        self._require_writer("free objects")
        with self._writer_lock():
            self._free_unused_locked()

    def _writer_lock(self) -> AbstractContextManager[Any]:
        """The reader lock, when the writer was given one (vLLM's tests give
        it; vLLM's sender does not), held within READER_LOCK_TIMEOUT.

        `put` and `free_unused` hold it, so a reader's `get_end` (re-check
        and read-modify-write of the count, under the same lock) is one step
        for the writer: no reclaim + reuse falls between the re-check and the
        increment (issue 15, item 3; spec `SPLIT_END` FALSE). A writer
        without the lock leaves that window open (spec/MCEndWindow*).
        """
        if self._reader_lock is None:
            return nullcontext()
        return hold(self._reader_lock, self.READER_LOCK_TIMEOUT)

    def _free_unused_locked(self) -> None:
        freed_ids = self.ring_buffer.free_buf(self.default_is_free_check, self.reclaim_target())
        for freed_id in freed_ids:
            del self.key_index[self.id_index.pop(freed_id)]
            del self.writer_flag[freed_id]

    def clear(self) -> None:
        """Forget every object (the writer's index and the ring). No-op on readers."""
        if self.is_writer:
            self.ring_buffer.clear()
            self.key_index.clear()
            self.id_index.clear()
            self.writer_flag.clear()
            self._touched.clear()

    # -- reader actions: a read is get_begin, get_copy, get_end ----------------

    def get(
        self,
        address: int,
        monotonic_id: int,
        signature: list[int] | None = None,
        key: str | None = None,
    ) -> Any:
        """Read the object behind a handle (readers must pass signature and key)."""
        read = self.get_begin(address, monotonic_id, signature, key)
        self.get_copy(read)
        return self.get_end(read)

    def get_begin(
        self,
        address: int,
        monotonic_id: int,
        signature: list[int] | None = None,
        key: str | None = None,
    ) -> Read:
        """Verify the handle, open its chunk and check the chunk's id."""
        if self.is_writer:
            check_handle_fields(address, monotonic_id)
        else:
            self.verify_signature(key, address, monotonic_id, signature)
        view, (chunk_id, size) = self.ring_buffer.chunk_view(address)
        try:
            self._check_id(address, monotonic_id, chunk_id)
        except ValueError:
            view.release()
            raise
        return Read(address, monotonic_id, size, view)

    def get_copy(self, read: Read) -> None:
        """Deserialize the object; a failure is kept for get_end to report."""
        check_instance("read", read, Read)
        payload = read.view[self.flag_bytes :]
        try:
            read.value = self.ser_de.deserialize(payload)
        except Exception as exc:  # reported by get_end, after the read is counted
            read.error = exc.with_traceback(None)
        finally:
            # Frames of a failed deserialize (also of the errors it chains)
            # would keep `payload`, and with it the segment, mapped.
            try:
                payload.release()
            except BufferError:  # the value still uses these bytes, as the seed allows
                pass
        read.copied = True

    def get_end(self, read: Read) -> Any:
        """Count the read (if this storage holds the readers' lock) and return the value.

        Under the reader lock, the chunk's header is checked again: if the
        chunk was reclaimed and reused while we copied, the copy may be torn
        or foreign, so we raise ValueError and do not touch the new chunk's
        count. A read whose copy failed is still counted, so that one bad
        read does not pin the chunk (and the FIFO behind it) forever.
        Without the lock (a writer built as vLLM's sender), nothing is counted.
        """
        check_instance("read", read, Read)
        try:
            if not read.copied:
                raise ValueError("get_end before get_copy")
            lock = self._reader_lock
            if lock is None:
                self._recheck(read)
            else:
                with hold(lock, self.READER_LOCK_TIMEOUT):
                    self._recheck(read)
                    self.increment_reader_flag(read.view)
        finally:
            read.close()
        if read.error is not None:
            raise read.error
        return read.value

    def touch(
        self,
        key: str,
        address: int = 0,
        monotonic_id: int = 0,
        signature: list[int] | None = None,
    ) -> None:
        """Without the readers' lock (vLLM's sender): protect `key`'s object
        from eviction until get_cached or release_touches. With it (a reader,
        or a writer holding the lock, as in the seed): validate the handle
        without reading it."""
        if self._reader_lock is None:
            if check_key(key) in self.key_index:
                self._touched.add(self.key_index[key][1])
            return
        self.verify_signature(key, address, monotonic_id, signature)
        with self.ring_buffer.access_buf(address) as (_, (chunk_id, _size)):
            self._check_id(address, monotonic_id, chunk_id)

    # -- handles ---------------------------------------------------------------

    def get_signature(self, key: str) -> list[int]:
        """Sign `key`'s current handle so readers can verify it."""
        self._require_writer("sign handles")
        address, monotonic_id = self.key_index[check_key(key)]
        return list(self._make_signature(key, address, monotonic_id))

    def verify_signature(
        self,
        key: str | None,
        address: int,
        monotonic_id: int,
        signature: list[int] | None,
    ) -> None:
        """Raise ValueError unless the writer issued this handle for `key`
        (and, on the writer, unless it is still `key`'s current entry)."""
        invalid = "Invalid SHM handle signature for cache key."
        if signature is None or key is None:
            raise ValueError("Missing SHM handle signature for cache key.")
        check_key(key)
        check_handle_fields(address, monotonic_id)
        if self.is_writer and self.key_index.get(key) != (address, monotonic_id):
            raise ValueError(invalid)
        given = signature_bytes(signature)
        if given is None:
            raise ValueError(invalid)
        if not hmac.compare_digest(given, self._make_signature(key, address, monotonic_id)):
            raise ValueError(invalid)

    def _make_signature(self, key: str, address: int, monotonic_id: int) -> bytes:
        return sign(self.ring_buffer.get_auth_secret(), key, address, monotonic_id)

    # -- counts ------------------------------------------------------------------

    def increment_writer_flag(self, id: int) -> None:
        """One more hand-out of the live chunk `id`: KeyError for an id no live
        chunk has, so no count waits for the chunk that gets it (FINDINGS #21)."""
        self._require_writer("count hand-outs")
        if check_int("id", id) not in self.ring_buffer.metadata:
            raise KeyError(id)
        self.writer_flag[id] = self.writer_flag.get(id, 0) + 1

    def increment_reader_flag(self, data_view: memoryview) -> None:
        """Add one read to the count at the start of `data_view`; the 4-byte
        count wraps instead of overflowing (see default_is_free_check), so a
        hot object can be read forever."""
        (count,) = COUNT.unpack_from(data_view)
        COUNT.pack_into(data_view, 0, (count + 1 + 2**31) % 2**32 - 2**31)

    def default_is_free_check(self, id: int, buf: memoryview) -> bool:
        """Free when not touched and every reader has read every hand-out.

        That is the seed's ``reader_count >= writer_count * n_readers``,
        computed modulo 2**32: reads owed minus reads done is far below 2**31
        in magnitude, so the comparison stays exact after the count wraps.
        """
        if id in self._touched:
            return False
        reader_count: int = COUNT.unpack_from(buf)[0]
        owed = (self.writer_flag[id] * self.n_readers - reader_count) % 2**32
        return owed == 0 or owed >= 2**31

    def is_cached(self, key: str) -> bool:
        """Whether the writer holds an object under `key`; ValueError on a reader (FINDINGS #18)."""
        self._require_writer("look up cached objects")
        return check_key(key) in self.key_index

    # -- lifetime ----------------------------------------------------------------

    def close(self) -> None:
        """Close the ring: the writer's close also unlinks the segment (see the ring's `close`)."""
        self.ring_buffer.close()

    def handle(self) -> ShmObjectStorageHandle:
        """What a reader process passes to `create_from_handle`.

        It carries this storage's own `reader_lock`: a writer built without
        one hands out a handle that readers refuse until the caller puts the
        readers' lock into it (FINDINGS #6).
        """
        return ShmObjectStorageHandle(
            max_object_size=self.max_object_size,
            n_readers=self.n_readers,
            ring_buffer_handle=self.ring_buffer.handle(),
            serde_class=self.serde_class,
            reader_lock=self._reader_lock,
        )

    @staticmethod
    def create_from_handle(handle: ShmObjectStorageHandle) -> SingleWriterShmObjectStorage:
        """A reader storage attached to the writer's ring that `handle` names.

        Any object with the handle's fields will do; its limits are checked
        as the constructor checks them (FINDINGS #23).
        """
        check_fields("handle", handle, HANDLE_FIELDS)  # any handle class of the same API
        ring_buffer = SingleWriterShmRingBuffer(*handle.ring_buffer_handle)
        return SingleWriterShmObjectStorage(
            max_object_size=handle.max_object_size,
            n_readers=handle.n_readers,
            ring_buffer=ring_buffer,
            serde_class=handle.serde_class,
            reader_lock=handle.reader_lock,
        )

    # -- helpers -------------------------------------------------------------------

    def _require_writer(self, what: str) -> None:
        if not self.is_writer:
            raise ValueError(f"only the writer can {what}")

    def _check_id(self, address: int, monotonic_id: int, chunk_id: int) -> None:
        if chunk_id != monotonic_id:
            raise ValueError(
                f"Data for address:id '{address}:{monotonic_id}' has been modified or is invalid."
            )

    def _recheck(self, read: Read) -> None:
        """The seqlock half of a read: the header must still be ours."""
        chunk_id, size = self.ring_buffer.read_header(read.address)
        if size != read.size:
            chunk_id = -1  # not the chunk we opened, whatever its id says
        self._check_id(read.address, read.monotonic_id, chunk_id)
