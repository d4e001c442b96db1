"""Serializers: how a value becomes the ``[metadata][payload]`` of an object.

A caller may pass any `ObjectSerde` subclass as ``serde_class=``.
`MsgpackSerde`, the default, writes and reads the bytes of the serde that
vLLM's releases define in the module and that vLLM's multimodal cache passes
(the format is described on `MsgpackSerde`); `MsgpackOnlySerde` is the msgpack-only serde that
refimpl had before (values msgpack knows, refused by name otherwise).
`byte_parts` is what the storage asks of any serde's output before it
allocates a chunk.
"""

from __future__ import annotations

import pickle
import sys
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
            f"MsgpackOnlySerde stores ints in [-2**63, 2**64), not {obj.bit_length()}-bit ones"
        )
    # A TypeError naming the type that is also a ValueError: vLLM's sender catches only
    # ValueError/MemoryError from put and then sends the item inline.
    raise BadArgumentType(
        f"MsgpackOnlySerde cannot store a {type(obj).__name__}; it stores {ACCEPTS}"
    )


def _buffer_hint(value: Any) -> int:
    """The packing buffer's first size: a str's own length plus its header, so
    that a large str is packed without the buffer growing (each growth copies)."""
    return len(value) + 5 if isinstance(value, str) else 4096


class MsgpackOnlySerde(ObjectSerde):
    """A msgpack-only serde: the values msgpack knows (see `ACCEPTS`).

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


# The object kinds that vLLM's releases encode with vLLM's own msgpack encoder
# (vllm.v1.serial_utils), by the type name written in the metadata: the module
# that defines the type, and the type's name there.
_VLLM_KINDS = {"Tensor": "torch", "MultiModalKwargsItem": "vllm.multimodal.inputs"}
_PICKLED = "bytes"  # the type name the releases write for a pickled value


def _vllm_encoded(value: Any) -> bool:
    """Whether vLLM's encoder takes `value` (an instance of a type in
    `_VLLM_KINDS`, subclasses included). A module not yet imported has no
    instances, so neither torch nor vLLM is imported here."""
    for name, module_name in _VLLM_KINDS.items():
        module = sys.modules.get(module_name)
        cls = getattr(module, name, None) if module is not None else None
        if isinstance(cls, type) and isinstance(value, cls):
            return True
    return False


class _VllmCodec:
    """vLLM's own encoder and decoders, imported at the first tensor or
    `MultiModalKwargsItem`, and only then (refimpl never requires vLLM)."""

    _loaded: _VllmCodec | None = None

    def __init__(self) -> None:
        try:
            import torch  # type: ignore[import-not-found]
            from vllm.multimodal.inputs import (  # type: ignore[import-not-found]
                MultiModalKwargsItem,
            )
            from vllm.v1.serial_utils import (  # type: ignore[import-not-found]
                MsgpackDecoder,
                MsgpackEncoder,
            )
        except ImportError as exc:
            raise BadArgumentType(
                f"MsgpackSerde encodes tensors and MultiModalKwargsItem with vLLM's own "
                f"encoder (vllm.v1.serial_utils), which does not import here: {exc}"
            ) from exc
        self.encoder = MsgpackEncoder()
        self.decoders = {
            "Tensor": MsgpackDecoder(torch.Tensor, share_mem=False),
            "MultiModalKwargsItem": MsgpackDecoder(MultiModalKwargsItem, share_mem=False),
        }

    @classmethod
    def get(cls) -> _VllmCodec:
        if cls._loaded is None:
            cls._loaded = cls()
        return cls._loaded


class MsgpackSerde(ObjectSerde):
    """The default serde: the bytes of the serde of vLLM's releases (0.32-0.34
    define it in the module, and vLLM's multimodal cache passes it).

    The metadata is a pickle (highest protocol) of ``(type name, data bytes,
    part lengths)``; the data ends the object. A torch tensor or a vLLM
    `MultiModalKwargsItem` is encoded by vLLM's own msgpack encoder into
    parts (their lengths in the metadata, the type's name as the type name);
    any other value is pickled, and the type name is then ``"bytes"`` (the
    type of the pickle; a subclass of either type is written under its own
    name, which no reader decodes, as in the release). Reading unpickles the metadata from the start
    (pickle stops at its own end), takes the data from the end, and decodes
    it by the type name; an unknown name is a ValueError. The reader
    unpickles bytes of the segment: whoever can write the segment can make
    a reader run code (FINDINGS.md, finding on the release's serde).

    Differences from the release, each argued in FINDINGS.md: a value that
    cannot be pickled (or encoded) raises `BadArgumentType` (a TypeError and
    a ValueError, so vLLM's sender sends it inline), and bytes that are not
    such an object raise ValueError, naming what is wrong.
    """

    def serialize(self, value: Any) -> tuple[Any, int, bytes, int]:
        """(data, data bytes, metadata, metadata bytes), as the release writes them."""
        lengths: list[int] | None = None
        data: Any
        try:
            if _vllm_encoded(value):
                # The name of the value's own type, as the release writes it: a
                # subclass's name is then not one a reader decodes (as in the release).
                kind = type(value).__name__
                data = list(_VllmCodec.get().encoder.encode(value))
                lengths = [len(part) for part in data]
                size = sum(lengths)
            else:
                kind = _PICKLED
                data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
                size = len(data)
        except BadArgumentType:
            raise
        except (pickle.PicklingError, TypeError, AttributeError, ValueError) as exc:
            raise BadArgumentType(
                f"MsgpackSerde cannot store a {type(value).__name__}: {exc}"
            ) from exc
        metadata = pickle.dumps((kind, size, lengths), protocol=pickle.HIGHEST_PROTOCOL)
        return data, size, metadata, len(metadata)

    def deserialize(self, data: memoryview) -> Any:
        """The value back; ValueError when the bytes are not an object this format writes."""
        try:
            kind, size, lengths = pickle.loads(data)
            if not (isinstance(size, int) and 0 < size <= len(data)):
                raise ValueError(f"a payload of {size!r} bytes in an object of {len(data)}")
            payload = data[len(data) - size :]
            if kind == _PICKLED:
                return pickle.loads(payload)
        except (pickle.UnpicklingError, ValueError, TypeError, EOFError, IndexError) as exc:
            raise ValueError(f"object in shared memory cannot be read back: {exc}") from exc
        if kind not in _VLLM_KINDS:
            raise ValueError(f"object in shared memory has an unknown type name {kind!r}")
        parts, start = [], 0
        for length in lengths or ():
            parts.append(payload[start : start + length])
            start += length
        return _VllmCodec.get().decoders[kind].decode(parts)


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
