"""Regression tests for FINDINGS.md, bad input the seed takes: validation by
`assert`, malformed handles, sizes beyond the size field, bad buffer sizes,
look-alike ids, keys that are not `str` or not UTF-8 (findings 1, 2, 12, 14,
14b, 15, 16, 17).

As everywhere in tests/findings/: a `_seed` test DEMONSTRATES the defect on
the module built from the seed and a `_refimpl` test shows what refimpl does
instead (`xfail(strict=True)` where refimpl has not fixed it yet); the
fixtures they share are conftest.py's, the helpers findings_support.py's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from contextlib import suppress
from decimal import Decimal
from fractions import Fraction
from multiprocessing import Lock
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from findings_support import DEV_SHM, REPO, Shm, read

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


# -- 14. a bad buffer size leaks a segment --------------------------------------------------


def _segments_left_by_bad_size(mod: ModuleType) -> set[str]:
    """Segments this process created (the leak-guard plugin, which also sees a
    creation that fails before sizing the segment; other processes' segments
    are not blamed) that the failed constructor left behind."""
    from shmref.session import leaks as shmleaks

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


# -- 14b. a zero-size ring is accepted; the first put divides by zero ------------------------------


def test_f14_zero_buffer_size_fails_at_first_put_seed(seed: ModuleType, shm: Shm) -> None:
    ring = shm.ring(seed, 0)  # the 32-byte secret makes the segment non-empty
    writer = seed.SingleWriterShmObjectStorage(64, 1, ring)
    with pytest.raises(ZeroDivisionError):  # not ValueError/MemoryError: vLLM does not catch it
        writer.put("k", "v")


def test_f14_zero_buffer_size_refimpl(ref: ModuleType) -> None:
    with pytest.raises(ValueError, match="data_buffer_size"):
        ref.SingleWriterShmRingBuffer(0, create=True)
