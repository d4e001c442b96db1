"""Audit of the seed's third class, `ObjectSerde`: what the storage requires of
a serde, and what it does when a serde does not keep to it (a Hypothesis search).

`serialize(value)` returns the four-tuple `(object_data, data_bytes,
object_metadata, md_bytes)`. The seed's put sizes the object from the two
numbers alone (4 + data_bytes + md_bytes), allocates it, and only then
copies: the metadata into `[4:4 + md_bytes]`, and the data to the END of
the object if it is `bytes`, or part by part after the metadata if it is a
`list`; anything else is refused. Searched: data of each shape (`bytes`,
`bytearray`, `memoryview`, a list of parts), declared sizes below, at and
above the bytes', metadata longer or shorter than declared, and a serde that
raises. `deserialize(data)` is given a view of exactly `[metadata][data]` in
the segment: searched with a serde that copies, one that keeps the view, and
one that raises.

Each audit returns None for a clean call or the FINDINGS.md id it showed:
3 (the put fails after allocating: the store is wedged), 25 (a put that
succeeds stores other bytes than the serde gave), 8 (a failed read pins its
chunk).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from audit_support import Audits, check_refimpl, check_seed, seed, writer_and_reader
from hypothesis import strategies as st

__all__ = ["seed"]  # the fixture, used by name

PAYLOAD = b"payload-of-the-object"
META = b"\x02MD"


def serde_for(shape: str, data_delta: int, md_extra: int, raises: bool) -> type:
    """A serde whose four-tuple for the value "bad" is `shape` data with the
    declared data size off by `data_delta` and metadata `md_extra` bytes
    longer (or shorter) than declared; it stores any other (bytes) value
    honestly."""

    class Serde:
        def serialize(self, value: Any) -> tuple[Any, int, bytes, int]:
            if value != "bad":
                return bytes(value), len(value), META, len(META)
            if raises:
                raise RuntimeError("this serde cannot store the value")
            data: Any = {
                "bytes": PAYLOAD,
                "bytearray": bytearray(PAYLOAD),
                "memoryview": memoryview(PAYLOAD),
                "list": [PAYLOAD[:5], PAYLOAD[5:]],
            }[shape]
            metadata = META + b"x" * md_extra if md_extra >= 0 else META[:md_extra]
            return data, len(PAYLOAD) + data_delta, metadata, len(META)

        def deserialize(self, data: memoryview) -> Any:
            return bytes(data)  # the object's bytes as stored

    return Serde


def audit_serialize(mod: ModuleType, args: tuple[str, int, int, bool]) -> str | None:
    """Put one object through the serde over an earlier object's bytes, then
    fill the ring: a put that fails must leave the store as it was (no chunk
    allocated for it), and a put that succeeds must store exactly the bytes
    the serde gave."""
    shape, data_delta, md_extra, raises = args
    serde = serde_for(shape, data_delta, md_extra, raises)
    ring = mod.SingleWriterShmRingBuffer(512, create=True)
    try:
        writer = mod.SingleWriterShmObjectStorage(96, 0, ring, serde_class=serde)
        writer.put("old", b"\xee" * 80)  # stale bytes where the next object goes
        writer.free_unused()
        try:
            address, monotonic_id = writer.put("k", "bad")
        except (ValueError, RuntimeError):
            try:
                for n in range(40):  # enough puts to need reclaiming
                    writer.put(f"fill{n}", b"y" * 40)
            except KeyError:
                return "3"  # the failed put's chunk was allocated, never indexed
            return None
        stored = writer.get(address, monotonic_id)
        honest = (md_extra, data_delta) == (0, 0)
        return None if honest and stored == META + PAYLOAD else "25"
    finally:
        ring.close()


def deserializer(kind: str) -> type:
    """A serde that stores bytes honestly and reads them back by copying,
    by keeping the segment's view, or by raising."""

    class Serde:
        def serialize(self, value: Any) -> tuple[Any, int, bytes, int]:
            return bytes(value), len(value), META, len(META)

        def deserialize(self, data: memoryview) -> Any:
            if kind == "raises":
                raise ValueError("not an object of this serde")
            if kind == "keeps the view":
                return data[len(META) :]
            return bytes(data[len(META) :])

    return Serde


def audit_deserialize(mod: ModuleType, args: tuple[str, int]) -> str | None:
    """One reader reads an object (of `size` bytes) through the serde; the
    writer then reclaims it and puts another: the read value must be the
    object's, and a read that failed must not pin the chunk for ever."""
    kind, size = args
    value = bytes(range(size % 256)) * (size // 256) + bytes(range(size % 256))
    value = value or b"v"
    with writer_and_reader(mod, size=512, max_object_size=200) as (writer, reader):
        for storage in (writer, reader):
            storage.ser_de = deserializer(kind)()
        address, monotonic_id = writer.put("k", value)
        try:
            got = reader.get(address, monotonic_id, writer.get_signature("k"), "k")
        except ValueError:
            writer.free_unused()
            return "8" if writer.is_cached("k") else None
        seen = bytes(got)
        if isinstance(got, memoryview):
            got.release()  # a kept view would stop the segment from closing
        writer.free_unused()
        return None if seen == value and not writer.is_cached("k") else "unexpected"


AUDITS: Audits = {
    "serde.serialize": (
        audit_serialize,
        st.tuples(
            st.sampled_from(["bytes", "bytearray", "memoryview", "list"]),
            st.integers(-len(PAYLOAD), 8),
            st.integers(-2, 4),
            st.booleans(),
        ),
    ),
    "serde.deserialize": (
        audit_deserialize,
        st.tuples(st.sampled_from(["copies", "keeps the view", "raises"]), st.integers(1, 150)),
    ),
}


@pytest.mark.parametrize("method", sorted(AUDITS))
def test_seed_defects_are_all_listed(seed: ModuleType, method: str) -> None:
    check_seed(seed, AUDITS, method)


@pytest.mark.parametrize("method", sorted(AUDITS))
def test_refimpl_shows_only_open_findings(method: str) -> None:
    check_refimpl(AUDITS, method)
