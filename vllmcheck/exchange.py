"""Values exchanged between vLLM's release and refimpl, both ways, in the
release's venv (`python -m vllmcheck.exchange` prints one JSON line).

vLLM's multimodal cache passes the module's own `MsgpackSerde` on both sides,
and a handle names its serde class by module path: with refimpl in the
module's place on one side only, each side decodes the other's bytes with its
own class. So, for each value (plain Python values, tensors of several dtypes
and shapes, `MultiModalKwargsItem`s), this checks that both serdes write the
same bytes, and that a writer storage of one side and a reader storage of the
other, each with its own serde, on one segment, hand the value over intact.
"""

from __future__ import annotations

import functools
import json
import multiprocessing as mp
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


def values() -> list[tuple[str, Any]]:
    """The values exchanged: what the cache stores, and what else pickles."""
    import torch  # type: ignore[import-not-found]
    from vllm.multimodal.inputs import MultiModalKwargsItem  # type: ignore[import-not-found]

    return [
        ("str", "value"),
        ("bytes", b"\x00\xffbytes"),
        ("tuple and set", ({1, 2}, (3, "x"))),
        ("dict", {"a": [1, 2.5, None], "b": {"c": b"d"}}),
        ("big int", 2**100),
        ("tensor int32", torch.arange(12, dtype=torch.int32).reshape(3, 4)),
        ("tensor float16", torch.linspace(0, 1, 64, dtype=torch.float16)),
        ("tensor bfloat16", torch.ones(5, 7, dtype=torch.bfloat16)),
        ("tensor empty", torch.zeros(0, 3)),
        ("tensor non-contiguous", torch.arange(20.0).reshape(4, 5).t()),
        ("MultiModalKwargsItem 1 KiB", MultiModalKwargsItem.dummy(1024)),
        ("MultiModalKwargsItem 64 KiB", MultiModalKwargsItem.dummy(64 * 1024)),
    ]


def same(a: Any, b: Any) -> bool:
    """Equal values; tensors equal in dtype, shape and contents."""
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and bool(torch.equal(a, b))
        )
    return bool(a == b)


def flat(data: Any) -> bytes:
    """A serde's data (bytes-like or a list of them) as one bytes object."""
    parts = data if isinstance(data, list) else [data]
    return b"".join(bytes(memoryview(p).cast("B")) for p in parts)


def serialized(serde: Any, value: Any) -> tuple[bytes, bytes]:
    """(metadata, data) as `serde` writes `value`."""
    data, _data_bytes, metadata, _md_bytes = serde.serialize(value)
    return bytes(metadata), flat(data)


def handed_over(writer_mod: ModuleType, reader_mod: ModuleType, value: Any) -> Any:
    """`value` put by a writer of `writer_mod` (its own serde) and got by a
    reader of `reader_mod` (its own serde) on one segment."""
    ring = writer_mod.SingleWriterShmRingBuffer(1 << 20, create=True)
    writer = writer_mod.SingleWriterShmObjectStorage(
        256 * 1024, 1, ring, serde_class=writer_mod.MsgpackSerde
    )
    try:
        size, name = ring.handle()
        reader = reader_mod.SingleWriterShmObjectStorage(
            256 * 1024,
            1,
            reader_mod.SingleWriterShmRingBuffer(size, name=name),
            serde_class=reader_mod.MsgpackSerde,
            reader_lock=mp.Lock(),
        )
        try:
            address, monotonic_id = writer.put("k", value)
            return reader.get(address, monotonic_id, writer.get_signature("k"), "k")
        finally:
            reader.close()
    finally:
        writer.close()


def same_bytes(one: Any, other: Any, value: Any) -> bool:
    """Both serdes write `value` as the same metadata and data."""
    return serialized(one, value) == serialized(other, value)


def intact(writer_mod: ModuleType, reader_mod: ModuleType, value: Any) -> bool:
    """`value` comes out of `reader_mod`'s reader as `writer_mod`'s writer put it."""
    return same(handed_over(writer_mod, reader_mod, value), value)


def exchange(release: ModuleType, ref: ModuleType) -> dict[str, Any]:
    """Every value both ways; the differences, by name."""
    rel_serde, ref_serde = release.MsgpackSerde(), ref.MsgpackSerde()
    problems: list[str] = []
    checks: list[tuple[str, Callable[[], bool]]] = []
    for name, value in values():
        checks.append(
            (f"{name}: same bytes", functools.partial(same_bytes, rel_serde, ref_serde, value))
        )
        for writer, reader, what in (
            (release, ref, "release writer, refimpl reader"),
            (ref, release, "refimpl writer, release reader"),
        ):
            checks.append((f"{name}: {what}", functools.partial(intact, writer, reader, value)))
    for what, check in checks:
        try:
            if not check():
                problems.append(f"{what}: differs")
        except Exception as exc:  # noqa: BLE001 - each failure named, the others still run
            problems.append(f"{what}: {type(exc).__name__}: {exc}")
    return {"values": len(values()), "checks": len(checks), "problems": problems}


def main() -> int:
    """Exchange with the installed release; exit 1 when anything differs."""
    import importlib

    import refimpl

    release = importlib.import_module("vllm.distributed.device_communicators.shm_object_storage")
    result = exchange(release, refimpl)
    print(json.dumps(result))
    return 0 if not result["problems"] else 1


if __name__ == "__main__":
    sys.exit(main())
