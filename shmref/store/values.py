"""A store's units and values: the model's unit in bytes for a serde, and a
value of a key that fills a chunk of so many units exactly."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
from types import ModuleType
from typing import Any

UNIT = 16  # bytes per model unit (the smallest): twice the 8-byte chunk header


MD_SIZE = 8


FLAG_BYTES = 4


def value_for(key: str, size: int, serde: Any, unit: int = UNIT) -> str | bytes:
    """A value, recognisably `key`'s, whose serialized object fills a chunk
    of `size` units exactly (object = unit*size - 8 bytes incl. the 4-byte
    count), measured with `serde` (any serde: its overhead is measured, and
    both str and bytes values are tried, so a jump in the overhead at some
    length does not leave a size unreachable; a kind the serde refuses is
    skipped). It starts with a 2-character
    tag of the key, so that even a 1-unit chunk's value tells keys apart."""
    target = unit * size - MD_SIZE
    digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "little")
    tag = (
        "0123456789abcdefghijklmnopqrstuvwxyz"[digest % 36]
        + "0123456789abcdefghijklmnopqrstuvwxyz"[digest // 36 % 36]
    )
    pattern = tag + key + "|"
    for kind in (str, bytes):
        for length in range(target, -1, -1):
            text = (pattern * (length // len(pattern) + 1))[:length]
            value: str | bytes = text if kind is str else text.encode()
            try:
                _data, data_bytes, _md, md_bytes = serde.serialize(value)
            except Exception:  # noqa: BLE001 - a serde may refuse a kind (JSON: bytes)
                break
            total = FLAG_BYTES + md_bytes + data_bytes
            if total == target:
                return value
            if total < target - unit:
                break  # shorter values only get smaller
    raise ValueError(
        f"no str or bytes value of key {key!r} serializes to exactly "
        f"{target - FLAG_BYTES} bytes with {type(serde).__name__} "
        f"(a {size}-unit chunk of {unit} bytes a unit)"
    )


@functools.cache
def unit_for(serde_class: type) -> int:
    """The model's unit for a serde: the smallest multiple of 16 bytes in
    which a 1-, 2- and 3-unit chunk can each be filled exactly (header,
    count and the serde's framing of a key's value). 16 for msgpack."""
    serde = serde_class()
    for unit in range(UNIT, 64 * UNIT + 1, UNIT):
        try:
            for size in (1, 2, 3):
                value_for("a", size, serde, unit)
        except ValueError:
            continue
        return unit
    raise ValueError(f"{serde_class.__name__} frames no value in 1024 bytes")


def default_serde_class(impl: ModuleType) -> type | None:
    """The storage constructor's default `serde_class` (contract: a keyword
    with a default), or None if it has none that can be seen."""
    try:
        parameter = inspect.signature(impl.SingleWriterShmObjectStorage).parameters["serde_class"]
    except (KeyError, TypeError, ValueError):
        return None
    default = parameter.default
    return default if isinstance(default, type) else None


@functools.cache
def probed_serde_class(impl: ModuleType) -> type | None:
    """The serde class of a small storage's handle: the default of a storage
    whose signature hides it (a wrapper's `*args`, a native core's), or None
    if such a storage cannot be made here."""
    ring: Any = None
    try:
        ring = impl.SingleWriterShmRingBuffer(4096, create=True)
        storage = impl.SingleWriterShmObjectStorage(1024, 0, ring)
        serde_class = storage.handle().serde_class
        return serde_class if isinstance(serde_class, type) else None
    except Exception:  # noqa: BLE001 - a store that cannot say: the unit stays 16
        return None
    finally:
        if ring is not None:
            with contextlib.suppress(Exception):
                ring.close()


def own_serde_class(impl: ModuleType) -> type | None:
    """The storage's default serde class: seen in its signature, else on a
    small storage's handle; None when neither can be seen."""
    return default_serde_class(impl) or probed_serde_class(impl)


def driving_serde_class(impl: ModuleType, serde_class: type | None = None) -> type | None:
    """The serde a store is driven with: `serde_class` if given; None (the
    storage's own) when its own frames an object in 16-byte units or cannot
    be seen; else refimpl's msgpack-only serde. A wider unit hides what only
    bytes show (finding 11's reclaim target falls short by less than 16
    bytes), and the releases' serde, the default of vLLM's module and of
    refimpl, needs 64-byte units: so every store is judged at one resolution,
    whatever its serde."""
    if serde_class is not None:
        return serde_class
    own = own_serde_class(impl)
    if own is None or unit_for(own) == UNIT:
        return None
    from refimpl.serde import MsgpackOnlySerde

    return MsgpackOnlySerde


def store_unit(impl: ModuleType, serde_class: type | None = None) -> int:
    """The unit a store is driven in: that of the serde it is driven with
    (`driving_serde_class`), 16 bytes when none can be seen."""
    measured = driving_serde_class(impl, serde_class) or own_serde_class(impl)
    return unit_for(measured) if measured is not None else UNIT
