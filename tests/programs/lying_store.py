"""Store programs that lie in their answer to the bench request
(docs/protocol.md, "The bench request"), for tests/process/test_bench_request.py:
the reference program (refimpl behind shmref.process.serve), whose bench
loop claims work it did not do, each in one way.

    python3 lying_store.py MODE
      none       claims every put and makes none (handles made up)
      short      makes one put fewer and reports the last handle twice
      phantom    makes one put fewer and makes up the last handle
      bytes      puts other bytes for one value (one byte off)
      stale      puts every value, then clears the storage before replying
      uncounted  puts and signs every value, never reads one back
      clock      does the work, and says it took an hour
      few        does the work, and reports one handle fewer
"""

from __future__ import annotations

import base64
import itertools
import sys
import threading
from collections.abc import Callable
from typing import Any

import refimpl
from shmref.process.benchloop import own_loop
from shmref.process.serve import Frames, Handle, PassThroughSerde, Server

MODES = ("none", "short", "phantom", "bytes", "stale", "uncounted", "clock", "few")


class NoReader:
    """A reader that reads nothing (the loop's gets skipped)."""

    def get(self, *args: Any) -> None:
        return None


def reply(seconds: float, placed: list[tuple[int, int, bytes]]) -> dict[str, Any]:
    handles = [[a, i, base64.b64encode(s).decode()] for a, i, s in placed]
    return {"seconds": seconds, "handles": handles}


class Lying(Server):
    def __init__(self, mode: str) -> None:
        super().__init__(refimpl, ["writer", "reader"], sys.stdout, sys.stdin)
        self.mode = mode

    def loop(
        self,
        writer: Any,
        raw: dict[str, Any],
        count: int,
        stored: Callable[[memoryview], Any] | None = None,
        counted: bool = True,
    ) -> tuple[float, list[tuple[int, int, bytes]]]:
        """serve's bench loop, with its values and its reads ours to change."""
        metadata = base64.b64decode(raw["metadata"])
        got = writer.handle()
        handle = Handle(
            got.max_object_size,
            got.n_readers,
            tuple(got.ring_buffer_handle),
            PassThroughSerde,
            threading.Lock(),
        )
        reader = refimpl.SingleWriterShmObjectStorage.create_from_handle(handle)
        try:
            return own_loop(
                writer,
                reader if counted else NoReader(),
                raw["prefix"],
                count,
                raw["size"],
                stored or (lambda value: Frames(metadata, [value])),
            )
        finally:
            reader.close()

    def bench(self, writer: Any, raw: dict[str, Any]) -> dict[str, Any]:
        mode, count = self.mode, raw["count"]
        if mode == "none":
            fake = base64.b64encode(bytes(32)).decode()
            return {"seconds": 1e-6, "handles": [[80 * i, i, fake] for i in range(count)]}
        if mode in ("short", "phantom"):
            seconds, placed = self.loop(writer, raw, count - 1)
            address, monotonic_id, signature = placed[-1]
            extra = (address, monotonic_id) if mode == "short" else (address + 80, monotonic_id + 1)
            return reply(seconds, [*placed, (*extra, signature)])
        if mode == "bytes":
            metadata, index = base64.b64decode(raw["metadata"]), itertools.count()

            def stored(value: memoryview) -> Frames:
                if next(index) == count // 2:  # one byte off, in one value
                    return Frames(metadata, [bytes([value[0] ^ 1]) + bytes(value[1:])])
                return Frames(metadata, [value])

            return reply(*self.loop(writer, raw, count, stored))
        if mode == "uncounted":
            return reply(*self.loop(writer, raw, count, counted=False))
        answer = super().bench(writer, raw)
        if mode == "stale":
            writer.clear()
            writer.put("after", Frames(b"", [b"something else"]))
        elif mode == "clock":
            answer["seconds"] = 3600.0
        elif mode == "few":
            answer["handles"].pop()
        return answer


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in MODES:
        print(f"usage: lying_store.py {'|'.join(MODES)}", file=sys.stderr)
        return 2
    out = sys.stdout
    sys.stdout = sys.stderr
    server = Lying(argv[0])
    server.out = out
    server.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
