"""A program written to version 1 of the process protocol, as
docs/protocol.md stood on the morning of 2026-12-06: the seed's code behind
the reference program of that morning, which says `"protocol": 1` in its
hello, takes `{"unrepresentable": T}` (that object, exactly) as an opaque
value of type T, and any other JSON object as the dict it is.

Sent version 2's `{"unrepresentable": "bytes", "base64": ...}`, its
`put(b"a", ...)` raised `TypeError: unhashable type: 'dict'` where the seed
gives `(0, 0)`, and it lost `test_layout.py::test_same_results_as_seed`.
Judged as version 1 specified, it keeps its statuses, and the oracle says
in one line what version 2 changed (tests/process/test_versions.py).

    python3 v1_seed_store.py [--no-version]
      --no-version   a hello without "protocol" (refused in one line)
"""

from __future__ import annotations

import json
import sys
from typing import Any

from shmref.process import serve
from shmref.process.serve import Server
from shmref.seed.build import build_seed_module


def morning_decode(value: Any) -> Any:
    """The reference program's decode of that morning: only the object
    `{"unrepresentable": T}` is an opaque value."""
    if isinstance(value, dict) and set(value) == {"unrepresentable"}:
        return serve.Unrepresentable(str(value["unrepresentable"]))
    if isinstance(value, list):
        return [morning_decode(v) for v in value]
    return value


class VersionOne(Server):
    """The reference program's server, saying version 1 (or no version), and
    offering none of the protocol's later capabilities (reply.ring_state)."""

    without_version = False
    carry_state = False

    def send(self, message: dict[str, Any]) -> None:
        if message.get("type") == "hello":
            message = {**message, "protocol": 1}
            if self.without_version:
                del message["protocol"]
        self.out.write(json.dumps(message) + "\n")
        self.out.flush()


if __name__ == "__main__":
    serve.decode = morning_decode
    VersionOne.without_version = "--no-version" in sys.argv
    out, sys.stdout = sys.stdout, sys.stderr  # the protocol on stdout; anything else on stderr
    VersionOne(build_seed_module(), ["writer", "reader"], out, sys.stdin).run()
