"""Regression tests for FINDINGS.md: each finding demonstrated on the seed.

Every finding has a `_seed` test that DEMONSTRATES the defect on the module
built from the seed (vLLM's code; it fails once the seed no longer has the
defect) and a `_refimpl` test that shows what refimpl does instead. Findings
refimpl has not fixed yet carry `xfail(strict=True)` on the refimpl half: it
turns into a failure the day refimpl is fixed, so the marker gets removed.

The seed is built once per session into a temporary directory; without the
seed file every `_seed` test is skipped. Tests that need `python -O` run a
subprocess. Every shared-memory segment made here is closed and unlinked.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from contextlib import suppress
from decimal import Decimal
from fractions import Fraction
from multiprocessing import Lock
from pathlib import Path
from types import ModuleType
from typing import Any

import msgpack
import pytest

from refimpl.serde import MsgpackSerde

REPO = Path(__file__).resolve().parents[2]
DEV_SHM = Path("/dev/shm")


# -- fixtures -------------------------------------------------------------------


@pytest.fixture(scope="session")
def seed(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    from shmref.seed.build import build_seed_module, default_seed_path

    path = default_seed_path()
    if path is None or not path.is_file():
        pytest.skip(f"seed file absent: {path} (set $SHMREF_SEED to vLLM's doc page)")
    return build_seed_module(tmp_path_factory.mktemp("seed"), path)


@pytest.fixture(scope="session")
def ref() -> ModuleType:
    return pytest.importorskip("refimpl")


class Shm:
    """Makes rings and storages, remembers them, closes them all afterwards."""

    def __init__(self) -> None:
        self.objects: list[Any] = []
        self.names: set[str] = set()

    def ring(self, mod: ModuleType, size: int, name: str | None = None, create: bool = True) -> Any:
        ring = mod.SingleWriterShmRingBuffer(size, name=name, create=create)
        self.objects.append(ring)
        if create:
            self.names.add(ring.shared_memory.name)
        return ring

    def writer(
        self,
        mod: ModuleType,
        size: int = 256,
        max_object_size: int = 64,
        n_readers: int = 1,
        lock: Any = None,
        serde: type | None = None,
        id_max: int | None = None,
    ) -> Any:
        ring = self.ring(mod, size)
        if id_max is not None:
            ring.ID_MAX = id_max
        extra = {} if serde is None else {"serde_class": serde}
        return mod.SingleWriterShmObjectStorage(
            max_object_size, n_readers, ring, reader_lock=lock, **extra
        )

    def reader(self, mod: ModuleType, writer: Any, serde: type | None = None) -> Any:
        size, name = writer.ring_buffer.handle()
        ring = self.ring(mod, size, name=name, create=False)
        return mod.SingleWriterShmObjectStorage(
            writer.max_object_size,
            writer.n_readers,
            ring,
            serde_class=serde or writer.serde_class,
            reader_lock=writer._reader_lock or Lock(),
        )

    def close_all(self) -> None:
        for obj in reversed(self.objects):
            with suppress(Exception):
                obj.close()

    def leaked(self) -> list[str]:
        return sorted(n for n in self.names if (DEV_SHM / n).exists())


@pytest.fixture
def shm() -> Iterator[Shm]:
    made = Shm()
    yield made
    gc.collect()  # exceptions raised inside access_buf keep views alive in cycles
    made.close_all()
    assert not made.leaked(), f"segments left in /dev/shm: {made.leaked()}"


def unique_name() -> str:
    return f"shmref_t_{os.getpid()}_{uuid.uuid4().hex[:10]}"


def read(writer: Any, reader: Any, key: str) -> Any:
    """One reader's read of `key`'s current handle, as vLLM's workers do it."""
    address, monotonic_id = writer.key_index[key]
    return reader.get(address, monotonic_id, writer.get_signature(key), key)


def consistent(storage: Any) -> bool:
    """Every key the writer knows resolves to a live chunk at its address."""
    metadata = storage.ring_buffer.metadata
    return all(metadata.get(mid) == address for address, mid in storage.key_index.values())


def count_of(storage: Any, address: int) -> int:
    with storage.ring_buffer.access_buf(address) as (view, _):
        return int.from_bytes(view[:4], "little", signed=True)


# -- serdes used to reach the error paths ------------------------------------------


def _pack(value: Any) -> tuple[bytes, bytes]:
    payload = msgpack.packb(value, use_bin_type=True)
    return payload, msgpack.packb(len(payload))


def _unpack(data: memoryview) -> Any:
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(bytes(data))
    length = unpacker.unpack()
    offset = unpacker.tell()
    return msgpack.unpackb(bytes(data[offset : offset + length]), raw=False)


class PlainSerde:
    """msgpack payload after a msgpack length header (the seed fallback's format)."""

    def serialize(self, value: Any) -> tuple[Any, int, bytes, int]:
        payload, header = _pack(value)
        return payload, len(payload), header, len(header)

    def deserialize(self, data: memoryview) -> Any:
        return _unpack(data)


class LyingSerde(PlainSerde):
    """Values starting with 'zero' claim 0 data bytes; 'bytearray' values come
    back as a bytearray. Both reach put's copy only after the allocation."""

    def serialize(self, value: Any) -> tuple[Any, int, bytes, int]:
        payload, header = _pack(value)
        if isinstance(value, str) and value.startswith("zero"):
            return payload, 0, header, len(header)
        if value == "bytearray":
            return bytearray(payload), len(payload), header, len(header)
        return payload, len(payload), header, len(header)


class FailFirstRead(MsgpackSerde):
    """The first deserialize in the process fails, as a reader's copy can
    (the writer's default serde, which both modules share, otherwise)."""

    failed: list[bool] = []

    def deserialize(self, data: memoryview) -> Any:
        if not FailFirstRead.failed:
            FailFirstRead.failed.append(True)
            raise MemoryError("simulated failure while copying the object")
        return super().deserialize(data)


HOOKS: list[Callable[[], None]] = []


class HookSerde(MsgpackSerde):
    """Runs the pending hooks (the writer acting) before copying the object
    (the writer's default serde, which both modules share, otherwise)."""

    def deserialize(self, data: memoryview) -> Any:
        while HOOKS:
            HOOKS.pop()()
        return super().deserialize(data)


