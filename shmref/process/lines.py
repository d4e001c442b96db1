"""A store program's stdout read line by line, within limits (docs/protocol.md,
Limits): a line over MAX_LINE bytes is refused as soon as that many came,
a program that exited is seen even while a child of its holds the pipe,
and a stderr past its limit (shmref.process.stderrtap) stops the read."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any, NoReturn

from shmref.process.messages import (
    ProgramCrashed,
    ProgramFailure,
    ProgramTimeout,
    ProtocolError,
    short,
)

MAX_LINE_OPTION = "--max-line"  # the oracle's option that sets it (docs/protocol.md, Limits)
POLL = 0.25  # seconds between looks at a program that says nothing
# Bytes asked of one read of stdout (more while a long line comes, doubling):
# a read of 1 MiB cost a fresh mapping of that size each time, some 20 us,
# as much as the rest of a request's reading (a reply is a few dozen bytes).
READ_SIZE = 1 << 16


@dataclass
class Traffic:
    """What the oracle in this process said to store programs, for the report
    (docs/protocol.md, "Fewer round trips"): the requests it wrote, and its
    round trips: the replies it read that left no request unanswered, each a
    wait for the program that no request sent ahead shortened."""

    requests: int = 0
    round_trips: int = 0


TRAFFIC = Traffic()


def env_number(name: str, default: float) -> float:
    """A positive number from the environment, else `default`."""
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if 0 < value < float("inf") else default


class Lines:
    """The reading half of a program's conversation (shmref.process.channel.Program)."""

    process: subprocess.Popen[bytes]
    spec: str
    pending: bytearray  # read and not yet taken: appended in place, taken from the front
    overflow: str  # set when its stderr passed the limit
    max_line: int
    timeout: float  # seconds a request may take
    waited: float  # the limit of the read in progress (its message says it)
    log: str | None

    def fail(self, failure: ProgramFailure) -> NoReturn:
        raise failure

    unanswered = 0  # requests written whose replies were not read yet

    def record(self, direction: str, message: Any) -> None:
        """Every message written or read: counted (TRAFFIC), and logged if asked."""
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "request":
            TRAFFIC.requests += 1
            self.unanswered += 1
        elif kind == "reply" and self.unanswered > 0:
            self.unanswered -= 1
            if not self.unanswered:
                TRAFFIC.round_trips += 1
        if self.log:
            with open(self.log, "a", encoding="utf-8") as file:
                file.write(json.dumps({"dir": direction, "msg": message}) + "\n")

    def exit_text(self) -> str:
        code = self.process.poll()
        if code is None:
            return "closed its stdout"
        if code < 0:
            try:
                return f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with code {code}"

    def too_much_stderr(self, text: str) -> None:
        """From the stderr thread: the program is stopped; the request
        waiting for it (or the next one) fails with `text`."""
        self.overflow = f"{self.spec}: {text}"
        if self.process.poll() is None:
            self.process.kill()

    def next_chunk(
        self,
        deadline: float,
        waiting_for: str,
        stderr_stops: bool = True,
        size: int = READ_SIZE,
    ) -> bytes:
        """What the program wrote next on stdout (up to `size` bytes); b""
        once it is gone (its stdout closed, or it exited and nothing more
        comes: a child of its may hold the pipe open). A stderr past the
        limit (unless not `stderr_stops`: then what it wrote before it was
        stopped is still read), or no byte before `deadline`, fails here."""
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            if self.overflow and stderr_stops:
                self.fail(ProtocolError(self.overflow))
            left = deadline - time.monotonic()
            if left <= 0:
                self.fail(
                    ProgramTimeout(
                        f"{self.spec}: no answer within {self.waited:g} s "
                        f"(waiting for {waiting_for})"
                    )
                )
            if select.select([stdout], [], [], min(left, POLL))[0]:
                return os.read(stdout.fileno(), size)
            if self.process.poll() is not None and not select.select([stdout], [], [], POLL)[0]:
                return b""  # exited, and its last words (if any) were read

    def read_line(
        self, waiting_for: str, timeout: float | None = None, *, hello: bool = False
    ) -> dict[str, Any]:
        """The next message; one frame blocks here until it comes (the
        oracle's watchdog sees a hang as one call that does not return). A
        line longer than the limit is refused as soon as that many bytes came.
        `hello`: the first line is read to its end even when stderr passed
        its limit meanwhile: a program stopped for a flood right after its
        hello has said it, and fails at its first request (ERROR naming the
        limit), not as one that said none (exit 2, no report)."""
        self.waited = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + self.waited
        searched = 0  # bytes of `pending` known to hold no newline
        while self.pending.find(b"\n", searched) < 0:  # no copy: replies sent ahead wait here
            searched = len(self.pending)
            if searched > self.max_line:
                self.fail(
                    ProtocolError(
                        f"{self.spec}: a line longer than {self.max_line} bytes (the limit, "
                        f"{MAX_LINE_OPTION}) while the oracle waited for {waiting_for}: "
                        f"{short(self.pending)}"
                    )
                )
            chunk = self.next_chunk(
                deadline, waiting_for, stderr_stops=not hello, size=max(READ_SIZE, searched)
            )
            if not chunk and self.overflow:  # stopped for its stderr
                self.fail(ProtocolError(self.overflow))
            if not chunk:
                try:  # its exit status, if it is exiting
                    self.process.wait(timeout=1)
                except subprocess.TimeoutExpired:
                    pass
                tail = f" after the partial line {short(self.pending)}" if self.pending else ""
                self.fail(
                    ProgramCrashed(
                        f"{self.spec}: the program {self.exit_text()} while the oracle "
                        f"waited for {waiting_for}{tail}"
                    )
                )
            self.pending += chunk  # in place: a long line is not copied once per chunk
        end = self.pending.index(b"\n")
        line = bytes(self.pending[:end])
        del self.pending[: end + 1]  # from the front, without moving what follows
        if len(line) > self.max_line:
            self.fail(
                ProtocolError(
                    f"{self.spec}: a line longer than {self.max_line} bytes (the limit, "
                    f"{MAX_LINE_OPTION}) while the oracle waited for {waiting_for}: {short(line)}"
                )
            )
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.fail(
                ProtocolError(
                    f"{self.spec}: a line that is not UTF-8 (byte {exc.start}): {short(line)}"
                )
            )
        try:
            message = json.loads(text)
        except ValueError:
            self.fail(ProtocolError(f"{self.spec}: a line that is not JSON: {short(line)}"))
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            self.fail(ProtocolError(f"{self.spec}: a message with no type: {short(line)}"))
        self.record("in", message)
        result: dict[str, Any] = message
        return result
