"""A store program's stderr, kept up to a limit: passed on to the oracle's
own stderr (a worker's log, which a CRASH's detail quotes) until the
program has written its limit (the run's `max_stderr`, MAX_STDERR by
default); past it the program is stopped and its property is ERROR naming
the limit. Read in a thread of its own, so
that a program logging while no request waits never blocks on a full pipe."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

__all__ = [
    "STDERR_OPTION",
    "StderrTap",
]

STDERR_OPTION = "--max-stderr"  # the oracle's option that sets it (docs/protocol.md, Limits)


class StderrTap(threading.Thread):
    """Drains one pipe until it closes; calls `over(text)` once when the
    limit is passed (what comes after is read and dropped)."""

    def __init__(self, fd: int, over: Callable[[str], None], limit: int) -> None:
        super().__init__(daemon=True, name="shmref-program-stderr")
        self.fd, self.over, self.limit = fd, over, limit
        self.kept = 0
        self.told = False

    def run(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            room = self.limit - self.kept
            if room > 0:
                self.forward(chunk[:room])
            self.kept += len(chunk)
            if self.kept > self.limit and not self.told:
                self.told = True
                self.over(
                    f"the program wrote more than {self.limit} bytes on stderr "
                    f"(the limit of what the oracle keeps, {STDERR_OPTION})"
                )
            # past the limit nothing is kept, but the pipe is still drained:
            # a child of the program blocked on it would never exit

    @staticmethod
    def forward(data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(2, view) :]
            except OSError:
                return