class RawSerde:
    """Value n -> n payload bytes and a 1-byte header: exact chunk sizes."""

    def serialize(self, n: int) -> tuple[Any, int, bytes, int]:
        return b"x" * n, n, b"\x00", 1

    def deserialize(self, data: memoryview) -> Any:
        return len(data) - 1


# -- 1. validation by assert ---------------------------------------------------------

_DASH_O_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import importlib
    m = importlib.import_module(sys.argv[1])
    out = {}

    def attempt(name, fn):
        try:
            out[name] = ["ok", fn()]
        except Exception as exc:
            out[name] = [type(exc).__name__, str(exc)]

    ring = m.SingleWriterShmRingBuffer(128, create=True)
    reader = None
    try:
        attempt("alloc_0", lambda: ring.allocate_buf(0))
        attempt("alloc_-8", lambda: ring.allocate_buf(-8))
        attempt("alloc_8", lambda: ring.allocate_buf(8))
        out["metadata"] = sorted(ring.metadata.items())
        reader = m.SingleWriterShmRingBuffer(128, name=ring.shared_memory.name)
        with ring.access_buf(0) as (_, header):
            out["header_0_before"] = list(header)
        attempt("reader_alloc", lambda: reader.allocate_buf(16))
        with ring.access_buf(0) as (_, header):
            out["header_0_after"] = list(header)
        attempt("reader_free", lambda: list(reader.free_buf(lambda i, b: True)))
        attempt("attach_too_small", lambda: m.SingleWriterShmRingBuffer(
            1 << 20, name=ring.shared_memory.name).handle())
    finally:
        if reader is not None:
            reader.close()
        ring.close()
    attempt("alloc_after_close", lambda: ring.allocate_buf(8))
    print(json.dumps(out))
    """
)


def _run_dash_o(module_name: str, path: list[Path]) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in path))
    done = subprocess.run(
        [sys.executable, "-O", "-c", _DASH_O_SCRIPT, module_name],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_f01_asserts_vanish_under_dash_O_seed(seed: ModuleType) -> None:
    out = _run_dash_o("shmref_seed", [Path(seed.__file__).parent, REPO])
    assert out["alloc_0"][0] == "ok"  # a chunk with no data
    assert out["alloc_-8"] == ["ok", [8, 1]]  # a zero-size chunk...
    assert out["alloc_8"] == ["ok", [8, 2]]  # ...and the next one at the same address
    assert [address for _, address in out["metadata"]].count(8) == 2
    # A reader's allocate_buf writes a chunk header into the writer's segment
    # before failing on the missing writer-only state.
    assert out["reader_alloc"][0] == "AttributeError"
    assert out["header_0_after"] != out["header_0_before"]
    assert out["reader_free"][0] == "AttributeError"
    assert out["attach_too_small"][0] == "ok"  # a reader bigger than the segment
    assert out["alloc_after_close"][0] == "TypeError"


def test_f01_asserts_vanish_under_dash_O_refimpl(ref: ModuleType) -> None:
    out = _run_dash_o("refimpl", [REPO])
    for name in (
        "alloc_0",
        "alloc_-8",
        "reader_alloc",
        "reader_free",
        "attach_too_small",
        "alloc_after_close",
    ):
        assert out[name][0] == "ValueError", (name, out[name])
    assert out["header_0_after"] == out["header_0_before"]


def test_f01_attach_too_small_is_an_assert_seed(seed: ModuleType, shm: Shm) -> None:
    ring = shm.ring(seed, 16)
    if not __debug__:  # pytest itself under -O: the check is gone
        shm.ring(seed, 1 << 20, name=ring.shared_memory.name, create=False)
        return
    with pytest.raises(AssertionError):
        shm.ring(seed, 1 << 20, name=ring.shared_memory.name, create=False)


def test_f01_attach_too_small_refimpl(ref: ModuleType, shm: Shm) -> None:
    ring = shm.ring(ref, 16)
    with pytest.raises(ValueError):
        shm.ring(ref, 1 << 20, name=ring.shared_memory.name, create=False)


# -- 2. bad handles -------------------------------------------------------------------

BAD_HANDLES = [
    ("negative address", lambda a, i: (-1, i), "OverflowError"),
    ("address >= 2**64", lambda a, i: (2**64, i), "OverflowError"),
    ("negative id", lambda a, i: (a, -1), "OverflowError"),
    ("id >= 2**32", lambda a, i: (a, 2**32), "OverflowError"),
    ("float address", lambda a, i: (float(a), i), "AttributeError"),
    ("None id", lambda a, i: (a, None), "AttributeError"),
    ("str address", lambda a, i: (str(a), i), "AttributeError"),
]


def _signed_reader(mod: ModuleType, shm: Shm) -> tuple[Any, Any, int, int, list[int]]:
    writer = shm.writer(mod, lock=Lock())
    address, monotonic_id = writer.put("k", "v")
    return writer, shm.reader(mod, writer), address, monotonic_id, writer.get_signature("k")


@pytest.mark.parametrize("what,make,error", BAD_HANDLES, ids=[b[0] for b in BAD_HANDLES])
def test_f02_bad_handle_is_not_a_value_error_seed(
    seed: ModuleType, shm: Shm, what: str, make: Callable, error: str
) -> None:
    _, reader, address, monotonic_id, signature = _signed_reader(seed, shm)
    bad_address, bad_id = make(address, monotonic_id)
    with pytest.raises(Exception) as raised:
        reader.get(bad_address, bad_id, signature, "k")
    assert type(raised.value).__name__ == error
    with pytest.raises(Exception) as raised:
        reader.touch("k", bad_address, bad_id, signature)
    assert type(raised.value).__name__ == error


def test_f02_bool_handle_accepted_seed(seed: ModuleType, shm: Shm) -> None:
    _, reader, address, monotonic_id, signature = _signed_reader(seed, shm)
    assert (address, monotonic_id) == (0, 0)
    assert reader.get(False, False, signature, "k") == "v"


@pytest.mark.parametrize("what,make,error", BAD_HANDLES, ids=[b[0] for b in BAD_HANDLES])
def test_f02_bad_handle_refimpl(
    ref: ModuleType, shm: Shm, what: str, make: Callable, error: str
) -> None:
    _, reader, address, monotonic_id, signature = _signed_reader(ref, shm)
    bad_address, bad_id = make(address, monotonic_id)
    with pytest.raises(ValueError):
        reader.get(bad_address, bad_id, signature, "k")
    with pytest.raises(ValueError):
        reader.touch("k", bad_address, bad_id, signature)


def test_f02_bool_handle_refimpl(ref: ModuleType, shm: Shm) -> None:
    _, reader, address, monotonic_id, signature = _signed_reader(ref, shm)
    with pytest.raises(ValueError):
        reader.get(False, False, signature, "k")


# -- 3. a put that fails after allocating wedges the store ------------------------------


def _fill_after_bad_put(mod: ModuleType, shm: Shm, bad: str) -> tuple[Any, BaseException]:
    """Put 'a', a bad value, then small values until a put needs reclaiming."""
    writer = shm.writer(mod, size=256, max_object_size=64, n_readers=0, serde=LyingSerde)
    writer.put("a", "x" * 10)
    with pytest.raises(ValueError) as bad_put:
        writer.put("b", bad)
    return writer, bad_put.value


@pytest.mark.parametrize("bad", ["zero-length-claim-for-a-longer-value", "bytearray"])
def test_f03_failed_put_wedges_the_store_seed(seed: ModuleType, shm: Shm, bad: str) -> None:
    writer, _ = _fill_after_bad_put(seed, shm, bad)
    orphan = max(writer.ring_buffer.metadata)
    assert orphan not in writer.writer_flag  # allocated, never indexed
    with pytest.raises(KeyError):  # the first put that needs reclaiming...
        for n in range(100):
            writer.put(f"k{n}", "y" * 20)
    with pytest.raises(KeyError):  # ...and every later one
        writer.put("later", "y" * 20)
    # free_buf had already dropped 'a''s chunk when the KeyError hit, so the
    # writer still hands out a handle whose chunk is gone.
    assert writer.is_cached("a")
    assert not consistent(writer)


@pytest.mark.parametrize("bad", ["zero-length-claim-for-a-longer-value", "bytearray"])
def test_f03_failed_put_leaves_store_usable_refimpl(ref: ModuleType, shm: Shm, bad: str) -> None:
    writer = shm.writer(ref, size=256, max_object_size=64, n_readers=0, serde=LyingSerde)
    writer.put("a", "x" * 10)
    live = dict(writer.ring_buffer.metadata)
    try:
        writer.put("b", bad)
    except ValueError:
        assert writer.ring_buffer.metadata == live  # validated before allocating
    for n in range(100):
        writer.put(f"k{n}", "y" * 20)
    assert consistent(writer)


class SlowList(list):
    """A serializer's list of buffers; iterating it lets the writer be re-entered."""

    def __iter__(self) -> Iterator[Any]:
        pending = HOOKS[:]
        HOOKS.clear()
        for hook in pending:
            hook()
        return super().__iter__()


