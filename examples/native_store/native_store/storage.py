"""`SingleWriterShmObjectStorage` over the C core: the key index, signatures
and serde in Python, the chunk, its count and the copies in C.

Behaviour is refimpl's (the seed's plus FINDINGS' fixes): a read is
verify the handle's HMAC, open the chunk (C checks the id), copy, then under
the readers' lock re-check the header and count the read (C, one call); a
failed copy is still counted; clear() keeps the secret, and a fence at the
oldest id it forgets rotates it before that id is issued again (F4). A writer given
the lock holds it in put and free_unused, so no reclaim falls between a
reader's re-check and its increment. Reads are never lock-free here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from native_store.ring import SingleWriterShmRingBuffer
from native_store.signing import INVALID, Signing
from refimpl.allocator import freed_ids
from refimpl.readerlock import READER_LOCK_TIMEOUT, ReaderLockTimeout
from refimpl.serde import RAW, MsgpackOnlySerde, ObjectSerde, byte_parts
from refimpl.validate import (
    MAX_CHUNK_DATA,
    SIGNATURE_BYTES,
    check_fields,
    check_handle_fields,
    check_instance,
    check_int,
    check_key,
)

ADDRESS_LIMIT, ID_LIMIT = 2**64, 2**32  # what a signature encodes (8 and 4 bytes)
RAW_MD = bytes([RAW])

FLAG_BYTES = 4  # an object's read count (its place in the object is C's business)
MD_SIZE = SingleWriterShmRingBuffer.MD_SIZE  # a chunk's header
HANDLE_FIELDS = ("max_object_size", "n_readers", "ring_buffer_handle", "serde_class", "reader_lock")


@dataclass
class ShmObjectStorageHandle:
    """Everything a reader process needs to attach to a writer's storage."""

    max_object_size: int
    n_readers: int
    ring_buffer_handle: tuple[int, str]
    serde_class: type[ObjectSerde]
    reader_lock: Any


@dataclass(slots=True)
class Read:
    """One read in flight between get_begin and get_end: where, not a view."""

    address: int
    monotonic_id: int
    size: int
    data_at: int
    value: Any = None
    error: BaseException | None = None
    copied: bool = False

    def close(self) -> None:
        """Nothing to release: a read in flight holds offsets, not a view."""


