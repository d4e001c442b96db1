"""A store that is the seed's code with a default serde of its own.

The seed document does not define `MsgpackSerde`; a store built from the
seed's classes with another serde is as faithful as ours. This one's default
`serde_class` is `PickleSerde`: pickle, with an 8-byte metadata header (a
magic and the payload length), so more bytes per object than msgpack and
other refusals (it stores sets and big ints; it refuses lambdas). The oracle
must judge the store, not its serde: it passes seed-compatible as the seed
does (tests/oracle/test_layout_claim.py).
"""

from __future__ import annotations

import pickle
from typing import Any

from _seedtext import load_into, port_source

load_into(globals(), port_source())

MAGIC = b"PKL5"


class PickleSerde:
    """`[4-byte magic][4-byte payload length]` metadata, then the pickle."""

    def serialize(self, value: Any) -> tuple[bytes, int, bytes, int]:
        payload = pickle.dumps(value, protocol=5)
        header = MAGIC + len(payload).to_bytes(4, "little")
        return payload, len(payload), header, len(header)

    def deserialize(self, data: memoryview) -> Any:
        if bytes(data[:4]) != MAGIC:
            raise ValueError("not a PickleSerde object")
        length = int.from_bytes(data[4:8], "little")
        return pickle.loads(bytes(data[8 : 8 + length]))  # noqa: S301 - a test fixture


_init = SingleWriterShmObjectStorage.__init__  # type: ignore[name-defined]  # noqa: F821
_init.__defaults__ = (PickleSerde, None)