class ListSerde:
    def serialize(self, value: str) -> tuple[Any, int, bytes, int]:
        payload = value.encode()
        return SlowList([payload]), len(payload), b"", 0

    def deserialize(self, data: memoryview) -> Any:
        return bytes(data).decode()


def _reentrant_put(mod: ModuleType, shm: Shm) -> tuple[Any, list[BaseException]]:
    """A second thread's puts land while the first put is copying its object
    (as with vLLM's renderer workers > 1): the second one must reclaim and
    meets the first put's chunk, allocated but not yet indexed. Returns the
    errors of the interleaved puts; the first put itself completes."""
    writer = shm.writer(mod, size=64, max_object_size=24, n_readers=0, serde=ListSerde)
    writer.put("a", "a" * 10)  # 22-byte chunks
    writer.put("b", "b" * 10)
    errors: list[BaseException] = []

    def interleave() -> None:
        untracked = [i for i in writer.ring_buffer.metadata if i not in writer.writer_flag]
        if not untracked:
            HOOKS.append(interleave)  # not in the window yet
            return
        for key in ("d", "e"):
            try:
                writer.put(key, key * 10)
            except Exception as exc:  # what the other thread would see
                errors.append(exc.with_traceback(None))  # keep no frame (and view) alive

    HOOKS.clear()
    HOOKS.append(interleave)
    try:
        writer.put("c", "c" * 10)
    finally:
        HOOKS.clear()
    return writer, errors


def test_f03_interleaved_put_raises_key_error_seed(seed: ModuleType, shm: Shm) -> None:
    writer, errors = _reentrant_put(seed, shm)
    assert len(errors) == 1 and isinstance(errors[0], KeyError)
    assert errors[0].args == (writer.key_index["c"][1],)  # the unindexed chunk's id


@pytest.mark.xfail(strict=True, reason="FINDINGS #3: refimpl's writer is single-threaded too")
def test_f03_interleaved_put_refimpl(ref: ModuleType, shm: Shm) -> None:
    writer, errors = _reentrant_put(ref, shm)
    assert not any(isinstance(e, KeyError) for e in errors)
    assert consistent(writer)


# -- 4. id exhaustion ---------------------------------------------------------------------


def test_f04_more_live_chunks_than_ids_seed(seed: ModuleType, shm: Shm) -> None:
    ring = shm.ring(seed, 1024)
    ring.ID_MAX = 4
    handles = [ring.allocate_buf(8) for _ in range(5)]
    assert handles[0][1] == handles[4][1] == 0  # two live chunks with id 0
    assert ring.metadata[0] == handles[4][0]  # the first one is forgotten


def test_f04_freeing_id_max_chunks_at_once_seed(seed: ModuleType, shm: Shm) -> None:
    writer = shm.writer(seed, size=1024, n_readers=0, id_max=4)
    for n in range(4):
        writer.put(f"k{n}", n)
    writer.free_unused()  # reclaims all 4 chunks, reports none
    assert writer.ring_buffer.metadata == {}
    assert sorted(writer.key_index) == ["k0", "k1", "k2", "k3"]
    # k0's stale entry now names the new object's address and id.
    assert writer.put("new", "other") == writer.key_index["k0"]
    with pytest.raises(ValueError):
        writer.put("k0", 0)  # "already exists"


