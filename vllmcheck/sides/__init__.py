"""The sides of the mixed deployments, as modules the oracle loads by name
(`--writer vllmcheck.sides.X`): one implementation's classes whose storage
takes another serde as its default `serde_class`. The handle carries the
writer's serde class to the readers, so a side's default decides what both
sides use where a caller passes none, as vLLM's cache passes its module's
own `MsgpackSerde` on both sides:

- `refimpl_release_serde`: refimpl's classes writing and reading with the
  release's serde (the release's serde on both sides, refimpl writing);
- `release_to_refimpl`: the release's classes writing with the release's
  serde, their readers decoding with refimpl's (a receiver built on refimpl
  beside a sender built on the release);
- `refimpl_to_release`: refimpl's classes writing with refimpl's serde,
  their readers decoding with the release's (the reverse).

The release is `vllm.distributed.device_communicators.shm_object_storage` as
installed; these modules import only in its venv."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from vllmcheck import MODULE

CONTRACT_NAMES = (
    "ObjectSerde",
    "MsgpackSerde",
    "SingleWriterShmRingBuffer",
    "SingleWriterShmObjectStorage",
    "ShmObjectStorageHandle",
)


def implementation(which: str) -> ModuleType:
    """The release (vLLM's module as installed) for "release", else refimpl."""
    return importlib.import_module(MODULE if which == "release" else "refimpl")


def paired_serde(module: str, writes: type, reads: type) -> type:
    """A serde class (named `module`.MsgpackSerde, so a pickled handle finds
    it) that serializes as `writes` does and deserializes as `reads` does."""
    writer_class: Any = writes

    def __init__(self: Any) -> None:
        writer_class.__init__(self)
        self.decoder = reads()

    def deserialize(self: Any, data: Any) -> Any:
        return self.decoder.deserialize(data)

    serde: type = type(
        "MsgpackSerde",
        (writes,),
        {
            "__init__": __init__,
            "deserialize": deserialize,
            "__module__": module,
            "__qualname__": "MsgpackSerde",
            "__doc__": f"{writes.__module__}'s bytes written, decoded by {reads.__module__}'s",
        },
    )
    return serde


def storage_with_default(module: str, base: type, serde: type) -> type:
    """`base`'s storage class whose `serde_class` defaults to `serde`."""
    base_class: Any = base

    def __init__(
        self: Any,
        max_object_size: int,
        n_readers: int,
        ring_buffer: Any,
        serde_class: type = serde,
        reader_lock: Any = None,
    ) -> None:
        base_class.__init__(
            self,
            max_object_size,
            n_readers,
            ring_buffer,
            serde_class=serde_class,
            reader_lock=reader_lock,
        )

    storage: type = type(
        "SingleWriterShmObjectStorage",
        (base,),
        {"__init__": __init__, "__module__": module, "__qualname__": base.__qualname__},
    )
    return storage


def side(module: str, base: str, writes: str, reads: str) -> dict[str, Any]:
    """Module `module`'s names: `base`'s public ones, its storage's default
    serde writing as `writes`' MsgpackSerde and reading as `reads`'."""
    own = implementation(base)
    writer_serde = implementation(writes).MsgpackSerde
    reader_serde = implementation(reads).MsgpackSerde
    serde = (
        writer_serde
        if writer_serde is reader_serde
        else paired_serde(module, writer_serde, reader_serde)
    )
    public = getattr(own, "__all__", None) or [
        name
        for name, value in vars(own).items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
    ]
    names = {name: getattr(own, name) for name in public}
    names["MsgpackSerde"] = serde
    names["SingleWriterShmObjectStorage"] = storage_with_default(
        module, own.SingleWriterShmObjectStorage, serde
    )
    names["__all__"] = sorted(set(public) | set(CONTRACT_NAMES))
    return names
