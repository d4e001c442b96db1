"""`SingleWriterShmRingBuffer` over the C core (ns_ring.c).

The segment is a POSIX shared-memory object created and attached by
refimpl.segment (pages reserved up front, the writer's flock, readers
untracked); its buffer is handed to C once, and every allocator step,
header read and bounds check happens there. Python keeps only what the
contract's types need: exact-int checks (a bool or a float is refused
before cffi would coerce it) and turning C's error codes into exceptions.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from multiprocessing.shared_memory import SharedMemory
from typing import Any, NoReturn

from refimpl.allocator import freed_ids
from refimpl.segment import attach_untracked, create_segment, release_writer_lock
from refimpl.validate import BadArgumentType, check_callable, check_int, check_segment_name

ADDRESS_LIMIT = 2**64


class SingleWriterShmRingBuffer:
    """Single-writer, multi-reader ring of id-tagged chunks; the C core does the work."""

    ID_NBYTES = 4
    SIZE_NBYTES = 4
    MD_SIZE = 8  # the header a chunk's size counts (the seed's geometry)
    AUTH_SECRET_BYTES = 32
    _ffi: Any = None  # set per variant by native_store._bind
    _lib: Any = None

    # class defaults: close() and __del__ after a failed __init__ do nothing
    shared_memory: SharedMemory | None = None
    is_writer: bool = False
    _closed: bool = False
    _writer_lock_fd: int = -1
    _base: Any = None
    _chars: Any = None
    _rotate_at: int | None = None  # F4: the id whose next issue rotates the secret
    _secret_epoch: int = (
        0  # counts changes of the secret: a cached signature of an older one is stale
    )

    def __init__(self, data_buffer_size: int, name: str | None = None, create: bool = False):
        ffi, lib = self._ffi, self._lib
        self.data_buffer_size = check_int(
            "data_buffer_size", data_buffer_size, low=self.MD_SIZE + 1, high=2**62 - 256
        )
        name = check_segment_name(name, required=not create)
        total = lib.ns_segment_bytes(self.data_buffer_size)
        self._state = ffi.new("ns_ring *")
        self._out_address = ffi.new("uint64_t *")
        self._out_id = ffi.new("uint32_t *")  # the writer's out-parameters (one writer thread)
        self._secret = ffi.new("uint8_t[32]")
        if create:
            memory, self._writer_lock_fd = create_segment(name, total)
        else:
            if name is None:  # check_segment_name refused it already
                raise ValueError("a reader must name the segment to attach to")
            memory = attach_untracked(name)
        self.shared_memory = memory
        self.is_writer = bool(create)
        if memory.size < total:
            self.close()
            raise ValueError(
                f"shared memory {name!r} has {memory.size} bytes, less than the {total} "
                "this ring needs"
            )
        self._base = ffi.from_buffer("uint8_t[]", memory.buf)
        self._chars = ffi.cast("char *", self._base)  # for ffi.unpack; dropped on close
        rc = lib.ns_init(self._state, self._base, memory.size, self.data_buffer_size, int(create))
        if rc:
            size = memory.size
            self.close()
            raise ValueError(
                f"shared memory {name!r} ({size} bytes) is not a native_store ring of "
                f"{self.data_buffer_size} bytes (it needs {total} bytes and our control block)"
            )
        if create:
            self._check(lib.ns_set_secret(self._state, secrets.token_bytes(32)), "write secrets")

    # -- errors --------------------------------------------------------------

    def _fail(self, rc: int, what: str, address: int = 0, monotonic_id: int = 0) -> NoReturn:
        lib = self._lib
        if rc == lib.NS_E_CLOSED:
            raise ValueError("the ring buffer has been closed")
        if rc == lib.NS_E_NOT_WRITER:
            raise ValueError(f"only the writer can {what}")
        if rc == lib.NS_E_NOMEM:
            raise MemoryError(
                "Not enough space in the data buffer, try calling free_buf() to free up space"
            )
        if rc == lib.NS_E_IDS:
            raise MemoryError(
                f"all {self.ID_MAX - 1} usable monotonic ids are live; "
                "free chunks before allocating more"
            )
        if rc == lib.NS_E_OOM:
            raise MemoryError("native_store: out of process memory")
        if rc == lib.NS_E_NO_CHUNK:
            raise ValueError(f"no valid chunk at address {address}")
        if rc == lib.NS_E_STALE:
            raise ValueError(
                f"Data for address:id '{address}:{monotonic_id}' has been modified or is invalid."
            )
        raise ValueError(f"native_store: {what} failed (code {rc})")

    def _check(self, rc: int, what: str, address: int = 0, monotonic_id: int = 0) -> None:
        if rc:
            self._fail(rc, what, address, monotonic_id)

    # -- positions (the seed's docstring names them) ---------------------------

    @property
    def data_buffer_start(self) -> int:
        return int(self._state.start)

    @property
    def data_buffer_end(self) -> int:
        return int(self._state.end)

    @property
    def monotonic_id_start(self) -> int:
        return int(self._state.id_start)

    @property
    def monotonic_id_end(self) -> int:
        return int(self._state.id_end)

    @property
    def ID_MAX(self) -> int:  # noqa: N802 (the seed's name)
        return int(self._state.id_max)

    @ID_MAX.setter
    def ID_MAX(self, value: int) -> None:  # noqa: N802
        check_int("ID_MAX", value, low=2, high=2**31)
        self._check(self._lib.ns_set_id_max(self._state, value), "set ID_MAX")

    # -- sharing and encoding ----------------------------------------------------

    def handle(self) -> tuple[int, str]:
        if self.shared_memory is None:
            raise ValueError("the ring buffer has no shared memory")
        return self.data_buffer_size, self.shared_memory.name

    def get_auth_secret(self) -> bytes:
        self._check(self._lib.ns_secret(self._state, self._secret), "read the secret")
        return bytes(self._ffi.buffer(self._secret))

    def int2byte(self, integer: int) -> bytes:
        check_int("integer", integer, low=-(2**31), high=2**31 - 1)
        return integer.to_bytes(self.ID_NBYTES, "little", signed=True)

    def byte2int(self, byte_data: bytes | memoryview) -> int:
        if not isinstance(byte_data, (bytes, bytearray, memoryview)):
            raise BadArgumentType(f"byte_data must be bytes, not {type(byte_data).__name__}")
        return int.from_bytes(byte_data, "little", signed=True)

    # -- actions -----------------------------------------------------------------

    def allocate_buf(self, size: int) -> tuple[int, int]:
        """Reserve a chunk for `size` data bytes: (address, monotonic_id)."""
        if not self.is_writer:
            raise ValueError("only the writer can allocate buffers")
        check_int("size", size, low=1, high=2**31 - 1 - self.MD_SIZE)
        old = self._fence()
        rc = self._lib.ns_allocate(self._state, size, self._out_address, self._out_id)
        self._fenced(rc, old)
        self._check(rc, "allocate")
        return int(self._out_address[0]), int(self._out_id[0])

    def _fence(self) -> bytes | None:
        """F4: before the id a clear forgot is issued again, a new secret; the
        old one is returned, to be put back if the allocation fails."""
        if self._rotate_at is None or int(self._state.id_end) != self._rotate_at:
            return None
        old = self.get_auth_secret()
        self._check(self._lib.ns_set_secret(self._state, secrets.token_bytes(32)), "sign")
        self._secret_epoch += 1
        return old

    def _fenced(self, rc: int, old: bytes | None) -> None:
        """After an allocation behind `_fence`: the fence is passed, or (nothing
        issued) the old secret is back."""
        if old is None:
            return
        if rc:
            self._lib.ns_set_secret(self._state, old)
            self._secret_epoch += 1
        else:
            self._rotate_at = None

    def chunk(self, address: int) -> tuple[int, int, int]:
        """(id, size incl. header, offset of the data in the mapping) at `address`."""
        check_int("address", address, low=0, high=ADDRESS_LIMIT - 1)
        span = self._ffi.new("ns_span *")  # per call: readers may share a ring across threads
        self._check(self._lib.ns_chunk(self._state, address, span), "read a chunk", address)
        return int(span.id), int(span.size), int(span.data_at)

    def chunk_view(self, address: int) -> tuple[memoryview, tuple[int, int]]:
        """The chunk's data as a view of the segment, and its (id, size)."""
        chunk_id, size, data_at = self.chunk(address)
        return self._buf()[data_at : data_at + size - self.MD_SIZE], (chunk_id, size)

    @contextmanager
    def access_buf(self, address: int) -> Iterator[tuple[memoryview, tuple[int, int]]]:
        view, header = self.chunk_view(address)
        with view:
            yield view, header

    def read_header(self, address: int) -> tuple[int, int]:
        chunk_id, size, _ = self.chunk(address)
        return chunk_id, size

    def free_buf(
        self, is_free_fn: Callable[[int, memoryview], bool], nbytes: int | None = None
    ) -> Iterable[int]:
        """Reclaim the oldest chunks while `is_free_fn` says so, up to `nbytes`."""
        if not self.is_writer:
            raise ValueError("only the writer can free buffers")
        check_callable("is_free_fn", is_free_fn)
        nbytes = check_int("nbytes", self.data_buffer_size if nbytes is None else nbytes)
        lib, state = self._lib, self._state
        id_before = int(state.id_start)
        freed = 0
        while freed < nbytes:
            rc = lib.ns_oldest(state, self._out_id, self._out_address)
            if rc == lib.NS_E_EMPTY:
                break
            self._check(rc, "free buffers")
            view, _ = self.chunk_view(int(self._out_address[0]))
            with view:
                if not is_free_fn(int(self._out_id[0]), view):
                    break
            freed += lib.ns_pop_oldest(state)
        lib.ns_lap_correct(state)
        return list(freed_ids(id_before, int(state.id_start), int(state.id_max)))

    def clear(self) -> None:
        """Forget every chunk; the secret stays, and a fence at the oldest id
        forgotten makes `allocate_buf` write a new one before that id is
        issued again (FINDINGS F4, refimpl.ring.clear)."""
        state = self._state
        if self.is_writer and state.live_len and self._rotate_at is None:
            self._rotate_at = int(state.id_start)
        self._check(self._lib.ns_clear(state, self.get_auth_secret()), "clear buffers")

    def close(self) -> None:
        """Detach (C first, so nothing dereferences the mapping after); the
        writer also unlinks. Idempotent, and safe after a failed __init__."""
        memory = self.shared_memory
        if memory is None or self._closed:
            return
        self._closed = True
        if self._base is not None:
            self._lib.ns_detach(self._state)
            self._ffi.release(self._base)
            self._base = self._chars = None
        try:
            if self.is_writer:
                with suppress(FileNotFoundError):
                    memory.unlink()
        finally:
            release_writer_lock(self._writer_lock_fd)
            self._writer_lock_fd = -1
            memory.close()

    def __del__(self) -> None:
        with suppress(BufferError, OSError, AttributeError):
            self.close()

    def _buf(self) -> memoryview:
        buf = None if self._closed or self.shared_memory is None else self.shared_memory.buf
        if buf is None:
            raise ValueError("the ring buffer has been closed")
        return buf