def test_f04_id_exhaustion_refimpl(ref: ModuleType, shm: Shm) -> None:
    ring = shm.ring(ref, 1024)
    ring.ID_MAX = 4
    for _ in range(3):
        ring.allocate_buf(8)
    with pytest.raises(MemoryError):
        ring.allocate_buf(8)
    writer = shm.writer(ref, size=1024, n_readers=0, id_max=4)
    for n in range(8):
        writer.put(f"k{n}", n)
        assert consistent(writer)
    writer.free_unused()
    assert consistent(writer)


# -- 5. id wrap: a stale handle reads a foreign object -------------------------------------


def _stale_handle_after_wrap(mod: ModuleType, shm: Shm) -> Any:
    writer = shm.writer(mod, size=1024, n_readers=1, lock=Lock(), id_max=4)
    reader = shm.reader(mod, writer)
    address, monotonic_id = writer.put("k0", "v0")
    signature = writer.get_signature("k0")
    read(writer, reader, "k0")
    for n in range(1, 5):  # ids 1, 2, 3, 0 again, each at address 0
        writer.free_unused()
        writer.put(f"k{n}", f"v{n}")
        read(writer, reader, f"k{n}")
    assert writer.key_index["k4"] == (address, monotonic_id)
    return reader.get(address, monotonic_id, signature, "k0")


def test_f05_stale_handle_after_id_wrap_seed(seed: ModuleType, shm: Shm) -> None:
    assert _stale_handle_after_wrap(seed, shm) == "v4"


@pytest.mark.xfail(
    strict=True, reason="FINDINGS #5: refimpl keeps 31-bit ids and (key, address, id) signatures"
)
def test_f05_stale_handle_after_id_wrap_refimpl(ref: ModuleType, shm: Shm) -> None:
    with pytest.raises(ValueError):
        _stale_handle_after_wrap(ref, shm)


# -- 6. writer semantics keyed on reader_lock ----------------------------------------------


def test_f06_writer_with_lock_reads_like_a_reader_seed(seed: ModuleType, shm: Shm) -> None:
    writer = shm.writer(seed, n_readers=1, lock=Lock())  # what handle() needs
    address, monotonic_id = writer.put("k", "v")
    assert writer.get(address, monotonic_id) == "v"
    assert count_of(writer, address) == 1  # counted as the one reader's read
    writer.free_unused()
    assert not writer.is_cached("k")  # freed though no reader has read it
    with pytest.raises(ValueError, match="signature"):
        writer.touch("k")  # the writer's touch takes the reader path


def test_f06_lockless_writer_cannot_share_a_handle_seed(seed: ModuleType, shm: Shm) -> None:
    writer = shm.writer(seed, n_readers=1)  # as vLLM's ShmObjectStoreSenderCache
    with pytest.raises(ValueError, match="Lock must be provided"):
        seed.SingleWriterShmObjectStorage.create_from_handle(writer.handle())


def test_f06_writer_with_lock_reads_like_a_reader_refimpl(ref: ModuleType, shm: Shm) -> None:
    """refimpl follows the seed: no vLLM caller is harmed (the sender has no
    lock and never calls get), and vLLM's test_blocking_unread_object needs it."""
    writer = shm.writer(ref, n_readers=1, lock=Lock())
    address, monotonic_id = writer.put("k", "v")
    assert writer.get(address, monotonic_id) == "v"
    assert count_of(writer, address) == 1
    writer.free_unused()
    assert not writer.is_cached("k")
    with pytest.raises(ValueError, match="signature"):
        writer.touch("k")


def test_f06_lockless_writer_keeps_writer_semantics_refimpl(ref: ModuleType, shm: Shm) -> None:
    writer = shm.writer(ref, n_readers=1)  # as vLLM's ShmObjectStoreSenderCache
    address, monotonic_id = writer.put("k", "v")
    assert writer.get(address, monotonic_id) == "v"
    assert count_of(writer, address) == 0  # the writer's read is no reader's
    reader = shm.reader(ref, writer)
    assert reader.get(address, monotonic_id, writer.get_signature("k"), "k") == "v"
    writer.touch("k")  # protects: the object owes no read and stays
    writer.free_unused()
    assert writer.is_cached("k")
    writer.release_touches()
    writer.free_unused()
    assert not writer.is_cached("k")


# -- 7. the reader count overflows ---------------------------------------------------------


def _count_at_limit(mod: ModuleType, shm: Shm) -> tuple[Any, Any, int]:
    writer = shm.writer(mod, n_readers=2, lock=Lock())
    reader = shm.reader(mod, writer)
    address, _ = writer.put("k", "v")
    with writer.ring_buffer.access_buf(address) as (view, _):
        view[:4] = (2**31 - 1).to_bytes(4, "little", signed=True)  # 2**31 - 1 reads so far
    return writer, reader, address


def test_f07_reader_count_overflows_seed(seed: ModuleType, shm: Shm) -> None:
    writer, reader, address = _count_at_limit(seed, shm)
    with pytest.raises(OverflowError):
        read(writer, reader, "k")
    # 2**30 hand-outs to 2 readers owe 2**31 reads: more than the count holds.
    writer.writer_flag[writer.key_index["k"][1]] = 2**30
    writer.free_unused()
    assert writer.is_cached("k")  # can never be reclaimed


def test_f07_reader_count_at_limit_refimpl(ref: ModuleType, shm: Shm) -> None:
    writer, reader, _ = _count_at_limit(ref, shm)
    overflowed = False
    try:
        value = read(writer, reader, "k")
    except OverflowError:  # not kept: its frames hold views of the segment
        overflowed = True
    assert not overflowed
    assert value == "v"
    # 2**30 hand-outs to 2 readers owe 2**31 reads: the wrapped count has them all.
    writer.writer_flag[writer.key_index["k"][1]] = 2**30
    writer.free_unused()
    assert not writer.is_cached("k")


# -- 8. a failed read pins its chunk and stops FIFO reclamation ----------------------------


def _fill_after_failed_read(mod: ModuleType, shm: Shm) -> tuple[list[str], Any]:
    FailFirstRead.failed.clear()
    writer = shm.writer(mod, size=256, max_object_size=40, n_readers=1, lock=Lock())
    reader = shm.reader(mod, writer, serde=FailFirstRead)
    outcomes = []
    for n in range(30):
        try:
            writer.put(f"k{n}", f"value {n}")
        except MemoryError:
            outcomes.append("put:MemoryError")
            continue
        try:
            read(writer, reader, f"k{n}")
            outcomes.append("read")
        except MemoryError:
            outcomes.append("read failed")
    return outcomes, writer