class SingleWriterShmObjectStorage(Signing):
    """Single-writer, multi-reader object store with FIFO eviction."""

    READER_LOCK_TIMEOUT: float | None = READER_LOCK_TIMEOUT
    RECLAIM_EXTRA = 15  # refimpl's fixed reclaim target (FINDINGS #11)
    _ring_class: ClassVar[type[SingleWriterShmRingBuffer]] = SingleWriterShmRingBuffer

    def __init__(
        self,
        max_object_size: int,
        n_readers: int,
        ring_buffer: SingleWriterShmRingBuffer,
        serde_class: type[ObjectSerde] = MsgpackOnlySerde,
        reader_lock: Any = None,
    ) -> None:
        self.max_object_size = check_int(
            "max_object_size", max_object_size, low=1, high=MAX_CHUNK_DATA
        )
        self.n_readers = check_int("n_readers", n_readers, low=0, high=2**31 - 1)
        check_instance("ring_buffer", ring_buffer, SingleWriterShmRingBuffer)
        self.serde_class = serde_class
        self.ser_de = serde_class()
        self.ring_buffer = ring_buffer
        self.is_writer = ring_buffer.is_writer
        self.flag_bytes = FLAG_BYTES
        self._lib, self._ffi, self._state = ring_buffer._lib, ring_buffer._ffi, ring_buffer._state
        self._raw_fast = type(self.ser_de) is MsgpackOnlySerde  # bytes out in one C copy
        # a reader process's get in one frame (_get_fast): counted under the lock
        self._fast_read = (
            not self.is_writer
            and reader_lock is not None
            and self._raw_fast
            and bool(self._lib.NS_READS_LOCKED)
        )
        self._signature_out = bytearray(32)  # C writes signatures here
        self._signature_c = self._ffi.from_buffer(self._signature_out)
        self._signature_view = memoryview(self._signature_out)  # .tolist(): the API's list
        # spans C fills in a read: taken and given back by each call (list.pop and
        # append are atomic), so reader threads sharing this storage never share one
        self._spans: list[Any] = []
        if self.is_writer:
            self.key_index: dict[str, tuple[int, int]] = {}
            self.id_index: dict[int, str] = {}
            # key -> (address, id, the ring's secret epoch, signature) of the handle put
            # signed (ns_put_signed): get_signature's answer while all three still hold
            self._signed: dict[str, tuple[int, int, int, bytes]] = {}
            self._id_before = self._ffi.new("uint32_t *")
        elif reader_lock is None:
            raise ValueError("Lock must be provided for readers.")
        self._reader_lock = reader_lock

    # -- writer ------------------------------------------------------------------

    def put(self, key: str, value: Any) -> tuple[int, int]:
        """Store `value` under a new `key`: (address, monotonic_id). Every
        check runs before the allocation, so a failed put changes nothing."""
        if not self.is_writer:
            raise ValueError("only the writer can put")
        if type(key) is not str or not key.isascii():
            check_key(key)
        if key in self.key_index:
            raise ValueError(f"Key '{key}' already exists in the storage.")
        if self._raw_fast and type(value) is bytes and value:
            md, payload, md_bytes, data_bytes = (
                RAW_MD,
                value,
                1,
                len(value),
            )  # MsgpackOnlySerde's RAW
        else:
            data, data_bytes, metadata, md_bytes = self.ser_de.serialize(value)
            parts = byte_parts(metadata, data, md_bytes, data_bytes)
            md, payload = parts[0], parts[1] if len(parts) == 2 else b"".join(parts[1:])
        size = FLAG_BYTES + md_bytes + data_bytes
        if size > self.max_object_size:
            raise ValueError(
                f"Serialized object size ({size} bytes) exceeds "
                f"max object size ({self.max_object_size} bytes)"
            )
        ring = self.ring_buffer
        if size + ring.MD_SIZE > ring.data_buffer_size:
            raise MemoryError(
                f"an object of {size} bytes never fits in a ring of {ring.data_buffer_size} bytes"
            )
        lib, state, ffi = self._lib, self._state, self._ffi
        md_c = md if type(md) is bytes else ffi.from_buffer(md)
        payload_c = payload if type(payload) is bytes else ffi.from_buffer(payload)
        out_address, out_id = ring._out_address, ring._out_id
        key_bytes, signed = key.encode(), self._signature_c
        lock = self._reader_lock
        if lock is not None and not lock.acquire(True, self.READER_LOCK_TIMEOUT):
            self._lock_timed_out()
        try:  # C: allocate, write the count and both parts, count the hand-out
            old = None if ring._rotate_at is None else ring._fence()  # F4's fence, if set
            args = (md_c, md_bytes, payload_c, data_bytes, key_bytes, len(key_bytes))
            rc = lib.ns_put_signed(state, size, *args, out_address, out_id, signed)
            if rc == lib.NS_E_NOMEM or rc == lib.NS_E_IDS:
                self._free_unused_locked()
                rc = lib.ns_put_signed(state, size, *args, out_address, out_id, signed)
            if old is not None:
                ring._fenced(rc, old)
        finally:
            if lock is not None:
                lock.release()
        if rc:
            ring._fail(rc, "allocate")
        address, monotonic_id = out_address[0], out_id[0]
        self.key_index[key] = (address, monotonic_id)
        self.id_index[monotonic_id] = key
        self._signed[key] = (address, monotonic_id, ring._secret_epoch, bytes(self._signature_out))
        return address, monotonic_id

    def get_cached(self, key: str) -> tuple[int, int]:
        """Hand `key`'s object out again: one more read per reader is owed."""
        self._require_writer("look up cached objects")
        address, monotonic_id = self.key_index[check_key(key)]
        self.ring_buffer._check(self._lib.ns_handout(self._state, monotonic_id), "hand out")
        return address, monotonic_id

    def is_cached(self, key: str) -> bool:
        self._require_writer("look up cached objects")
        return check_key(key) in self.key_index

    def release_touches(self) -> None:
        self._require_writer("release touches")
        self._lib.ns_release_touches(self._state)

    def reclaim_target(self) -> int:
        return 2 * self.max_object_size + self.RECLAIM_EXTRA

    def free_unused(self) -> None:
        """Reclaim the oldest free objects (C decides: counts and touches)."""
        self._require_writer("free objects")
        lock = self._reader_lock
        if lock is not None:
            self._acquire(lock)
        try:
            self._free_unused_locked()
        finally:
            if lock is not None:
                lock.release()

    def _free_unused_locked(self) -> None:
        state = self._state
        rc = self._lib.ns_free_unused(state, self.reclaim_target(), self.n_readers, self._id_before)
        self.ring_buffer._check(rc, "free objects")
        for freed_id in freed_ids(int(self._id_before[0]), int(state.id_start), int(state.id_max)):
            key = self.id_index.pop(freed_id)
            del self.key_index[key]
            self._signed.pop(key, None)

    def clear(self) -> None:
        """Forget every object; a new secret refuses every old handle. No-op on readers."""
        if self.is_writer:
            self.ring_buffer.clear()
            self.key_index.clear()
            self.id_index.clear()
            self._signed.clear()

    # -- reader --------------------------------------------------------------------

    def get(
        self,
        address: int,
        monotonic_id: int,
        signature: list[int] | None = None,
        key: str | None = None,
    ) -> Any:
        """Read the object behind a handle (readers pass signature and key):
        get_begin, get_copy and get_end without a Read object in between
        (MsgpackOnlySerde's bytes copied out right here: the common read)."""
        if self._fast_read:
            return self._get_fast(address, monotonic_id, signature, key)
        size, data_at = self._open(address, monotonic_id, signature, key)
        chars = self.ring_buffer._chars  # None once the ring is closed
        start, stop = data_at + FLAG_BYTES + 1, data_at + size - MD_SIZE  # after RAW's byte
        if self._raw_fast and stop > start and chars is not None and chars[start - 1] == RAW_MD:
            value, error = self._ffi.unpack(chars + start, stop - start), None
        else:
            value, error = self._copy(size, data_at)
        self._end(address, monotonic_id, size, error is None)
        if error is not None:
            raise error
        return value

    def _get_fast(self, address: Any, monotonic_id: Any, signature: Any, key: Any) -> Any:
        """`get` of a reader process with the lock, as vLLM's readers read:
        the steps of _open, the raw copy and _end in one frame (each Python
        call they save is some 5% of a 64 B get). Anything unusual (a bad
        field, a failed check, a value that is not raw bytes) goes the long
        way, which raises the exact error or reads through the serde."""
        if (
            type(address) is not int
            or type(monotonic_id) is not int
            or type(key) is not str
            or type(signature) is not list
            or len(signature) != SIGNATURE_BYTES
            or not 0 <= address < ADDRESS_LIMIT
            or not 0 <= monotonic_id < ID_LIMIT
            or not key.isascii()
        ):
            return self._get_slow(address, monotonic_id, signature, key)
        try:
            given = bytes(bytearray(signature))
        except (TypeError, ValueError):
            raise ValueError(INVALID) from None
        lib, spans, chars = self._lib, self._spans, self.ring_buffer._chars
        span = spans.pop() if spans else self._ffi.new("ns_span *")
        key_bytes = key.encode()
        rc = lib.ns_begin_signed(
            self._state, key_bytes, len(key_bytes), address, monotonic_id, given, span
        )
        size, data_at = span.size, span.data_at
        spans.append(span)
        start, stop = data_at + FLAG_BYTES + 1, data_at + size - MD_SIZE  # after RAW's byte
        if rc or stop <= start or chars is None or chars[start - 1] != RAW_MD:
            return self._get_slow(address, monotonic_id, signature, key)
        value = self._ffi.unpack(chars + start, stop - start)
        lock = self._reader_lock
        if not lock.acquire(True, self.READER_LOCK_TIMEOUT):
            self._lock_timed_out()
        try:
            rc = lib.ns_end(self._state, address, monotonic_id, size, True)
        finally:
            lock.release()
        if rc:
            self.ring_buffer._fail(
                lib.NS_E_STALE if rc == lib.NS_E_NO_CHUNK else rc, "read", address, monotonic_id
            )
        return value

    def _get_slow(self, address: Any, monotonic_id: Any, signature: Any, key: Any) -> Any:
        """`get` step by step (the fast path's checks failed or do not apply)."""
        size, data_at = self._open(address, monotonic_id, signature, key)
        value, error = self._copy(size, data_at)
        self._end(address, monotonic_id, size, error is None)
        if error is not None:
            raise error
        return value

    def get_begin(
        self,
        address: int,
        monotonic_id: int,
        signature: list[int] | None = None,
        key: str | None = None,
    ) -> Read:
        """Verify the handle, then C opens the chunk and checks its id."""
        size, data_at = self._open(address, monotonic_id, signature, key)
        return Read(address, monotonic_id, size, data_at)

    def get_copy(self, read: Read) -> None:
        """Copy the object out; a failure is kept for get_end (counted first)."""
        check_instance("read", read, Read)
        read.value, read.error = self._copy(read.size, read.data_at)
        read.copied = True

    def get_end(self, read: Read) -> Any:
        """Count the read (a failed copy too) and return its value or error."""
        check_instance("read", read, Read)
        if not read.copied:
            raise ValueError("get_end before get_copy")
        self._end(read.address, read.monotonic_id, read.size, read.error is None)
        if read.error is not None:
            raise read.error
        return read.value

    # the three steps, shared by get and the split read

    def _open(
        self, address: int, monotonic_id: int, signature: list[int] | None, key: str | None
    ) -> tuple[int, int]:
        """(size, data offset) of the handle's chunk: a reader's signature and
        the chunk's id are checked in one C call."""
        lib = self._lib
        if (
            type(address) is not int
            or type(monotonic_id) is not int
            or not 0 <= address < ADDRESS_LIMIT
            or not 0 <= monotonic_id < ID_LIMIT
        ):
            check_handle_fields(address, monotonic_id)  # raises the exact error
        if self.is_writer:
            key_bytes = given = b""
        else:
            key_bytes, given = self._signed_fields(key, signature)
        spans = self._spans
        span = spans.pop() if spans else self._ffi.new("ns_span *")
        if self.is_writer:
            rc = lib.ns_open(self._state, address, monotonic_id, span)
        else:
            rc = lib.ns_begin_signed(
                self._state, key_bytes, len(key_bytes), address, monotonic_id, given, span
            )
        size, data_at = span.size, span.data_at
        spans.append(span)
        if rc:
            if rc == lib.NS_E_SIGNATURE:
                raise ValueError(INVALID)
            self.ring_buffer._fail(rc, "read", address, monotonic_id)
        return size, data_at

    def _copy(self, size: int, data_at: int) -> tuple[Any, Exception | None]:
        """(value, None) or (None, the serde's error). MsgpackOnlySerde's bytes
        come out in one memcpy (cffi's unpack); other objects go through the
        serde on a view of the segment."""
        ring = self.ring_buffer
        start, stop = data_at + FLAG_BYTES, data_at + size - ring.MD_SIZE
        value = None
        try:
            chars = ring._chars  # None once the ring is closed: nothing below touches it then
            if self._raw_fast and stop - start > 1 and chars is not None and chars[start] == RAW_MD:
                return self._ffi.unpack(chars + start + 1, stop - start - 1), None
            buf = ring._buf()
            with buf[start:stop] as payload:
                value = self.ser_de.deserialize(payload)
            return value, None
        except BufferError:  # the value still uses the segment's bytes, as the seed allows
            return value, None
        except Exception as exc:
            return None, exc.with_traceback(None)

    def _end(self, address: int, monotonic_id: int, size: int, copied_ok: bool) -> None:
        """Under the readers' lock C re-checks the header and counts the read;
        without the lock (vLLM's sender) it only re-checks."""
        lib, state, lock = self._lib, self._state, self._reader_lock
        if lock is None:
            span = self._ffi.new("ns_span *")
            rc = lib.ns_open(state, address, monotonic_id, span)
            if rc == 0 and span.size != size:
                rc = lib.NS_E_STALE
        elif not lib.NS_READS_LOCKED:  # only the racy_count mutant
            rc = lib.ns_end(state, address, monotonic_id, size, copied_ok)
        else:
            if not lock.acquire(True, self.READER_LOCK_TIMEOUT):
                self._lock_timed_out()
            try:
                rc = lib.ns_end(state, address, monotonic_id, size, copied_ok)
            finally:
                lock.release()
        if rc:
            if rc == lib.NS_E_NO_CHUNK:
                rc = lib.NS_E_STALE
            self.ring_buffer._fail(rc, "read", address, monotonic_id)

    def touch(
        self, key: str, address: int = 0, monotonic_id: int = 0, signature: list[int] | None = None
    ) -> None:
        """Without the lock: protect `key`'s object until get_cached or
        release_touches. With it: validate the handle, count nothing."""
        if self._reader_lock is None:
            if check_key(key) in self.key_index:
                self._lib.ns_touch(self._state, self.key_index[key][1])
            return
        self.verify_signature(key, address, monotonic_id, signature)
        span = self._ffi.new("ns_span *")
        rc = self._lib.ns_open(self._state, address, monotonic_id, span)
        if rc:
            self.ring_buffer._fail(rc, "touch", address, monotonic_id)

    # -- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        self.ring_buffer.close()

    def handle(self) -> ShmObjectStorageHandle:
        return ShmObjectStorageHandle(
            max_object_size=self.max_object_size,
            n_readers=self.n_readers,
            ring_buffer_handle=self.ring_buffer.handle(),
            serde_class=self.serde_class,
            reader_lock=self._reader_lock,
        )

    @classmethod
    def create_from_handle(cls, handle: ShmObjectStorageHandle) -> SingleWriterShmObjectStorage:
        check_fields("handle", handle, HANDLE_FIELDS)
        ring = cls._ring_class(*handle.ring_buffer_handle)
        return cls(
            max_object_size=handle.max_object_size,
            n_readers=handle.n_readers,
            ring_buffer=ring,
            serde_class=handle.serde_class,
            reader_lock=handle.reader_lock,
        )

    # -- helpers ---------------------------------------------------------------------------

    def _require_writer(self, what: str) -> None:
        if not self.is_writer:
            raise ValueError(f"only the writer can {what}")

    def _acquire(self, lock: Any) -> None:
        if not lock.acquire(True, self.READER_LOCK_TIMEOUT):
            self._lock_timed_out()

    def _lock_timed_out(self) -> None:
        raise ReaderLockTimeout(
            f"the reader lock was not free within {self.READER_LOCK_TIMEOUT:g} s: a reader "
            "process probably died while holding it. This read is not counted; "
            "restart the readers with a new lock."
        )


def _c_bytes(ffi: Any, part: Any) -> Any:
    """A `const char *` for a part: bytes pass as they are, other buffers by address."""
    return part if type(part) is bytes else ffi.from_buffer(part)
