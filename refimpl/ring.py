"""`SingleWriterShmRingBuffer`: a ring of chunks in one POSIX shared-memory segment.

Segment layout: ``[32-byte handle-signing secret][chunks...]``; a chunk is
``[4-byte id][4-byte size incl. header][data]``, little-endian, signed.
Only the writer (``create=True``) allocates and reclaims; it keeps the
id -> address map (`metadata`) in its own memory. Readers attach by name and
only look at chunks through `access_buf`.

Each public method is one action of ``spec/RingBuffer.tla``; the arithmetic
lives in `refimpl.allocator` so that it can be checked on its own. Arguments
are checked at each method's boundary by `refimpl.validate` (a chunk header
must fit in the segment before it is read); creating and attaching the
segment, and the faults around that, are `refimpl.segment`'s.
"""

from __future__ import annotations

import secrets
import struct
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from multiprocessing.shared_memory import SharedMemory

from refimpl import allocator
from refimpl.segment import attach_untracked, create_segment, release_writer_lock
from refimpl.validate import (
    BadArgumentType,
    check_callable,
    check_chunk_address,
    check_chunk_size,
    check_int,
    check_segment_name,
)

# A chunk header: [4-byte id][4-byte size incl. header], little-endian, signed.
HEADER = struct.Struct("<ii")


