"""`SingleWriterShmRingBuffer`: a ring of chunks in one POSIX shared-memory segment.

Segment layout: ``[32-byte handle-signing secret][chunks...]``; a chunk is
``[4-byte id][4-byte size incl. header][data]``, little-endian, signed.
Only the writer (``create=True``) allocates and reclaims; it keeps the
id -> address map (`metadata`) in its own memory. Readers attach by name and
only look at chunks through `access_buf`.

Each public method is one action of ``spec/RingBuffer.tla``; the arithmetic
lives in `refimpl.allocator` so that it can be checked on its own.
"""

from __future__ import annotations

import secrets
import struct
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from multiprocessing import resource_tracker, shared_memory
from unittest.mock import patch

from refimpl import allocator
from refimpl.validate import check_int

# A chunk header: [4-byte id][4-byte size incl. header], little-endian, signed.
HEADER = struct.Struct("<ii")


def attach_untracked(name: str) -> shared_memory.SharedMemory:
    """Attach to an existing segment without letting this process's resource
    tracker unlink it at exit (Python < 3.13 registers attached segments too)."""
    if sys.version_info >= (3, 13):
        return shared_memory.SharedMemory(name=name, track=False)
    with patch.object(resource_tracker, "register", lambda *args, **kwargs: None):
        return shared_memory.SharedMemory(name=name)


