"""Load one compiled variant of the C core (build.py) and bind the Python
classes to it: the store (`core`) and each mutant are the same classes over
another extension module."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

BUILD_DIR = Path(__file__).resolve().parent.parent / "build"


def load(variant: str) -> Any:
    """The cffi extension `_ns_<variant>` built in examples/native_store/build."""
    if str(BUILD_DIR) not in sys.path:
        sys.path.append(str(BUILD_DIR))
    try:
        return importlib.import_module(f"_ns_{variant}")
    except ImportError as exc:
        hint = "make native" if variant == "core" else "make native-mutants"
        raise ImportError(
            f"native_store's C core ({variant}) is not built: run `{hint}` "
            f"(python examples/native_store/build.py --mutants): {exc}"
        ) from None


def bind(namespace: dict[str, Any], variant: str) -> None:
    """Fill a module's namespace with the contract's classes over `variant`."""
    from native_store.ring import SingleWriterShmRingBuffer
    from native_store.storage import ShmObjectStorageHandle, SingleWriterShmObjectStorage
    from refimpl.serde import MsgpackSerde, ObjectSerde

    module = load(variant)
    ring_cls = type(
        "SingleWriterShmRingBuffer",
        (SingleWriterShmRingBuffer,),
        {"_ffi": module.ffi, "_lib": module.lib, "__module__": namespace["__name__"]},
    )
    storage_cls = type(
        "SingleWriterShmObjectStorage",
        (SingleWriterShmObjectStorage,),
        {"_ring_class": ring_cls, "__module__": namespace["__name__"]},
    )
    namespace.update(
        SingleWriterShmRingBuffer=ring_cls,
        SingleWriterShmObjectStorage=storage_cls,
        ShmObjectStorageHandle=ShmObjectStorageHandle,
        MsgpackSerde=MsgpackSerde,
        ObjectSerde=ObjectSerde,
        VARIANT=variant,
    )
