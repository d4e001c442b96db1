"""Load one compiled variant of the C core (build.py) and bind the Python
classes to it: the store (`core`) and each mutant are the same classes over
another extension module."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
BUILD_DIR = HERE / "build"
C_SOURCES = ("ns_ring.c", "ns_sign.c", "ns_ring.h")


def load(variant: str) -> Any:
    """The cffi extension `_ns_<variant>` built in examples/native_store/build."""
    hint = "make native" if variant == "core" else "make native-mutants"
    built = sorted(BUILD_DIR.glob(f"_ns_{variant}.*.so"))
    sources = [HERE / name for name in C_SOURCES]
    if built and all(s.exists() for s in sources):
        newest = max(s.stat().st_mtime for s in sources)
        if built[0].stat().st_mtime < newest:  # a stale build would not match the glue
            raise ImportError(
                f"native_store's C core ({variant}) is older than its sources: run `{hint}`"
            )
    if str(BUILD_DIR) not in sys.path:
        sys.path.append(str(BUILD_DIR))
    try:
        return importlib.import_module(f"_ns_{variant}")
    except ImportError as exc:
        raise ImportError(
            f"native_store's C core ({variant}) is not built: run `{hint}` "
            f"(python examples/native_store/build.py --mutants): {exc}"
        ) from None


def bind(namespace: dict[str, Any], variant: str) -> None:
    """Fill a module's namespace with the contract's classes over `variant`."""
    from native_store.ring import SingleWriterShmRingBuffer
    from native_store.storage import ShmObjectStorageHandle, SingleWriterShmObjectStorage
    from refimpl.serde import MsgpackOnlySerde, MsgpackSerde, ObjectSerde

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
        MsgpackOnlySerde=MsgpackOnlySerde,
        ObjectSerde=ObjectSerde,
        VARIANT=variant,
    )
