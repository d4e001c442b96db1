"""Serializers: how a value becomes the ``[metadata][payload]`` of an object.

A caller may pass any `ObjectSerde` subclass as ``serde_class=`` (vLLM
passes its own); `MsgpackSerde` is only the default. `byte_parts` is what
the storage asks of any serde's output before it allocates a chunk.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import msgpack  # type: ignore[import-untyped]

from refimpl.validate import BadArgumentType


class ObjectSerde(ABC):
    """What a storage's ``serde_class`` implements: a value to bytes and back.

    The storage instantiates the class with no arguments, in the writer and
    in each reader, and checks `serialize`'s output with `byte_parts`.
    """

    @abstractmethod
    def serialize(self, value: Any) -> tuple[Any, int, bytes, int]:
        """Return (data, data_bytes, metadata, md_bytes); data is a bytes-like or a list of them."""
        raise NotImplementedError

    @abstractmethod
    def deserialize(self, data: memoryview) -> Any:
        """Rebuild the value from ``[metadata][payload]``."""
        raise NotImplementedError


# The 1-byte metadata says how the payload is stored.
MSGPACK, RAW = 0, 1
_MSGPACK_MD, _RAW_MD = bytes([MSGPACK]), bytes([RAW])
ACCEPTS = (
    "None, bool, int in [-2**63, 2**64), float, str, bytes, bytearray, memoryview, "
    "and lists, tuples and dicts of these (tuples come back as lists, bytes-likes "
    "as bytes; dict keys must be hashable once read back: str, bytes, int, float, "
    "bool or None)"
)


def _refuse(obj: Any) -> Any:
    """msgpack's hook for what it cannot pack: refuse, naming the type."""
    if isinstance(obj, int):  # msgpack asks about ints beyond 64 bits too
        raise ValueError(
            f"MsgpackSerde stores ints in [-2**63, 2**64), not {obj.bit_length()}-bit ones"
        )
    # A TypeError naming the type that is also a ValueError: vLLM's sender catches only
    # ValueError/MemoryError from put and then sends the item inline.
    raise BadArgumentType(f"MsgpackSerde cannot store a {type(obj).__name__}; it stores {ACCEPTS}")


def _buffer_hint(value: Any) -> int:
    """The packing buffer's first size: a str's own length plus its header, so
    that a large str is packed without the buffer growing (each growth copies)."""
    return len(value) + 5 if isinstance(value, str) else 4096


class MsgpackSerde(ObjectSerde):
    """The default serde: the values msgpack knows (see `ACCEPTS`).

    A non-empty bytes-like value is stored as it is (metadata `RAW`): the put
    copies it once into the segment and the read once out, with no packing
    step; any other value is packed by msgpack (metadata `MSGPACK`), so the
    data is never empty (the seed's put fails on 0 data bytes, FINDINGS #3).
    The packed data is a view of msgpack's own buffer, in a list (the shape
    the seed's put copies part by part): no bytes object of the whole
    payload is made on the way into the segment. Reading checks
    that the payload is exactly one msgpack object (msgpack raises on
    trailing or missing bytes), so a reader can tell an object from bytes
    that are not one.
    """

    def serialize(self, value: Any) -> tuple[Any, int, bytes, int]:
        """A non-empty bytes-like as it is, anything else packed; refuses what it cannot store."""
        if isinstance(value, (bytes, bytearray, memoryview)):
            if isinstance(value, memoryview):
                value = value.cast("B") if value.c_contiguous else value.tobytes()
            if len(value):
                return value, len(value), _RAW_MD, 1
        packer = msgpack.Packer(
            use_bin_type=True, default=_refuse, autoreset=False, buf_size=_buffer_hint(value)
        )
        packer.pack(value)
        payload = packer.getbuffer()
        return [payload], len(payload), _MSGPACK_MD, 1

    def deserialize(self, data: memoryview) -> Any:
        """The value back; ValueError when the bytes are not one object this serde wrote."""
        kind = data[0] if len(data) else None
        if kind == RAW:
            return bytes(data[1:])
        if kind != MSGPACK:
            raise ValueError(f"corrupt object in shared memory: metadata {kind!r} is no serde's")
        try:
            return msgpack.unpackb(data[1:], raw=False, strict_map_key=False)
        except (ValueError, TypeError) as exc:  # msgpack's errors are ValueErrors
            raise ValueError(f"object in shared memory cannot be read back: {exc}") from exc


BYTES_LIKE = (bytes, bytearray, memoryview)


def byte_parts(metadata: Any, data: Any, md_bytes: Any, data_bytes: Any) -> list[Any]:
    """The serializer's output as the byte strings to copy, in order, after
    checking it: everything that can fail is checked before the allocation.
    Nothing is copied here: memoryviews are recast to bytes (a copy only if
    not contiguous)."""
    parts = [metadata, *data] if type(data) is list else [metadata, data]
    for i, part in enumerate(parts):
        if not isinstance(part, BYTES_LIKE):
            what = "metadata" if i == 0 else "data"
            raise ValueError(
                f"Unsupported data type for serialization: {what} is a "
                f"{type(part).__name__}, not bytes, a bytes-like or a list of them"
            )
        if type(part) is memoryview and (part.format != "B" or part.ndim != 1):
            parts[i] = part.cast("B") if part.c_contiguous else part.tobytes()
    if (
        type(md_bytes) is not int
        or type(data_bytes) is not int
        or len(parts[0]) != md_bytes
        or sum(map(len, parts)) - md_bytes != data_bytes
    ):
        raise ValueError(
            f"serializer returned sizes ({md_bytes}, {data_bytes}) that do not match "
            f"its bytes ({len(parts[0])}, {sum(map(len, parts)) - len(parts[0])})"
        )
    return parts
