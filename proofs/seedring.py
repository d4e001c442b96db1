"""The seed's `SingleWriterShmRingBuffer`, run on an in-memory segment.

The seed's code is never committed. At run time this module reads the seed
text (`shmref.seed.build`, `$SHMREF_SEED` or `../shared/seed/...`), takes the
complete `class SingleWriterShmRingBuffer:` listing and executes it in a
private namespace whose `shared_memory` is an in-memory fake: `SharedMemory`
is a `bytearray` behind a `memoryview`. `allocate_buf`, `access_buf` and
`free_buf` then run unmodified, header bytes and all; only the operating
system's shared memory is replaced.
"""

from __future__ import annotations

import copy
import os
import types
from collections.abc import Callable, Iterable
from contextlib import contextmanager, suppress
from itertools import chain
from pathlib import Path
from typing import Any
from unittest.mock import patch

from proofs.refring import MD_SIZE

try:
    from crosshair import deep_realize
except ImportError:  # plain runs (Hypothesis) need no realization

    def deep_realize(value: Any) -> Any:  # type: ignore[misc]
        return value


class _FakeBuffer:
    """A `memoryview` over a `bytearray`, behind a Python-level `__setitem__`
    (CrossHair's symbolic `int.to_bytes` results are not buffer objects, so
    they are realized to `bytes` before the real `memoryview` stores them)."""

    def __init__(self, size: int) -> None:
        self._view = memoryview(bytearray(size))

    def __len__(self) -> int:
        return len(self._view)

    def __getitem__(self, key: slice) -> memoryview:
        return self._view[key]

    def __setitem__(self, key: slice, value: bytes) -> None:
        self._view[key] = deep_realize(value)


class _FakeSharedMemory:
    """`multiprocessing.shared_memory.SharedMemory` in process memory."""

    def __init__(self, name: str | None = None, create: bool = False, size: int = 0) -> None:
        self.name = name or "fake-shm"
        self.size = size
        self.buf: _FakeBuffer | None = _FakeBuffer(size)

    def close(self) -> None:
        self.buf = None

    def unlink(self) -> None:
        pass


class _SilentLogger:
    def debug(self, *args: object, **kwargs: object) -> None:
        pass


def _seed_text_path() -> Path:
    with suppress(ImportError):
        from shmref.seed.build import default_seed_path

        found = default_seed_path()
        if found is not None:
            return found
    env = os.environ.get("SHMREF_SEED")
    if env:
        return Path(env)
    return (
        Path(__file__).resolve().parents[2]
        / "shared"
        / "seed"
        / ("shm_object_storage_reference.txt")
    )


def _ring_listing(text: str) -> str:
    """The complete `class SingleWriterShmRingBuffer:` listing of the seed text."""
    with suppress(ImportError):
        from shmref.seed.build import extract_classes

        return extract_classes(text)["SingleWriterShmRingBuffer"]
    lines = text.splitlines()
    begin = lines.index("class SingleWriterShmRingBuffer:")
    end = begin + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t"):
        end += 1
    return "\n".join(lines[begin:end]) + "\n"


def load_seed_ring_class(seed_path: Path | None = None) -> type:
    """The seed's `SingleWriterShmRingBuffer`, bound to the in-memory fake."""
    path = Path(seed_path) if seed_path is not None else _seed_text_path()
    if not path.is_file():
        raise FileNotFoundError(f"seed text not found: {path} (set $SHMREF_SEED)")
    source = _ring_listing(path.read_text(encoding="utf-8"))
    namespace: dict[str, Any] = {
        "__name__": "shmref_seed_ring",
        "Any": Any,
        "Callable": Callable,
        "Iterable": Iterable,
        "chain": chain,
        "contextmanager": contextmanager,
        "suppress": suppress,
        "patch": patch,
        "secrets": __import__("secrets"),
        "logger": _SilentLogger(),
        "shared_memory": types.SimpleNamespace(SharedMemory=_FakeSharedMemory),
    }
    exec(compile(source, f"<seed {path.name}: SingleWriterShmRingBuffer>", "exec"), namespace)
    seed_class = namespace["SingleWriterShmRingBuffer"]

    class SeedRing(seed_class):  # type: ignore[misc, valid-type]
        """The seed's ring without its finalizer (nothing to close in memory;
        a finalizer running inside CrossHair's tracing only makes noise)."""

        def __del__(self) -> None:
            pass

    return SeedRing


_TEMPLATE: list[Any] = []


def _template() -> Any:
    """One seed ring built by the seed's own constructor (for its constants)."""
    if not _TEMPLATE:
        _TEMPLATE.append(load_seed_ring_class()(MD_SIZE + 1, name="fake", create=True))
    return _TEMPLATE[0]


def seed_ring(capacity: int, id_max: int) -> Any:
    """A fresh, empty seed ring writer of `capacity` bytes, ids wrapping at `id_max`.

    A copy of the template with what the seed's `__init__` derives from
    `data_buffer_size` redone: the size and a zeroed segment of
    `capacity + DATA_OFFSET` bytes (secret included).
    """
    template = _template()
    ring = copy.copy(template)
    ring.data_buffer_size = capacity
    ring.shared_memory = _FakeSharedMemory("fake", True, capacity + template.DATA_OFFSET)
    ring.metadata = {}
    ring.ID_MAX = id_max
    return ring


with suppress(FileNotFoundError):  # build the template outside any symbolic execution
    _template()


def seed_snapshot(ring: Any) -> tuple[int, int, int, int, tuple[tuple[int, int], ...]]:
    return (
        ring.data_buffer_start,
        ring.data_buffer_end,
        ring.monotonic_id_start,
        ring.monotonic_id_end,
        tuple(ring.metadata.items()),
    )