def test_f08_failed_read_wedges_the_ring_seed(seed: ModuleType, shm: Shm) -> None:
    outcomes, writer = _fill_after_failed_read(seed, shm)
    assert outcomes[0] == "read failed"
    assert outcomes[-5:] == ["put:MemoryError"] * 5  # though every later object was read
    assert writer.ring_buffer.monotonic_id_start == 0  # stuck at the failed read


def test_f08_failed_read_is_counted_refimpl(ref: ModuleType, shm: Shm) -> None:
    outcomes, _ = _fill_after_failed_read(ref, shm)
    assert outcomes[0] == "read failed"
    assert "put:MemoryError" not in outcomes


# -- 9. close() and __del__ ----------------------------------------------------------------


def test_f09_close_with_exported_view_leaks_segment_seed(seed: ModuleType, shm: Shm) -> None:
    ring = shm.ring(seed, 256)
    name = ring.shared_memory.name
    view = ring.shared_memory.buf[0:8]
    with pytest.raises(BufferError):
        ring.close()
    assert (DEV_SHM / name).exists()  # unlink was skipped
    view.release()
    ring.close()
    assert not (DEV_SHM / name).exists()


def test_f09_close_with_exported_view_refimpl(ref: ModuleType, shm: Shm) -> None:
    ring = shm.ring(ref, 256)
    name = ring.shared_memory.name
    view = ring.shared_memory.buf[0:8]
    with suppress(BufferError):
        ring.close()
    assert not (DEV_SHM / name).exists()
    view.release()
    ring.close()


def _old_ring_collected_after_new_one_made(mod: ModuleType, shm: Shm) -> bool:
    """vLLM names its segment with a fixed name: a writer closes, a new writer
    is made under the same name, then the old object is garbage-collected."""
    name = unique_name()
    old = mod.SingleWriterShmRingBuffer(256, name=name, create=True)
    old.close()
    shm.ring(mod, 256, name=name)
    del old
    gc.collect()
    return (DEV_SHM / name).exists()


def test_f09_del_after_close_unlinks_a_new_segment_seed(seed: ModuleType, shm: Shm) -> None:
    assert not _old_ring_collected_after_new_one_made(seed, shm)


def test_f09_del_after_close_refimpl(ref: ModuleType, shm: Shm) -> None:
    assert _old_ring_collected_after_new_one_made(ref, shm)


# -- 10. a read that overlaps clear() and reuse returns a foreign object -----------------------


def _read_across_clear(mod: ModuleType, shm: Shm) -> Any:
    writer = shm.writer(mod, n_readers=1, lock=Lock())
    reader = shm.reader(mod, writer, serde=HookSerde)
    address, monotonic_id = writer.put("k0", "value-of-k0")
    signature = writer.get_signature("k0")

    def writer_acts() -> None:  # while the reader copies: clear, then a new put
        writer.clear()
        assert writer.put("k1", "value-of-k1") == (address, monotonic_id + 1)

    HOOKS.clear()
    HOOKS.append(writer_acts)
    try:
        return reader.get(address, monotonic_id, signature, "k0")
    finally:
        HOOKS.clear()


def test_f10_read_across_clear_returns_foreign_object_seed(seed: ModuleType, shm: Shm) -> None:
    assert _read_across_clear(seed, shm) == "value-of-k1"


def test_f10_read_across_clear_refimpl(ref: ModuleType, shm: Shm) -> None:
    with pytest.raises(ValueError):
        _read_across_clear(ref, shm)


# -- 11. put's reclaim target can be too small -------------------------------------------------


def _spurious_memory_error(mod: ModuleType, shm: Shm) -> Any:
    """42-byte ring, max_object_size 13 (reclaim target 26 bytes), every object
    reclaimable (n_readers=0): five 14-byte chunks, then one of 15 bytes."""
    writer = shm.writer(mod, size=42, max_object_size=13, n_readers=0, serde=RawSerde)
    for n in range(5):
        writer.put(f"k{n}", 1)
    return writer


def test_f11_put_fails_though_everything_is_reclaimable_seed(seed: ModuleType, shm: Shm) -> None:
    writer = _spurious_memory_error(seed, shm)
    with pytest.raises(MemoryError):
        writer.put("last", 2)
    writer.put("last", 2)  # the same put succeeds when tried again


def test_f11_put_reclaims_enough_refimpl(ref: ModuleType, shm: Shm) -> None:
    writer = _spurious_memory_error(ref, shm)
    writer.put("last", 2)


# -- 12. chunk sizes beyond the 4-byte size field ------------------------------------------------

_BIG = 2**31 + 64


def _need_sparse_room() -> None:
    if shutil.disk_usage(DEV_SHM).free < _BIG + (1 << 28):
        pytest.skip("/dev/shm too small for a sparse 2 GiB segment")


def test_f12_chunk_size_overflows_size_field_seed(seed: ModuleType, shm: Shm) -> None:
    _need_sparse_room()
    ring = shm.ring(seed, _BIG)
    with pytest.raises(OverflowError):
        ring.allocate_buf(2**31 - 8)


def test_f12_chunk_size_limit_refimpl(ref: ModuleType, shm: Shm) -> None:
    _need_sparse_room()
    ring = shm.ring(ref, _BIG)
    with pytest.raises(ValueError):
        ring.allocate_buf(2**31 - 8)


# -- 13. docstrings that the code does not follow --------------------------------------------------


def _scenarios(mod: ModuleType, shm: Shm) -> dict[str, Any]:
    """The ring docstring's Scenarios 1-4 (100-byte ring), as the code runs them."""
    ring = shm.ring(mod, 100)
    freed: set[int] = set()
    out: dict[str, Any] = {}
    out["alloc 20"] = ring.allocate_buf(20)
    with ring.access_buf(0) as (_, header):
        out["header of id 0"] = header
    out["alloc 30"] = ring.allocate_buf(30)
    out["S1 end"] = ring.data_buffer_end
    freed.add(0)
    list(ring.free_buf(lambda i, _b: i in freed))
    out["S2 one freed"] = (ring.data_buffer_start, ring.data_buffer_end)
    freed.add(1)
    list(ring.free_buf(lambda i, _b: i in freed))
    out["S2 both freed"] = (ring.data_buffer_start, ring.data_buffer_end)
    out["S3 alloc 40"] = ring.allocate_buf(40)
    out["S3 end"] = ring.data_buffer_end
    try:
        out["S4 alloc 20"] = ring.allocate_buf(20)
    except MemoryError:
        out["S4 alloc 20"] = "MemoryError"
    return out


