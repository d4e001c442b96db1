"""The msgpack-only serde's contract (`refimpl.serde.MsgpackOnlySerde`), what put
checks in any serde's output, and how many times a value is copied from
`put` to a reader's object."""

from __future__ import annotations

import array
import multiprocessing as mp
from collections.abc import Callable
from types import ModuleType
from typing import Any

import hypothesis.strategies as st
import msgpack
import pytest
from hypothesis import given

from bench.copies import peak_allocation
from refimpl.serde import MsgpackOnlySerde

SERDE = MsgpackOnlySerde()
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=50),
    st.binary(max_size=50),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(st.one_of(st.text(max_size=5), st.integers(0, 99)), inner, max_size=5),
    ),
    max_leaves=20,
)


def roundtrip(value: Any) -> Any:
    data, data_bytes, metadata, md_bytes = SERDE.serialize(value)
    parts = data if isinstance(data, list) else [data]
    blob = bytes(metadata) + b"".join(bytes(part) for part in parts)
    assert len(blob) == md_bytes + data_bytes
    return SERDE.deserialize(memoryview(blob))


@given(VALUES)
def test_accepted_values_come_back_equal(value: Any) -> None:
    assert roundtrip(value) == value


def test_data_is_never_empty() -> None:
    """An empty bytes-like is packed, not stored raw: the seed's put fails on
    0 data bytes (FINDINGS #3), and the seed module shares this serde."""
    for value in (b"", bytearray(), memoryview(b""), ""):
        data, data_bytes, _metadata, _md_bytes = SERDE.serialize(value)
        parts = data if isinstance(data, list) else [data]
        assert data_bytes == sum(len(part) for part in parts) > 0
        assert roundtrip(value) == (b"" if not isinstance(value, str) else "")


def test_tuples_come_back_as_lists_and_bytes_likes_as_bytes() -> None:
    """Documented in refimpl.serde.ACCEPTS: msgpack has one array type and one bin type."""
    assert roundtrip((1, (2, "x"))) == [1, [2, "x"]]
    for value in (bytearray(b"ab"), memoryview(b"ab"), {"k": bytearray(b"ab")}):
        got = roundtrip(value)
        assert got == (b"ab" if not isinstance(value, dict) else {"k": b"ab"})
        assert type(got if not isinstance(got, dict) else got["k"]) is bytes
    assert roundtrip(memoryview(array.array("i", [1, 2]))) == array.array("i", [1, 2]).tobytes()


@pytest.mark.parametrize(
    "value, name",
    [
        ({1}, "set"),
        (object(), "object"),
        ([1, {"a": frozenset()}], "frozenset"),
        (1j, "complex"),
        (print, "builtin_function_or_method"),
    ],
)
def test_unstorable_types_raise_type_error_naming_them(value: Any, name: str) -> None:
    with pytest.raises(TypeError, match=f"cannot store a {name};"):
        SERDE.serialize(value)


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, {"deep": [2**100]}])
def test_ints_beyond_64_bits_raise_value_error(value: Any) -> None:
    with pytest.raises(ValueError, match=r"stores ints in \[-2\*\*63, 2\*\*64\)"):
        SERDE.serialize(value)


@pytest.mark.parametrize(
    "blob",
    [
        b"",  # no metadata at all
        b"\x07" + msgpack.packb(1),  # metadata no serde writes
        b"\x00" + msgpack.packb([1, 2])[:-1],  # truncated
        b"\x00" + msgpack.packb(1) + b"\x01",  # trailing bytes
        b"\x00\xc1",  # a byte msgpack never uses
    ],
)
def test_bytes_that_are_no_object_are_refused(blob: bytes) -> None:
    """The check that replaces the hand-written length parser: msgpack itself
    refuses missing and trailing bytes."""
    with pytest.raises(ValueError, match="corrupt object|cannot be read back"):
        SERDE.deserialize(memoryview(blob))


# -- what put checks in a serde's output ------------------------------------------------


class Returning:
    """A serde that returns the given output, whatever the value."""

    output: tuple[Any, Any, Any, Any] = (b"", 0, b"", 0)

    def serialize(self, value: Any) -> tuple[Any, Any, Any, Any]:
        return self.output

    def deserialize(self, data: memoryview) -> Any:
        return bytes(data)


@pytest.mark.parametrize(
    "output",
    [
        ("text", 4, b"", 0),  # data not bytes
        ([b"ab", "cd"], 4, b"", 0),  # a part not bytes
        (b"abcd", 3, b"", 0),  # data_bytes wrong
        (b"abcd", 4, b"m", 0),  # md_bytes wrong
        (b"abcd", 4, "m", 1),  # metadata not bytes
        (b"abcd", 4.0, b"", 0),  # a size not an int
    ],
)
def test_put_checks_a_serdes_output_before_allocating(
    impl: ModuleType, ring_factory: Callable[..., Any], is_refimpl: bool, output: Any
) -> None:
    if not is_refimpl:
        pytest.skip("the seed allocates first (FINDINGS #3)")
    Returning.output = output
    writer = impl.SingleWriterShmObjectStorage(256, 1, ring_factory(1024), serde_class=Returning)
    with pytest.raises(ValueError):
        writer.put("k", None)
    assert writer.key_index == {} and writer.ring_buffer.metadata == {}


def test_memoryview_parts_of_any_format_are_copied_as_bytes(
    impl: ModuleType, ring_factory: Callable[..., Any], is_refimpl: bool
) -> None:
    if not is_refimpl:
        pytest.skip("the seed fails this copy after allocating (FINDINGS #3)")
    ints = array.array("i", range(8))
    Returning.output = ([memoryview(ints), b"!"], ints.itemsize * 8 + 1, b"", 0)
    writer = impl.SingleWriterShmObjectStorage(256, 0, ring_factory(1024), serde_class=Returning)
    address, monotonic_id = writer.put("k", None)
    assert writer.get(address, monotonic_id) == ints.tobytes() + b"!"


# -- copies from put to a reader's object --------------------------------------------------


allocated = peak_allocation  # one measuring function, shared with bench/copies.py


@pytest.mark.parametrize(
    "value, extra_in_put", [(bytes(1 << 20), 0), ("x" * (1 << 20), 1)], ids=["bytes", "str"]
)
def test_copies_from_put_to_a_readers_object(
    impl: ModuleType, ring_factory: Callable[..., Any], value: Any, extra_in_put: int
) -> None:
    """A bytes value is copied once into the segment and once out (the
    physical limit); any other value is packed by msgpack first, which
    allocates exactly one more copy in put (msgpack's buffer, which put
    copies from: no bytes object of the packed payload)."""
    size = len(value)
    lock = mp.get_context("spawn").Lock()
    writer = impl.SingleWriterShmObjectStorage(
        size + 64, 1, ring_factory(size + 128), serde_class=MsgpackOnlySerde
    )
    reader = impl.SingleWriterShmObjectStorage.create_from_handle(
        type(writer.handle())(**{**vars(writer.handle()), "reader_lock": lock})
    )
    try:
        put_bytes, (address, monotonic_id) = allocated(lambda: writer.put("k", value))
        signature = writer.get_signature("k")
        get_bytes, got = allocated(lambda: reader.get(address, monotonic_id, signature, "k"))
    finally:
        reader.close()
    assert got == value
    assert (put_bytes >= size) == bool(extra_in_put)  # no intermediate copy of a bytes value
    assert put_bytes < 2 * size  # a str: packed once, put copies from msgpack's buffer
    assert size <= get_bytes < 2 * size  # exactly one copy out
