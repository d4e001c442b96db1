"""The one place where refimpl checks what callers pass in (issue 19).

Every public method of the ring and the store calls these at its boundary,
before touching shared memory, so that bad input gets one clear exception:

- `ValueError` for a bad value (out of range, a forged handle, a key that is
  not valid UTF-8, an address whose chunk does not fit in the segment);
- `BadArgumentType` for a wrong Python type: a subclass of both `TypeError`
  (what Python raises for a wrong type) and `ValueError` (what the seed's
  API documents and what vLLM catches around `put`, FINDINGS 2), so code
  written against either keeps working.

Checks are explicit `if`s, not asserts, so they hold under `python -O`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# A handle's address and id are signed as 8- and 4-byte unsigned ints.
ADDRESS_LIMIT = 2**64
ID_LIMIT = 2**32
SIGNATURE_BYTES = 32
# The most data bytes a chunk can hold: its size, header included, is a signed
# 4-byte field (FINDINGS 12).
MAX_CHUNK_DATA = 2**31 - 1 - 8


class BadArgumentType(ValueError, TypeError):
    """A wrong Python type: catchable as TypeError and as the seed's ValueError."""


def check_int(name: str, value: Any, low: int | None = None, high: int | None = None) -> int:
    """`value` if it is exactly an int within [low, high].

    Exactly `int`: a bool, Fraction, float, Decimal or complex that equals
    an int is refused (the seed's writer `get` accepted `Fraction(id)`).
    """
    if type(value) is not int:
        raise BadArgumentType(f"{name} must be an int, not {type(value).__name__}")
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}, got {value}")
    return value


def check_key(key: Any) -> str:
    """`key` if it is a str that UTF-8 can encode (signatures hash its UTF-8)."""
    if type(key) is not str:
        raise BadArgumentType(f"key must be a str, not {type(key).__name__}")
    if not key.isascii():
        try:
            key.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"key {key!r} is not valid UTF-8: {exc.reason} at position {exc.start}"
            ) from None
    return key


def check_handle_fields(address: Any, monotonic_id: Any) -> None:
    """A handle's address and id: exact ints in the ranges its signature encodes."""
    check_int("address", address, low=0, high=ADDRESS_LIMIT - 1)
    check_int("monotonic_id", monotonic_id, low=0, high=ID_LIMIT - 1)


def signature_bytes(signature: Any) -> bytes | None:
    """The bytes of `signature` if it has the form of one (a list of 32 ints,
    each in [0, 255]), else None."""
    if type(signature) is not list or len(signature) != SIGNATURE_BYTES:
        return None
    if set(map(type, signature)) != {int}:  # exactly ints: no bools, floats or int-likes
        return None
    try:
        return bytes(signature)  # refuses an int outside [0, 255]
    except ValueError:
        return None


def check_chunk_address(address: Any, capacity: int, header_bytes: int) -> int:
    """The offset in the data area of the chunk header at `address`, which must
    fit before the end of the segment (else `unpack_from` would read past it)."""
    check_int("address", address, low=0, high=ADDRESS_LIMIT - 1)
    offset: int = address % capacity
    if offset > capacity - header_bytes:
        raise ValueError(
            f"no valid chunk at address {address}: its {header_bytes}-byte header "
            f"would end past the {capacity}-byte buffer"
        )
    return offset


def check_chunk_size(address: int, size: int, room: int, header_bytes: int) -> None:
    """A chunk's size (read from its header) must lie inside the segment."""
    if not header_bytes <= size <= room:
        raise ValueError(
            f"no valid chunk at address {address}: header size {size} "
            f"is outside [{header_bytes}, {room}]"
        )


def check_instance(name: str, value: Any, cls: type[Any]) -> None:
    """`value` must be a `cls`: BadArgumentType naming the argument otherwise."""
    if not isinstance(value, cls):
        raise BadArgumentType(f"{name} must be a {cls.__name__}, not {type(value).__name__}")


def check_fields(name: str, value: Any, fields: tuple[str, ...]) -> None:
    """Duck typing: `value` has every attribute in `fields`."""
    missing = [f for f in fields if not hasattr(value, f)]
    if missing:
        raise BadArgumentType(
            f"{name} must have {', '.join(fields)}; a {type(value).__name__} has no "
            f"{', '.join(missing)}"
        )


def check_callable(name: str, value: Any) -> Callable[..., Any]:
    """`value` if it can be called (a predicate such as `free_buf`'s), else BadArgumentType."""
    if not callable(value):
        raise BadArgumentType(f"{name} must be callable, not {type(value).__name__}")
    return value  # type: ignore[no-any-return]


def check_segment_name(name: Any, *, required: bool) -> str | None:
    """A segment name: a str, or None where the writer may let Python pick one."""
    if name is None and not required:
        return None
    if type(name) is not str:
        raise BadArgumentType(
            f"name must be a str{'' if required else ' or None'}, not {type(name).__name__}"
        )
    bare = name.lstrip("/")
    if not bare or "/" in bare or "\0" in bare or not bare.isprintable() or len(bare) > 200:
        raise ValueError(f"{name!r} is not a valid shared-memory segment name")
    return name