EXPECTED_SCENARIOS = {
    "alloc 20": (0, 0),
    "header of id 0": (0, 28),  # docstring: size:20; the size field counts the header
    "alloc 30": (28, 1),
    "S1 end": 66,
    "S2 one freed": (28, 66),
    "S2 both freed": (0, 0),  # docstring: start=end(66)
    "S3 alloc 40": (0, 2),  # docstring: wraps, end(148), start(66)
    "S3 end": 48,
    "S4 alloc 20": (48, 3),  # docstring: MemoryError
}


def test_f13_docstring_scenarios_seed(seed: ModuleType, shm: Shm) -> None:
    assert _scenarios(seed, shm) == EXPECTED_SCENARIOS


def test_f13_docstring_scenarios_refimpl(ref: ModuleType, shm: Shm) -> None:
    assert _scenarios(ref, shm) == EXPECTED_SCENARIOS


def _docstring_claims(mod: ModuleType, shm: Shm) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # put: "Attempts to free max_object_size bytes": 16-byte chunks, max 16.
    writer = shm.writer(mod, size=64, max_object_size=16, n_readers=0, serde=RawSerde)
    for n in range(4):
        writer.put(f"k{n}", 3)  # 4 + 1 + 3 = 8 bytes, a 16-byte chunk
    writer.put("k4", 3)
    out["reclaimed by one put"] = 4 - sum(f"k{n}" in writer.key_index for n in range(4))
    # default_is_free_check: "checks if the first 4 bytes are zero".
    writer = shm.writer(mod, n_readers=1)
    address, monotonic_id = writer.put("k", "v")
    with writer.ring_buffer.access_buf(address) as (view, _):
        out["count is zero"] = bytes(view[:4]) == bytes(4)
        out["free when count is zero"] = writer.default_is_free_check(monotonic_id, view)
    # get_cached: "Get the cached object by key if it exists".
    out["get_cached returns"] = type(writer.get_cached("k")).__name__
    try:
        writer.get_cached("absent")
        out["get_cached of an absent key"] = "returned"
    except KeyError:
        out["get_cached of an absent key"] = "KeyError"
    # class docstring: "Existing keys are not overwritten, just re-referenced".
    try:
        writer.put("k", "again")
        out["duplicate put"] = "re-referenced"
    except ValueError:
        out["duplicate put"] = "ValueError"
    return out


EXPECTED_CLAIMS = {
    "reclaimed by one put": 2,  # 2 * max_object_size, not max_object_size
    "count is zero": True,
    "free when count is zero": False,  # count >= writer_flag * n_readers decides
    "get_cached returns": "tuple",  # the handle (address, id), not the object
    "get_cached of an absent key": "KeyError",  # not "if it exists"
    "duplicate put": "ValueError",
}


def test_f13_docstring_claims_seed(seed: ModuleType, shm: Shm) -> None:
    assert _docstring_claims(seed, shm) == EXPECTED_CLAIMS


def test_f13_docstring_claims_refimpl(ref: ModuleType, shm: Shm) -> None:
    # FINDINGS #11: refimpl reclaims 2*(16 + 8) - 1 = 47 bytes, three 16-byte chunks
    assert _docstring_claims(ref, shm) == {**EXPECTED_CLAIMS, "reclaimed by one put": 3}


# -- the extractor itself ---------------------------------------------------------------------


def test_seedbuild_missing_seed_is_a_clear_error(tmp_path: Path) -> None:
    from shmref.seed.build import SeedError, build_seed_module

    with pytest.raises(SeedError, match="missing seed .*absent.txt does not exist"):
        build_seed_module(tmp_path / "out", tmp_path / "absent.txt")


def _spawned_read(
    handle: Any, address: int, monotonic_id: int, signature: list[int], out: Any
) -> None:
    import shmref_seed

    reader = shmref_seed.SingleWriterShmObjectStorage.create_from_handle(handle)
    try:
        out.put(reader.get(address, monotonic_id, signature, "k"))
    finally:
        reader.close()


def test_seedbuild_module_importable_in_spawned_child(seed: ModuleType, shm: Shm) -> None:
    import multiprocessing

    assert seed.__name__ == "shmref_seed" and sys.modules["shmref_seed"] is seed
    context = multiprocessing.get_context("spawn")
    writer = shm.writer(seed, n_readers=1, lock=context.Lock())
    address, monotonic_id = writer.put("k", {"a": [1, 2]})
    out = context.Queue()
    child = context.Process(
        target=_spawned_read,
        args=(writer.handle(), address, monotonic_id, writer.get_signature("k"), out),
    )
    child.start()
    try:
        value = out.get(timeout=60)
    finally:
        child.join(timeout=60)
    assert child.exitcode == 0
    assert value == {"a": [1, 2]}
    assert count_of(writer, address) == 1  # the child's read was counted


# -- 14. a bad buffer size leaks a segment --------------------------------------------------


def _segments_left_by_bad_size(mod: ModuleType) -> set[str]:
    """Segments this process created (the leak-guard plugin, which also sees a
    creation that fails before sizing the segment; other processes' segments
    are not blamed) that the failed constructor left behind."""
    from shmref.testing import leaks as shmleaks

    shmleaks.start()
    before = shmleaks.created()
    with suppress(Exception):
        mod.SingleWriterShmRingBuffer(64.0, create=True)  # type: ignore[arg-type]
    left = {n.lstrip("/") for n in shmleaks.created() - before}
    left = {n for n in left if (DEV_SHM / n).exists()}
    for name in left:  # clean up what the constructor leaked
        with suppress(FileNotFoundError):
            os.unlink(DEV_SHM / name)
    return left


def test_f14_bad_buffer_size_leaks_a_segment_seed(seed: ModuleType) -> None:
    assert len(_segments_left_by_bad_size(seed)) == 1


def test_f14_bad_buffer_size_refimpl(ref: ModuleType) -> None:
    assert _segments_left_by_bad_size(ref) == set()


