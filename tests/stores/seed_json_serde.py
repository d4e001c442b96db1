"""The seed's code with a JSON serde of its own as default: it refuses bytes
(TypeError), reads a dict's int keys back as strings and a tuple as a list.
What it stores or changes is the serde's business: the store passes
seed-compatible as the seed does (tests/oracle/test_layout_claim.py)."""

from __future__ import annotations

import json
from typing import Any

from _seedtext import load_into, port_source

load_into(globals(), port_source())


class JsonSerde:
    """`[4-byte payload length]` metadata, then the UTF-8 JSON text."""

    def serialize(self, value: Any) -> tuple[bytes, int, bytes, int]:
        payload = json.dumps(value, allow_nan=False).encode()
        header = len(payload).to_bytes(4, "little")
        return payload, len(payload), header, len(header)

    def deserialize(self, data: memoryview) -> Any:
        length = int.from_bytes(data[:4], "little")
        return json.loads(bytes(data[4 : 4 + length]))


_init = SingleWriterShmObjectStorage.__init__  # type: ignore[name-defined]  # noqa: F821
_init.__defaults__ = (JsonSerde, None)