class SingleWriterShmRingBuffer:
    """Single-writer, multi-reader ring of id-tagged chunks in shared memory."""

    ID_NBYTES = 4
    SIZE_NBYTES = 4
    MD_SIZE = ID_NBYTES + SIZE_NBYTES
    AUTH_SECRET_BYTES = 32
    DATA_OFFSET = AUTH_SECRET_BYTES
    # Ids wrap at ID_MAX (exclusive). A class default that an instance may
    # override (ring.ID_MAX = 4), as models with few ids do.
    ID_MAX = 2**31

    def __init__(
        self,
        data_buffer_size: int,
        name: str | None = None,
        create: bool = False,
    ) -> None:
        self.data_buffer_size = check_int(
            "data_buffer_size", data_buffer_size, low=self.MD_SIZE + 1
        )
        self.is_writer = bool(create)
        self.monotonic_id_start = 0
        self.monotonic_id_end = 0
        self.data_buffer_start = 0
        self.data_buffer_end = 0
        total = self.data_buffer_size + self.DATA_OFFSET
        if self.is_writer:
            self.metadata: dict[int, int] = {}  # live id -> chunk address, FIFO
            self.shared_memory = shared_memory.SharedMemory(
                name=name, create=True, size=total
            )
            self.shared_memory.buf[: self.AUTH_SECRET_BYTES] = secrets.token_bytes(
                self.AUTH_SECRET_BYTES
            )
        else:
            if not isinstance(name, str):
                raise ValueError("a reader must name the segment to attach to")
            self.shared_memory = attach_untracked(name)
            if self.shared_memory.size < total:
                size = self.shared_memory.size
                self.shared_memory.close()
                raise ValueError(
                    f"shared memory {name!r} has {size} bytes, "
                    f"less than the {total} this ring needs"
                )

    # -- sharing -----------------------------------------------------------

    def handle(self) -> tuple[int, str]:
        return self.data_buffer_size, self.shared_memory.name

    def get_auth_secret(self) -> bytes:
        return bytes(self._buf()[: self.AUTH_SECRET_BYTES])

    # -- encoding ------------------------------------------------------------

    def int2byte(self, integer: int) -> bytes:
        return integer.to_bytes(self.ID_NBYTES, "little", signed=True)

    def byte2int(self, byte_data: bytes | memoryview) -> int:
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
                "Not enough space in the data buffer, "
                "try calling free_buf() to free up space"
            )
        if len(self.metadata) >= self.ID_MAX - 1:
            raise MemoryError(
                f"all {self.ID_MAX - 1} usable monotonic ids are live; "
                "free chunks before allocating more"
            )
        monotonic_id = self.monotonic_id_end
        HEADER.pack_into(buf, self._offset(address), monotonic_id, total)
        self.metadata[monotonic_id] = address
        self.data_buffer_end = address + total
        self.monotonic_id_end = allocator.next_id(monotonic_id, self.ID_MAX)
        return address, monotonic_id

    @contextmanager
    def access_buf(
        self, address: int
    ) -> Iterator[tuple[memoryview, tuple[int, int]]]:
        """Yield (data view, (id, size)) of the chunk whose header is at `address`.

        The id and size are read from the segment as they are now; checking
        the id against the one expected is the caller's job.
        """
        buf = self._buf()
        address = check_int("address", address, low=0)
        offset = self._offset(address)
        chunk_id, size = self.read_header(address)
        room = self.data_buffer_size - (offset - self.DATA_OFFSET)
        if not self.MD_SIZE <= size <= room:
            raise ValueError(
                f"no valid chunk at address {address}: header size {size} "
                f"is outside [{self.MD_SIZE}, {room}]"
            )
        with buf[offset + self.MD_SIZE : offset + size] as data_view:
            yield data_view, (chunk_id, size)

    def free_buf(
        self,
        is_free_fn: Callable[[int, memoryview], bool],
        nbytes: int | None = None,
    ) -> Iterable[int]:
        """Reclaim the oldest chunks, in FIFO order, while `is_free_fn` says
        they are free and fewer than `nbytes` bytes have been reclaimed.
        Returns the reclaimed ids, oldest first."""
        self._writer_buf("free")
        if nbytes is None:
            nbytes = self.data_buffer_size
        nbytes = check_int("nbytes", nbytes)
        id_before = self.monotonic_id_start
        freed = 0
        while freed < nbytes and self.monotonic_id_start in self.metadata:
            oldest = self.monotonic_id_start
            with self.access_buf(self.metadata[oldest]) as (data_view, (_, size)):
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
        """Forget every chunk and write a new handle-signing secret (F4).

        Ids keep increasing, but they wrap at ID_MAX, and a handle issued
        before the clear may still be delivered: with the old secret it
        would verify against a new chunk that got its id and address
        (spec/MCIdWrapFixed). After the rotation it is rejected.
        """
        buf = self._writer_buf("clear")
        buf[: self.AUTH_SECRET_BYTES] = secrets.token_bytes(self.AUTH_SECRET_BYTES)
        self.metadata.clear()
        self.monotonic_id_start = self.monotonic_id_end
        self.data_buffer_start = 0
        self.data_buffer_end = 0

    def close(self) -> None:
        """Detach; the writer also unlinks, even if a view is still exported.

        Idempotent: a second close (or `__del__` after close) must not unlink
        a newer segment that has since been created under the same name.
        """
        memory = getattr(self, "shared_memory", None)
        if memory is None or getattr(self, "_closed", False):
            return
        self._closed = True
        try:
            if self.is_writer:
                with suppress(FileNotFoundError):
                    memory.unlink()
        finally:
            memory.close()

    def __del__(self) -> None:
        with suppress(Exception):
            self.close()

    def read_header(self, address: int) -> tuple[int, int]:
        """(id, size) of the chunk header at `address`, as the segment holds it now."""
        return HEADER.unpack_from(self._buf(), self._offset(address))

    # -- helpers ---------------------------------------------------------------

    def _offset(self, address: int) -> int:
        return self.DATA_OFFSET + address % self.data_buffer_size

    def _buf(self) -> memoryview:
        buf = self.shared_memory.buf
        if buf is None:
            raise ValueError("the ring buffer has been closed")
        return buf

    def _writer_buf(self, what: str) -> memoryview:
        if not self.is_writer:
            raise ValueError(f"only the writer can {what} buffers")
        return self._buf()