# -- 15. the writer's get accepts look-alike ids and aliased addresses ----------------------

LOOKALIKE_IDS = [0.0, Fraction(0), Decimal(0), False, 0j]


def _writer_get_outcomes(mod: ModuleType, shm: Shm, handles: list[tuple[Any, Any]]) -> list[str]:
    """What the writer's get does with each (address, id); the real handle is (0, 0)."""
    writer = shm.writer(mod, size=256, n_readers=1)
    assert writer.put("k", "v") == (0, 0)
    outcomes = []
    for address, monotonic_id in handles:
        try:
            outcomes.append(f"returned {writer.get(address, monotonic_id)!r}")
        except ValueError:
            outcomes.append("ValueError")
    return outcomes


def test_f15_writer_get_accepts_lookalike_ids_seed(seed: ModuleType, shm: Shm) -> None:
    handles = [(0, x) for x in LOOKALIKE_IDS]
    assert _writer_get_outcomes(seed, shm, handles) == ["returned 'v'"] * len(handles)


def test_f15_writer_get_accepts_aliased_addresses_seed(seed: ModuleType, shm: Shm) -> None:
    handles = [(256, 0), (-256, 0), (256 * 1000, 0)]  # address + k * data_buffer_size
    assert _writer_get_outcomes(seed, shm, handles) == ["returned 'v'"] * len(handles)


def test_f15_writer_get_rejects_lookalike_ids_refimpl(ref: ModuleType, shm: Shm) -> None:
    handles = [(0, x) for x in LOOKALIKE_IDS]
    assert _writer_get_outcomes(ref, shm, handles) == ["ValueError"] * len(handles)


@pytest.mark.xfail(strict=True, reason="FINDINGS #15: refimpl's writer get reduces the address")
def test_f15_writer_get_rejects_aliased_addresses_refimpl(ref: ModuleType, shm: Shm) -> None:
    handles = [(256, 0), (-256, 0), (256 * 1000, 0)]
    assert _writer_get_outcomes(ref, shm, handles) == ["ValueError"] * len(handles)


# -- 16. put accepts keys that are not str ----------------------------------------------------

NON_STR_KEYS = [None, 5, b"k", 1.5, ("t",)]


def test_f16_non_str_key_is_stored_but_cannot_be_signed_seed(seed: ModuleType, shm: Shm) -> None:
    writer = shm.writer(seed, size=1024, n_readers=1)
    for key in NON_STR_KEYS:
        writer.put(key, "v")
        assert writer.is_cached(key)
        with pytest.raises(AttributeError):  # no handle can be issued for it
            writer.get_signature(key)


def test_f16_non_str_key_rejected_refimpl(ref: ModuleType, shm: Shm) -> None:
    writer = shm.writer(ref, size=1024, n_readers=1)
    for key in NON_STR_KEYS:
        with pytest.raises(ValueError):
            writer.put(key, "v")
    assert writer.ring_buffer.metadata == {}  # rejected before allocating


# -- 17. a key that is not valid UTF-8 is stored, cannot be signed, and pins the ring ----------


def _unsignable_key_then_fill(mod: ModuleType, shm: Shm) -> tuple[list[str], Any]:
    """Put a lone-surrogate key (as a hand-out would), then sign its handle; then
    keep putting and reading other keys until the ring needs reclaiming."""
    writer = shm.writer(mod, size=256, max_object_size=40, n_readers=1, lock=Lock())
    reader = shm.reader(mod, writer)
    outcomes = []
    try:
        writer.put("\ud800", "v")
        outcomes.append("put ok")
        writer.get_signature("\ud800")
        outcomes.append("signed")
    except UnicodeEncodeError:
        outcomes.append("UnicodeEncodeError")
    except ValueError:
        outcomes.append("ValueError")
    for n in range(30):
        try:
            writer.put(f"k{n}", f"value {n}")
        except MemoryError:
            outcomes.append("put:MemoryError")
            continue
        read(writer, reader, f"k{n}")
    return outcomes, writer


def test_f17_unsignable_key_pins_the_ring_seed(seed: ModuleType, shm: Shm) -> None:
    outcomes, writer = _unsignable_key_then_fill(seed, shm)
    assert outcomes[:2] == ["put ok", "UnicodeEncodeError"]  # stored, no handle possible
    assert outcomes[-5:] == ["put:MemoryError"] * 5  # it owes a read nobody can make
    assert writer.ring_buffer.monotonic_id_start == 0


def test_f17_unsignable_key_rejected_refimpl(ref: ModuleType, shm: Shm) -> None:
    outcomes, _ = _unsignable_key_then_fill(ref, shm)
    assert outcomes[0] == "ValueError"  # refused before allocating
    assert "put:MemoryError" not in outcomes


# -- 18. writer-only methods on a reader ----------------------------------------------------------

WRITER_ONLY = [
    ("put", ("k", "v")),
    ("is_cached", ("k",)),
    ("get_cached", ("k",)),
    ("get_signature", ("k",)),
    ("release_touches", ()),
    ("free_unused", ()),
]


def _writer_only_on_reader(mod: ModuleType, shm: Shm) -> dict[str, str]:
    writer = shm.writer(mod, lock=Lock())
    writer.put("k", "v")
    reader = shm.reader(mod, writer)
    out = {}
    for name, args in WRITER_ONLY:
        try:
            getattr(reader, name)(*args)
            out[name] = "ok"
        except Exception as exc:
            out[name] = type(exc).__name__
    return out


def test_f18_writer_only_methods_on_a_reader_seed(seed: ModuleType, shm: Shm) -> None:
    out = _writer_only_on_reader(seed, shm)
    expected = {name: "AttributeError" for name, _ in WRITER_ONLY}
    expected["free_unused"] = "AssertionError" if __debug__ else "AttributeError"
    assert out == expected


def test_f18_writer_only_methods_on_a_reader_refimpl(ref: ModuleType, shm: Shm) -> None:
    assert _writer_only_on_reader(ref, shm) == {name: "ValueError" for name, _ in WRITER_ONLY}


# -- 8b. one unread hand-out stops reclamation of everything behind it -----------------------------


