"""Serializers: how a value becomes the ``[metadata][payload]`` of an object."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import msgpack


class ObjectSerde(ABC):
    @abstractmethod
    def serialize(self, value: Any) -> tuple[Any, int, bytes, int]:
        """Return (data, data_bytes, metadata, md_bytes); data is bytes or a list of bytes."""
        raise NotImplementedError

    @abstractmethod
    def deserialize(self, data: memoryview) -> Any:
        """Rebuild the value from ``[metadata][payload]``."""
        raise NotImplementedError


class MsgpackSerde(ObjectSerde):
    """msgpack payload; the metadata is the payload's length as a msgpack int,
    so a reader can tell a well-formed object from bytes that are not one."""

    def serialize(self, value: Any) -> tuple[bytes, int, bytes, int]:
        try:
            payload = msgpack.packb(value, use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValueError(
                f"msgpack cannot serialize a {type(value).__name__}: {exc}"
            ) from exc
        header = msgpack.packb(len(payload))
        return payload, len(payload), header, len(header)

    def deserialize(self, data: memoryview) -> Any:
        try:
            start, length = _read_length(data)
            if start + length != len(data):
                raise ValueError(f"payload length {length} does not match the object")
            with memoryview(data)[start:] as payload:  # unpacked in place: no extra copy
                return msgpack.unpackb(payload, raw=False, strict_map_key=False)
        except (msgpack.UnpackException, ValueError, IndexError) as exc:
            raise ValueError(f"corrupt object in shared memory: {exc}") from exc


# msgpack's unsigned int encodings: first byte -> number of bytes that follow
_UINT_WIDTHS = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}


def _read_length(data: memoryview) -> tuple[int, int]:
    """The payload length in the metadata: (payload offset, length)."""
    first = data[0]
    if first < 0x80:  # positive fixint
        return 1, first
    width = _UINT_WIDTHS.get(first)
    if width is None:
        raise ValueError(f"metadata does not start with a length (byte {first:#x})")
    return 1 + width, int.from_bytes(data[1 : 1 + width], "big")
