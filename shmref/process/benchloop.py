"""The bench request's loop (docs/protocol.md, "The bench request"): its
keys, its values and the loop itself, one definition for the program that
runs it and the readers that check it (shmref.process.benchcheck).

A value is derived from its index alone, so that a reader in another
process knows what every object must hold without being sent it: value i
is `size` bytes, byte j being (i + j) mod 251 (251, a prime, so no power of
two lines up with it). All of them are slices of one pattern of `size` +
251 bytes, made before the clock starts: a loop pays for no value's making.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

MODULUS = 251

# (address, monotonic_id, signature bytes): what the loop reports per put, in order
Placed = tuple[int, int, bytes]


def key_of(prefix: str, index: int) -> str:
    """The key of put number `index`: the oracle's prefix, then the index in decimal."""
    return f"{prefix}{index}"


def pattern(size: int) -> bytes:
    """Bytes 0, 1, ..., 250, 0, 1, ...: `size` + 251 of them, every value a slice."""
    return (bytes(range(MODULUS)) * (size // MODULUS + 2))[: size + MODULUS]


def value_of(made: bytes | memoryview, index: int, size: int) -> memoryview:
    """Value `index` (its byte j is (index + j) mod 251), a slice of `pattern(size)`."""
    start = index % MODULUS
    return memoryview(made)[start : start + size]


def own_loop(
    writer: Any,
    reader: Any,
    prefix: str,
    count: int,
    size: int,
    stored: Callable[[memoryview], Any],
) -> tuple[float, list[Placed]]:
    """The loop of a Python implementation of the contract, timed by its own
    clock: put value i under key i (`stored(value)` is what `put` is given),
    its signature, and a reader's `get` of it (checked, copied, counted).
    Returns (seconds, what it placed)."""
    made = pattern(size)
    put, sign, get = writer.put, writer.get_signature, reader.get
    placed: list[Placed] = []
    keep = placed.append
    start = time.perf_counter()
    for index in range(count):
        key = key_of(prefix, index)
        address, monotonic_id = put(key, stored(value_of(made, index, size)))
        signature = sign(key)
        get(address, monotonic_id, signature, key)
        keep((address, monotonic_id, bytes(signature)))
    return time.perf_counter() - start, placed
