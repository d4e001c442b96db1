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
        unpacker = msgpack.Unpacker(
            raw=False, strict_map_key=False, max_buffer_size=max(len(data), 1)
        )
        unpacker.feed(data)
        try:
            length = unpacker.unpack()
            if type(length) is not int or unpacker.tell() + length != len(data):
                raise ValueError(f"payload length {length!r} does not match the object")
            return unpacker.unpack()
        except (msgpack.UnpackException, ValueError) as exc:
            raise ValueError(f"corrupt object in shared memory: {exc}") from exc