def _unread_head_then_fill(mod: ModuleType, shm: Shm) -> tuple[list[str], Any, Any]:
    """k0 is handed out but not read yet (its request waits in the scheduler's
    queue); every later object is read at once. Puts until one fails."""
    writer = shm.writer(mod, size=256, max_object_size=40, n_readers=1, lock=Lock())
    reader = shm.reader(mod, writer)
    writer.put("k0", "value 0")
    outcomes = []
    for n in range(1, 30):
        try:
            writer.put(f"k{n}", f"value {n}")
        except MemoryError:
            outcomes.append("put:MemoryError")
            break
        read(writer, reader, f"k{n}")
        outcomes.append("read")
    return outcomes, writer, reader


def test_f08_unread_head_blocks_reclamation_seed(seed: ModuleType, shm: Shm) -> None:
    outcomes, writer, reader = _unread_head_then_fill(seed, shm)
    assert outcomes[-1] == "put:MemoryError"
    live = len(writer.ring_buffer.metadata)
    assert live >= 5 and writer.ring_buffer.monotonic_id_start == 0
    # Every live chunk but the head is reclaimable: the head alone blocks them.
    read(writer, reader, "k0")
    writer.put("after", "value after")
    assert len(writer.ring_buffer.metadata) < live


@pytest.mark.xfail(
    strict=True, reason="FINDINGS #8b: refimpl reclaims in FIFO order too (spec's free rule)"
)
def test_f08_unread_head_does_not_block_reclamation_refimpl(ref: ModuleType, shm: Shm) -> None:
    outcomes, _, _ = _unread_head_then_fill(ref, shm)
    assert "put:MemoryError" not in outcomes


# -- hazards H1, H5: the TLC stories as seed/refimpl pairs (tests/spec/test_stories.py plays both)


def _double_read(mod: ModuleType) -> tuple[Any, dict[int, int]]:
    """MCDoubleRead: reader 0 reads one delivery twice; reader 1's read completes
    the count while reader 0 is mid-read; the chunk is reclaimed and reused."""
    from shmref.store.driver import Driver

    with Driver(mod, 4, n_readers=2, id_max=5, max_obj=2, layout=True) as story:
        k1 = ("k1", 0, 0)
        story.put("k1", 1)
        story.get_begin(0, k1), story.get_begin(1, k1)
        story.get_copy(0), story.get_copy(1)
        story.get_end(0)
        story.get_begin(0, k1)  # the same delivery read again
        story.get_end(1)
        story.free_unused()
        assert story.put("k2", 1).result == (0, 1)
        story.get_copy(0)
        outcome = story.get_end(0)
        return outcome, story.observe()["counts"]


def test_h1_double_read_returns_another_keys_value_seed(seed: ModuleType) -> None:
    outcome, counts = _double_read(seed)
    assert outcome.result == "k2" and counts == {1: 1}


def test_h1_double_read_is_refused_refimpl(ref: ModuleType) -> None:
    outcome, counts = _double_read(ref)
    assert outcome.status == "stale" and counts == {1: 0}


def _never_read_delivery(mod: ModuleType) -> tuple[list[str], int]:
    """MCLostReader: reader 1 never reads the first delivery (request aborted
    while queued); every later object is read by both readers."""
    from shmref.store.driver import Driver

    with Driver(mod, 4, n_readers=2, id_max=64, max_obj=2, layout=True) as story:
        story.put("pinned", 1)
        story.get_begin(0, ("pinned", 0, 0)), story.get_copy(0), story.get_end(0)
        outcomes = []
        for i in range(6):
            outcome = story.put(f"k{i}", 1)
            outcomes.append(outcome.status)
            if outcome.status == "ok":
                for reader in (0, 1):
                    story.get_begin(reader, (f"k{i}", *outcome.result))
                    story.get_copy(reader), story.get_end(reader)
        return outcomes, story.observe()["monotonic_id_start"]


def test_h5_delivery_never_read_pins_the_ring_seed(seed: ModuleType) -> None:
    outcomes, start = _never_read_delivery(seed)
    assert outcomes[-1] == "MemoryError" and start == 0


@pytest.mark.xfail(strict=True, reason="H5: reads that never happen need a release (assumption)")
def test_h5_delivery_never_read_is_released_refimpl(ref: ModuleType) -> None:
    outcomes, _ = _never_read_delivery(ref)
    assert "MemoryError" not in outcomes


# -- 14b. a zero-size ring is accepted; the first put divides by zero ------------------------------


def test_f14_zero_buffer_size_fails_at_first_put_seed(seed: ModuleType, shm: Shm) -> None:
    ring = shm.ring(seed, 0)  # the 32-byte secret makes the segment non-empty
    writer = seed.SingleWriterShmObjectStorage(64, 1, ring)
    with pytest.raises(ZeroDivisionError):  # not ValueError/MemoryError: vLLM does not catch it
        writer.put("k", "v")


def test_f14_zero_buffer_size_refimpl(ref: ModuleType) -> None:
    with pytest.raises(ValueError, match="data_buffer_size"):
        ref.SingleWriterShmRingBuffer(0, create=True)


# -- 19. an object larger than the ring evicts the whole cache, then fails ---------------------


def _put_larger_than_the_ring(mod: ModuleType, shm: Shm) -> tuple[str, list[str]]:
    """max_object_size (1000) above the ring's size (256): five small objects,
    all reclaimable (n_readers=0), then one 400-byte object."""
    writer = shm.writer(mod, size=256, max_object_size=1000, n_readers=0)
    for n in range(5):
        writer.put(f"k{n}", "x" * 20)
    try:
        writer.put("big", "y" * 400)
        outcome = "ok"
    except (ValueError, MemoryError) as exc:
        outcome = type(exc).__name__
    return outcome, sorted(writer.key_index)


def test_f19_object_larger_than_the_ring_flushes_the_cache_seed(seed: ModuleType, shm: Shm) -> None:
    outcome, cached = _put_larger_than_the_ring(seed, shm)
    assert outcome == "MemoryError"
    assert cached == []  # every cached object was evicted for a put that could never fit


def test_f19_object_larger_than_the_ring_refused_first_refimpl(ref: ModuleType, shm: Shm) -> None:
    outcome, cached = _put_larger_than_the_ring(ref, shm)
    assert outcome in ("ValueError", "MemoryError")
    assert cached == [f"k{n}" for n in range(5)]
