"""A gallery of store programs that misbehave (tests/process/test_misbehaving_programs.py):
the reference program (refimpl behind shmref.process.serve) with a valid
`hello`, then one misbehaviour, either at its first request (`early`: the
oracle's contract check) or at its first data call (`late`: the first
`put`, in a test); `stderr_flood` also right after its hello, before it
reads a request (`hello`).

    python3 misbehaving_store.py KIND early|late|hello

KIND is one of KINDS below. No KIND needs more than this file and refimpl.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

import refimpl
from shmref.process.serve import Server

KINDS = {
    "flood": "200 MB on stdout without a newline",
    "unsolicited": "a line nobody asked for, before the reply",
    "bad_json": "a line that is not JSON",
    "bad_utf8": "a line that is not UTF-8",
    "wrong_id": "the reply to another request (after making a segment)",
    "stubborn": "ignores EOF and SIGTERM, a child holds its stdout, no reply",
    "setsid": "a child in a session of its own holds its stdout, no reply",
    "leak": "makes a segment nobody names, then dies",
    "stderr_flood": "100 MB on stderr",
}


def sleeper(new_session: bool) -> None:
    """A child that keeps this program's stdout open, ignoring SIGTERM."""
    if os.fork() == 0:
        if new_session:
            os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(3600)
        os._exit(0)


def stray_segment() -> str:
    """A segment made with shm_open and left: no Python resource tracker."""
    import _posixshmem

    name = f"misbehaving_{os.getpid()}"
    fd = _posixshmem.shm_open("/" + name, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
    os.ftruncate(fd, 4096)
    os.close(fd)
    return name


class Misbehaving(Server):
    def __init__(self, kind: str, when: str) -> None:
        super().__init__(refimpl, ["writer", "reader"], sys.stdout, sys.stdin)
        self.kind, self.when, self.done = kind, when, False

    def due(self, op: str) -> bool:
        if self.done or (self.when == "late" and op != "put"):
            return False
        self.done = True
        return True

    def handle(self, op: str, raw: dict[str, Any], a: dict[str, Any]) -> Any:
        result = super().handle(op, raw, a)
        if not self.due(op):
            return result
        out = self.out.buffer  # type: ignore[attr-defined]
        kind = self.kind
        if kind == "flood":
            chunk = b"x" * (1 << 20)
            for _ in range(200):
                out.write(chunk)
            out.flush()
        elif kind == "unsolicited":
            out.write(b'{"type": "log", "text": "put done"}\n')
        elif kind == "bad_json":
            out.write(b"{not json\n")
        elif kind == "bad_utf8":
            out.write(b'{"type": "reply", "in_reply_to": 1, "result": "\xff\xfe"}\n')
        elif kind == "wrong_id":
            stray_segment()
            raw["id"] += 7
        elif kind in ("stubborn", "setsid"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            sleeper(new_session=kind == "setsid")
            time.sleep(3600)
        elif kind == "leak":
            stray_segment()
            os._exit(3)
        elif kind == "stderr_flood":
            chunk = b"e" * (1 << 20)
            for _ in range(100):
                os.write(2, chunk)
        out.flush()
        return result

    def hello(self) -> None:
        super().hello()
        if self.when == "hello" and self.kind == "stderr_flood":  # before any request
            self.done = True
            chunk = b"e" * (1 << 20)
            for _ in range(100):
                os.write(2, chunk)

    def run(self) -> None:
        super().run()
        if self.kind == "stubborn" and self.done:  # EOF ignored
            time.sleep(3600)


def main(argv: list[str]) -> int:
    kind, when = argv[0], argv[1] if len(argv) > 1 else "early"
    if kind == "no_hello":
        time.sleep(3600)
        return 0
    if kind not in KINDS or when not in ("early", "late", "hello"):
        print(
            f"usage: misbehaving_store.py {'|'.join(KINDS)}|no_hello early|late|hello",
            file=sys.stderr,
        )
        return 2
    out = sys.stdout
    sys.stdout = sys.stderr
    server = Misbehaving(kind, when)
    server.out = out
    server.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