class SingleWriterShmRingBuffer:
    """Single-writer, multi-reader ring of id-tagged chunks in shared memory.

    ``create=True`` makes the writer: a new segment of ``data_buffer_size``
    bytes plus the secret, under `name` (None: a fresh name). A reader passes
    the writer's `handle()`, ``(data_buffer_size, name)``, and attaches.
    """

    ID_NBYTES = 4
    SIZE_NBYTES = 4
    MD_SIZE = ID_NBYTES + SIZE_NBYTES
    AUTH_SECRET_BYTES = 32
    DATA_OFFSET = AUTH_SECRET_BYTES
    # Ids wrap at ID_MAX (exclusive). A class default that an instance may
    # override (ring.ID_MAX = 4), as models with few ids do.
    ID_MAX = 2**31

    # Class-level defaults, as CPython's SharedMemory has: if __init__ fails
    # halfway, close() and __del__ see these and do nothing.
    shared_memory: SharedMemory | None = None
    is_writer: bool = False
    _closed: bool = False
    _writer_lock_fd: int = -1  # the writer's flock on its segment (refimpl.segment)
    # F4: the id at whose next issue the signing secret is rotated (None: no
    # fence). clear() sets it to the oldest id it forgets; see `clear`.
    _rotate_at: int | None = None

    def __init__(
        self,
        data_buffer_size: int,
        name: str | None = None,
        create: bool = False,
    ) -> None:
        self.data_buffer_size = check_int(
            "data_buffer_size",
            data_buffer_size,
            low=self.MD_SIZE + 1,
            high=2**63 - 1 - self.DATA_OFFSET,  # the largest file size (off_t)
        )
        name = check_segment_name(name, required=not create)
        self.monotonic_id_start = 0
        self.monotonic_id_end = 0
        self.data_buffer_start = 0
        self.data_buffer_end = 0
        total = self.data_buffer_size + self.DATA_OFFSET
        if create:
            self.metadata: dict[int, int] = {}  # live id -> chunk address, FIFO
            memory, self._writer_lock_fd = create_segment(name, total)
            self.is_writer = True
            self.shared_memory = memory
            self._buf()[: self.AUTH_SECRET_BYTES] = secrets.token_bytes(self.AUTH_SECRET_BYTES)
        else:
            if name is None:  # for the type checker: check_segment_name refused it
                raise ValueError("a reader must name the segment to attach to")
            memory = attach_untracked(name)
            if memory.size < total:
                size = memory.size
                memory.close()
                raise ValueError(
                    f"shared memory {name!r} has {size} bytes, "
                    f"less than the {total} this ring needs"
                )
            self.shared_memory = memory

    # -- sharing -----------------------------------------------------------

    def handle(self) -> tuple[int, str]:
        """(data_buffer_size, segment name): the constructor's arguments for a reader."""
        return self.data_buffer_size, self._memory().name

    def get_auth_secret(self) -> bytes:
        """The 32 random bytes at the segment's start that sign handles (`refimpl.handle`).

        The writer draws them at creation; readers read the same bytes, so a
        reader can check a handle without another channel to the writer.
        """
        return bytes(self._buf()[: self.AUTH_SECRET_BYTES])

    # -- encoding ------------------------------------------------------------

    def int2byte(self, integer: int) -> bytes:
        """`integer` as 4 little-endian signed bytes, the headers' and counts' encoding."""
        check_int("integer", integer, low=-(2**31), high=2**31 - 1)
        return integer.to_bytes(self.ID_NBYTES, "little", signed=True)

    def byte2int(self, byte_data: bytes | memoryview) -> int:
        """The inverse of `int2byte`: little-endian signed bytes as an int."""
        if not isinstance(byte_data, (bytes, bytearray, memoryview)):
            raise BadArgumentType(f"byte_data must be bytes, not {type(byte_data).__name__}")
        return int.from_bytes(byte_data, "little", signed=True)

    # -- actions (spec/RingBuffer.tla) ---------------------------------------

    def allocate_buf(self, size: int) -> tuple[int, int]:
        """Reserve a chunk for `size` data bytes; returns (address, monotonic_id).

        Raises MemoryError when the ring has no room, or when every id but
        one is live (a further id would collide with a live chunk's).
        """
        buf = self._writer_buf("allocate")
        size = check_int("size", size, low=1, high=2**31 - 1 - self.MD_SIZE)
        total = size + self.MD_SIZE
        address = allocator.place(
            self.data_buffer_end, self.data_buffer_start, total, self.data_buffer_size
        )
        if address is None:
            raise MemoryError(
                "Not enough space in the data buffer, try calling free_buf() to free up space"
            )
        if len(self.metadata) >= self.ID_MAX - 1:
            raise MemoryError(
                f"all {self.ID_MAX - 1} usable monotonic ids are live; "
                "free chunks before allocating more"
            )
        monotonic_id = self.monotonic_id_end
        if monotonic_id == self._rotate_at:
            # F4: the ids of the chunks a clear() forgot come back from here on,
            # so handles signed before it must stop verifying (see `clear`).
            buf[: self.AUTH_SECRET_BYTES] = secrets.token_bytes(self.AUTH_SECRET_BYTES)
            self._rotate_at = None
        HEADER.pack_into(buf, self._offset(address), monotonic_id, total)
        self.metadata[monotonic_id] = address
        self.data_buffer_end = address + total
        self.monotonic_id_end = allocator.next_id(monotonic_id, self.ID_MAX)
        return address, monotonic_id

    @contextmanager
    def access_buf(self, address: int) -> Iterator[tuple[memoryview, tuple[int, int]]]:
        """Yield (data view, (id, size)) of the chunk whose header is at `address`.

        The id and size are read from the segment as they are now; checking
        the id against the one expected is the caller's job.
        """
        data_view, header = self.chunk_view(address)
        with data_view:
            yield data_view, header

    def chunk_view(self, address: int) -> tuple[memoryview, tuple[int, int]]:
        """`access_buf` without the context manager, for a view held across
        steps (a read in flight): the caller releases the view."""
        buf = self._buf()
        offset = check_chunk_address(address, self.data_buffer_size, self.MD_SIZE)
        chunk_id, size = HEADER.unpack_from(buf, self.DATA_OFFSET + offset)
        check_chunk_size(address, size, self.data_buffer_size - offset, self.MD_SIZE)
        offset += self.DATA_OFFSET
        return buf[offset + self.MD_SIZE : offset + size], (chunk_id, size)

    def free_buf(
        self,
        is_free_fn: Callable[[int, memoryview], bool],
        nbytes: int | None = None,
    ) -> Iterable[int]:
        """Reclaim the oldest chunks, in FIFO order, while `is_free_fn` says
        they are free and fewer than `nbytes` bytes have been reclaimed.
        Returns the reclaimed ids, oldest first."""
        self._writer_buf("free")
        check_callable("is_free_fn", is_free_fn)
        if nbytes is None:
            nbytes = self.data_buffer_size
        nbytes = check_int("nbytes", nbytes)
        id_before = self.monotonic_id_start
        freed = 0
        while freed < nbytes and self.monotonic_id_start in self.metadata:
            oldest = self.monotonic_id_start
            data_view, (_, size) = self.chunk_view(self.metadata[oldest])
            with data_view:
                if not is_free_fn(oldest, data_view):
                    break
            del self.metadata[oldest]
            self.monotonic_id_start = allocator.next_id(oldest, self.ID_MAX)
            self.data_buffer_start, self.data_buffer_end = allocator.reclaim(
                self.data_buffer_start,
                self.data_buffer_end,
                self.metadata.get(self.monotonic_id_start),
                self.data_buffer_size,
            )
            freed += size
        self.data_buffer_start, self.data_buffer_end = allocator.lap_correct(
            self.data_buffer_start, self.data_buffer_end, self.data_buffer_size
        )
        return allocator.freed_ids(id_before, self.monotonic_id_start, self.ID_MAX)

    def clear(self) -> None:
        """Forget every chunk; ids keep increasing, and the secret stays (F4).

        A handle issued before the clear may still be delivered (a request
        draining): it reads its own object until a new chunk reuses the
        address, then fails the id check, as in vLLM's releases. Ids wrap at
        ID_MAX, though: once the counter comes back to a forgotten chunk's
        id, a new chunk could take that id at that address, and the old
        handle would verify against it (spec/MCIdWrapFixed). So the clear
        leaves a fence at the oldest id it forgets, and `allocate_buf`
        writes a new secret just before it issues that id again. An earlier
        fence still pending is kept: the counter reaches it first.
        """
        self._writer_buf("clear")
        if self.metadata and self._rotate_at is None:
            self._rotate_at = self.monotonic_id_start
        self.metadata.clear()
        self.monotonic_id_start = self.monotonic_id_end
        self.data_buffer_start = 0
        self.data_buffer_end = 0

    def close(self) -> None:
        """Detach; the writer also unlinks, even if a view is still exported.

        Idempotent: a second close (or `__del__` after close) must not unlink
        a newer segment that has since been created under the same name.
        Safe after a failed `__init__` (the class-level defaults).
        """
        memory = self.shared_memory
        if memory is None or self._closed:
            return
        self._closed = True
        try:
            if self.is_writer:
                with suppress(FileNotFoundError):
                    memory.unlink()
        finally:
            release_writer_lock(self._writer_lock_fd)
            self._writer_lock_fd = -1
            memory.close()

    def __del__(self) -> None:
        # An exported view makes memory.close() raise BufferError; the
        # segment is already unlinked then, and the mapping goes with the view.
        with suppress(BufferError, OSError):
            self.close()

    def read_header(self, address: int) -> tuple[int, int]:
        """(id, size) of the chunk header at `address`, as the segment holds it now."""
        offset = check_chunk_address(address, self.data_buffer_size, self.MD_SIZE)
        return HEADER.unpack_from(self._buf(), self.DATA_OFFSET + offset)

    # -- helpers ---------------------------------------------------------------

    def _offset(self, address: int) -> int:
        return self.DATA_OFFSET + address % self.data_buffer_size

    def _memory(self) -> SharedMemory:
        if self.shared_memory is None:
            raise ValueError("the ring buffer has no shared memory")
        return self.shared_memory

    def _buf(self) -> memoryview:
        buf = None if self.shared_memory is None else self.shared_memory.buf
        if buf is None:
            raise ValueError("the ring buffer has been closed")
        return buf

    def _writer_buf(self, what: str) -> memoryview:
        if not self.is_writer:
            raise ValueError(f"only the writer can {what} buffers")
        return self._buf()
