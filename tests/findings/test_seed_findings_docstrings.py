"""Regression tests for FINDINGS.md, docstrings the seed's code does not follow
(finding 13).

As everywhere in tests/findings/: a `_seed` test DEMONSTRATES the defect on
the module built from the seed and a `_refimpl` test shows what refimpl does
instead (`xfail(strict=True)` where refimpl has not fixed it yet); the
fixtures they share are conftest.py's, the helpers findings_support.py's."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from findings_support import RawSerde, Shm

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
