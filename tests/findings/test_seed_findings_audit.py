"""Regression pairs for the findings of the method audit (FINDINGS.md #20-#25).

As in the other tests/findings/test_seed_findings_*.py: each `_seed` test shows the defect on the
seed's code (it fails once the defect is gone); each `_refimpl` test shows
what refimpl does, marked `xfail(strict=True)` where refimpl still has the
defect. The searches that met them are tests/findings/test_seed_audit_*.py.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from audit_support import seed, writer_and_reader
from test_seed_audit_serde import META, PAYLOAD, serde_for
from test_seed_audit_store import audit_increment_writer_flag, audit_writer_constructor
from test_seed_audit_writer import audit_requests_in_flight

__all__ = ["seed"]  # the fixture, used by name


@pytest.fixture(scope="module")
def ref() -> ModuleType:
    return pytest.importorskip("refimpl")


# -- 20. access_buf and free_buf take any address, byte count or predicate ---------------


def test_f20_access_buf_and_free_buf_take_anything_seed(seed: ModuleType) -> None:
    with writer_and_reader(seed) as (writer, _):
        writer.put("k", "v")  # one chunk at 0; address 8 is inside it
        with writer.ring_buffer.access_buf(8) as (view, (_, size)):
            assert size > 256 and len(view) > 0  # a "header" read from the payload
        with pytest.raises(TypeError):
            with writer.ring_buffer.access_buf(1.5):
                pass
        with pytest.raises(TypeError):
            writer.ring_buffer.free_buf(None, 10)
        with pytest.raises(TypeError):
            writer.ring_buffer.free_buf(lambda i, b: False, "10")


def test_f20_access_buf_and_free_buf_refuse_refimpl(ref: ModuleType) -> None:
    with writer_and_reader(ref) as (writer, _):
        writer.put("k", "v")
        for address in (8, 1.5):
            with pytest.raises(ValueError):
                with writer.ring_buffer.access_buf(address):
                    pass
        with pytest.raises(ValueError):
            writer.ring_buffer.free_buf(None, 10)
        with pytest.raises(ValueError):
            writer.ring_buffer.free_buf(lambda i, b: False, "10")


# -- 21. increment_writer_flag counts ids that are not live ----------------------------------


@pytest.mark.parametrize("side,monotonic_id", [("writer", 1), ("writer", "x"), ("reader", 0)])
def test_f21_writer_count_for_an_id_not_issued_seed(
    seed: ModuleType, side: str, monotonic_id: object
) -> None:
    assert audit_increment_writer_flag(seed, (side, monotonic_id)) == "21"


@pytest.mark.parametrize("side,monotonic_id", [("writer", 1), ("writer", "x"), ("reader", 0)])
def test_f21_writer_count_only_for_live_ids_refimpl(
    ref: ModuleType, side: str, monotonic_id: object
) -> None:
    assert audit_increment_writer_flag(ref, (side, monotonic_id)) is None


# -- 22. one set of touches for all requests in flight ------------------------------------------

# k0 is cached and was read. Request 0 touches k0; request 1 looks k0 up (which
# ends request 0's protection) and is read; request 2's puts evict k0; request
# 0's lookup misses the item it touched (vLLM: "Expected a cached item").
REQUESTS = [["k0"], ["k0"], ["k1", "k2"]]
SCHEDULE = [0, 0, 1, 1, 1, 3, 2, 2, 2, 2, 0]


def test_f22_another_requests_lookup_ends_a_touch_seed(seed: ModuleType) -> None:
    assert audit_requests_in_flight(seed, (REQUESTS, SCHEDULE)) == "22"


@pytest.mark.xfail(strict=True, reason="FINDINGS #22: refimpl keeps one set of touches")
def test_f22_touch_lasts_until_the_requests_own_lookup_refimpl(ref: ModuleType) -> None:
    assert audit_requests_in_flight(ref, (REQUESTS, SCHEDULE)) is None


# -- 23. the storage constructor accepts any limits ---------------------------------------------

BAD_LIMITS = [(0, 1), (-64, 1), (64, -1), (64, None), (64.5, 1), (64, 1.5)]


@pytest.mark.parametrize("limits", BAD_LIMITS, ids=repr)
def test_f23_constructor_accepts_any_limits_seed(seed: ModuleType, limits: tuple) -> None:
    assert audit_writer_constructor(seed, limits) == "23"


@pytest.mark.parametrize("limits", BAD_LIMITS, ids=repr)
def test_f23_constructor_refuses_bad_limits_refimpl(ref: ModuleType, limits: tuple) -> None:
    assert audit_writer_constructor(ref, limits) is None


def test_f23_negative_readers_reclaim_unread_objects_seed(seed: ModuleType) -> None:
    with writer_and_reader(seed, n_readers=-1) as (writer, reader):
        address, monotonic_id = writer.put("k0", "v" * 40)
        signature = writer.get_signature("k0")
        for n in range(6):  # puts that need room: k0 is reclaimed, never read
            writer.put(f"k{n + 1}", "w" * 40)
        assert not writer.is_cached("k0")
        with pytest.raises(ValueError):
            reader.get(address, monotonic_id, signature, "k0")


# -- 24. writer key lookups raise TypeError for an unhashable key ------------------------------


@pytest.mark.parametrize("method", ["touch", "get_cached", "is_cached", "get_signature"])
def test_f24_unhashable_key_is_a_type_error_seed(seed: ModuleType, method: str) -> None:
    with writer_and_reader(seed) as (writer, _):
        with pytest.raises(TypeError) as raised:
            getattr(writer, method)(["k"])
        assert not isinstance(raised.value, ValueError)


@pytest.mark.parametrize("method", ["touch", "get_cached", "is_cached", "get_signature"])
def test_f24_unhashable_key_is_a_value_error_refimpl(ref: ModuleType, method: str) -> None:
    with writer_and_reader(ref) as (writer, _):
        with pytest.raises(ValueError):
            getattr(writer, method)(["k"])


# -- 25. a list payload shorter than declared is stored with stale bytes -----------------


def _short_list_put(mod: ModuleType) -> tuple[Any, Any]:
    """An earlier object's bytes, then a put whose serde declares 8 data
    bytes more than its list of parts holds."""
    ring = mod.SingleWriterShmRingBuffer(512, create=True)
    writer = mod.SingleWriterShmObjectStorage(
        96, 0, ring, serde_class=serde_for("list", 8, 0, False)
    )
    writer.put("old", b"\xee" * 80)
    writer.free_unused()
    return ring, writer


def test_f25_short_list_payload_keeps_stale_bytes_seed(seed: ModuleType) -> None:
    ring, writer = _short_list_put(seed)
    try:
        address, monotonic_id = writer.put("k", "bad")
        stored = writer.get(address, monotonic_id)
        assert stored == META + PAYLOAD + b"\xee" * 8  # the earlier object's bytes
    finally:
        ring.close()


def test_f25_short_list_payload_is_refused_refimpl(ref: ModuleType) -> None:
    ring, writer = _short_list_put(ref)
    try:
        live = dict(ring.metadata)
        with pytest.raises(ValueError, match="do not match"):
            writer.put("k", "bad")
        assert ring.metadata == live and not writer.is_cached("k")  # nothing allocated
    finally:
        ring.close()
