"""Values as the store's own serde keeps them.

A store is judged, not its serde (docs/conformance.md): a test puts only
values its serde stores, and expects back what that serde alone gives back
(a JSON serde turns tuples into lists, a dict's int keys into strings), and
sizes objects by that serde's overhead."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from shmref.contract import object_size


def serde_of(storage: Any) -> Any:
    """An instance of the storage's serde class (from its handle: the contract)."""
    return storage.handle().serde_class()


def stores(serde: Any, value: Any) -> bool:
    """Whether the serde, on its own, writes `value` and reads it back: a
    value it refuses either way is the serde's business, not the store's."""
    try:
        read_back(serde, value)
    except Exception:
        return False
    return True


def storable(serde: Any, candidates: Iterable[Any]) -> Any:
    """The first of `candidates` the serde stores."""
    for value in candidates:
        if stores(serde, value):
            return value
    raise ValueError(f"{type(serde).__name__} stores none of the test's values")


def read_back(serde: Any, value: Any) -> Any:
    """What the serde alone returns for `value`: serialized, laid out as a
    store lays out an object's bytes (metadata, then data), deserialized."""
    data, _n, metadata, _m = serde.serialize(value)
    body = b"".join(bytes(d) for d in data) if isinstance(data, list) else bytes(data)
    return serde.deserialize(memoryview(bytes(metadata) + body))


def sized(serde: Any, total: int, fill: str = "x") -> bytes | str:
    """The longest run of `fill` (as bytes, else as str if the serde stores
    no bytes) whose object (the read count, the serde's metadata and data) is
    at most `total` bytes: a test fills the ring in the same chunk sizes
    whatever the serde's overhead (refimpl's serde: `total` 45 gives 40 bytes)."""
    for kind in (bytes, str):
        for n in range(total, -1, -1):
            value: bytes | str = fill.encode() * n if kind is bytes else fill * n
            if not stores(serde, value):
                break
            if object_bytes(serde, value) <= total:
                return value
    raise ValueError(f"{type(serde).__name__} stores no {fill!r} run in a {total}-byte object")


def object_bytes(serde: Any, value: Any) -> int:
    """The size put checks against max_object_size (the written contract)."""
    return object_size(serde, value)


def full_size(serde: Any, at_least: int) -> tuple[int, bytes | str]:
    """A max_object_size of `at_least` or a little more, and a value whose
    object is exactly that size under this serde (a serde's overhead can jump
    by a byte at a length boundary, so not every size has such a value)."""
    for total in range(at_least, at_least + 64):
        value = sized(serde, total)
        if object_bytes(serde, value) == total:
            return total, value
    raise ValueError(f"{type(serde).__name__} makes no object of exactly {at_least}-{total} bytes")
