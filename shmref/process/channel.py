"""The oracle's end of the process protocol (docs/protocol.md): one program,
its hello, one request at a time, callbacks answered, every line checked.

A program that dies, hangs, or breaks the protocol is a `ProgramFailure`
with one line that names what happened (and the offending line). The
process that talks to it may take that failure out of the tests' hands
(`on_failure`): the oracle's worker (shmref.oracle.worker) reports it as its
property's event, which carries the status to the oracle, and exits with a
code that repeats it for the log (CRASH, ERROR, TIMEOUT: `EXIT_CODES`),
because a test may catch exceptions and the verdict must not depend on it;
elsewhere (the pytest plugin, users' tests) it is raised.

The limits (docs/protocol.md, "Limits") and the protocol log come from the
run's configuration (shmref.core.runconfig.current_run), their defaults
outside a run.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import threading
from collections.abc import Callable
from typing import Any, NoReturn

from shmref.core.runconfig import limits
from shmref.process import PROTOCOL_VERSION, older_version_note, segments, shmwatch
from shmref.process.ahead import FOLLOWED, Ahead
from shmref.process.lines import Lines, env_number
from shmref.process.messages import (
    REPLY_RING_STATE,
    ProgramCrashed,
    ProgramFailure,
    ProtocolError,
    as_version,
    error_from,
    hello_problem,
    line_of,
    short,
)
from shmref.process.states import RingStates, state_problem
from shmref.process.stderrtap import StderrTap

__all__ = [
    "Program",
    "env_number",
    "on_failure",
    "program",
]

CRASH_EXIT, ERROR_EXIT, TIMEOUT_EXIT = 85, 86, 87
EXIT_CODES = {CRASH_EXIT: "CRASH", ERROR_EXIT: "ERROR", TIMEOUT_EXIT: "TIMEOUT"}
TIMEOUT_ENV = "SHMREF_EXEC_TIMEOUT"  # seconds a request may take (default 60)
HELLO_TIMEOUT_OPTION = "--hello-timeout"  # the oracle's option (docs/protocol.md, Limits)
EOF_GRACE = 5.0  # seconds a program has to exit after its stdin closes
REPLY_FIELDS = frozenset({"type", "in_reply_to", "result", "error"})


def exit_code(failure: ProgramFailure) -> int:
    """The exit code that says a failure's status (EXIT_CODES), in the worker's log."""
    return {"CRASH": CRASH_EXIT, "TIMEOUT": TIMEOUT_EXIT}.get(failure.status, ERROR_EXIT)


def failure_line(failure: ProgramFailure) -> str:
    """The one line the oracle quotes for a failure (its status first)."""
    return f"shmref.process: {failure.status}: {failure}"


FailureHook = Callable[[ProgramFailure], None]
_ON_FAILURE: FailureHook | None = None


def on_failure(hook: FailureHook | None) -> None:
    """From now on a program's failure goes to `hook` (which does not return:
    the oracle's worker reports it and exits) instead of being raised; None:
    raised again. The process layer knows nothing of who listens."""
    global _ON_FAILURE
    _ON_FAILURE = hook


def request_timeout() -> float:
    """Seconds a request may take: $SHMREF_EXEC_TIMEOUT (the user's), else
    the run's, else 60."""
    run = limits().request_timeout
    return env_number(TIMEOUT_ENV, run if run is not None else 60.0)


# -- the program -----------------------------------------------------------------------------


class Program(Lines):
    """One running program and its conversation; thread-safe (one request
    at a time)."""

    def __init__(self, argv: list[str], spec: str, log: str | None = None) -> None:
        """Start `argv` and read its hello; `log`: a file that gets every
        message (default: the run's `protocol_log`, else none)."""
        self.argv, self.spec = argv, spec
        run = limits()
        self.timeout = request_timeout()
        self.max_line = run.max_line
        self.hello_timeout = run.hello_timeout
        self.waited = self.timeout  # the limit of the read in progress (its message says it)
        self.in_flight = 0  # requests of this thread not yet answered (nested: a finalizer's)
        self.deferred: list[str] = []  # objects a finalizer closed during a request
        self.lock = threading.RLock()
        self.pending = bytearray()
        self.next_id = 0
        self.generation = 0  # requests that may change state (ring states are cached by it)
        self.states = RingStates()  # each ring's last known state (reply.ring_state)
        self.ahead = Ahead(self)  # requests sent before their turn (request.pipeline)
        self.stopped_quietly = False  # failed on a request sent ahead that nobody asked for
        self.dead: str | None = None
        self.failure: ProgramFailure | None = None
        self.overflow = ""  # set when its stderr passed the limit
        self.ledger = segments.Ledger()  # every /dev/shm entry it creates
        self.removed: list[str] = []  # those it left, removed when it ended
        self.log = run.protocol_log if log is None else log
        self.before: shmwatch.Window | None = shmwatch.window()
        self.unplaced: dict[str, Any] | None = None  # a constructor's carried state (`carried`)
        # requests to write behind a step's last (AFTER_NEXT_HOOK): their target, and
        # a function giving them (op, arguments) when that request is written
        self.after_next: tuple[str, Callable[[], list[tuple[str, dict[str, Any]]]]] | None = None
        try:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
            )
        except OSError as exc:
            raise ProgramCrashed(f"{spec}: cannot start {argv[0]!r}: {exc.strerror}") from None
        self.ledger.pid = self.process.pid
        assert self.process.stderr is not None
        StderrTap(self.process.stderr.fileno(), self.too_much_stderr, run.max_stderr).start()
        try:
            self.hello = self.read_hello()
        finally:
            self.account()
        self.version: int = self.hello["protocol"]  # requests are sent as it specified them
        self.capabilities = frozenset(self.hello["capabilities"])
        self.carries_state = REPLY_RING_STATE in self.capabilities
        self.reply_fields = REPLY_FIELDS | {"ring_state"} if self.carries_state else REPLY_FIELDS
        self.roles = frozenset(self.hello["roles"])
        self.reader_lock = self.hello["reader_lock"]
        atexit.register(self.close)

    # -- lines ---------------------------------------------------------------------------

    def account(self) -> None:
        """What appeared in /dev/shm during the request in flight may be the
        program's (settled when its test ends: shmref.process.segments)."""
        if self.before is not None:
            self.ledger.note(self.before.created())
            self.before = None

    def send(self, message: dict[str, Any]) -> None:
        message = as_version(message, self.version)
        self.record("out", message)
        line = line_of(message).encode("utf-8")
        self.write(line, message.get("id", ""), message.get("op", message.get("type")))

    def write(self, data: bytes, rid: Any, op: Any) -> None:
        """Lines to the program's stdin (`rid` and `op`: the first's, for the message)."""
        stdin = self.process.stdin
        assert stdin is not None
        try:
            stdin.write(data)
        except OSError:
            if self.overflow:
                self.fail(ProtocolError(self.overflow))
            self.fail(
                ProgramCrashed(
                    f"{self.spec}: the program {self.exit_text()} before request {rid} ({op})"
                )
            )

    # -- the conversation ------------------------------------------------------------------

    def read_hello(self) -> dict[str, Any]:
        hello = self.read_line("its hello", self.hello_timeout, hello=True)
        problem = hello_problem(hello)
        if problem:
            self.fail(
                ProtocolError(f"{self.spec}: bad hello ({problem}): {short(json.dumps(hello))}")
            )
        return hello

    def request(
        self,
        op: str,
        target: str | None = None,
        callback: Callable[[dict[str, Any]], Any] | None = None,
        **arguments: Any,
    ) -> Any:
        """Send one request (or take the one sent ahead: shmref.process.ahead)
        and return its result (or raise its error)."""
        with self.lock:
            if self.dead:
                raise ProgramCrashed(f"{self.spec}: the program is gone ({self.dead})")
            if op != "ring_state":
                self.generation += 1
            self.in_flight += 1  # from here a finalizer's close waits (close_later)
            try:
                if self.ahead.window is None:  # else that one covers this request
                    self.before = shmwatch.window()
                self.unplaced = None  # a constructor's carried state (`carried`)
                after = self.after_next if op in FOLLOWED else None  # not a finalizer's close
                if after is not None:
                    self.after_next = None  # for this request only
                rid = self.ahead.take(op, target, arguments)
                sent_ahead = rid is not None
                if rid is None:
                    self.next_id += 1
                    rid = self.next_id
                    message: dict[str, Any] = {"type": "request", "id": rid, "op": op}
                    if target is not None:
                        message["object"] = target
                    self.send({**message, **arguments})
                    if after is not None and callback is None:
                        self.ahead.write(after[0], after[1]())  # read as they are made
                try:
                    result = self.converse(rid, op, callback, target)
                except ProgramFailure:
                    raise
                except Exception:
                    if sent_ahead:
                        self.ahead.must_carry(target, rid)
                    raise
                if sent_ahead:
                    self.ahead.must_carry(target, rid)
                made = self.states.made(op, arguments, result)
                if made is not None and self.unplaced is not None:
                    self.states.keep(made, self.generation, self.unplaced)
                return result
            finally:
                self.account()
                self.in_flight -= 1
                self.ahead.done()
                if not self.in_flight and not self.ahead:
                    self.send_deferred()

    def ring_state(self, ring: str) -> dict[str, Any]:
        """The ring's state now: the one the last reply carried if nothing
        was sent since (reply.ring_state), else asked (`ring_state`)."""
        known = self.states.now(ring, self.generation)
        if known is not None:
            return known
        state: dict[str, Any] = self.request("ring_state", ring)
        self.states.keep(ring, self.generation, state)
        return state

    def close_later(self, target: str) -> None:
        """`close` from a finalizer: sent now, or once the request in flight
        in this thread is answered (the garbage collector may run a
        finalizer in the middle of one: a request sent then would take its
        reply)."""
        with self.lock:
            if self.in_flight or self.ahead:
                self.deferred.append(target)
                return
            self.request("close", target)

    def send_deferred(self) -> None:
        while self.deferred and not self.dead:
            target = self.deferred.pop(0)
            try:
                self.request("close", target)
            except Exception:  # a finalizer's close: its error has no caller
                pass

    def converse(
        self,
        rid: int,
        op: str,
        callback: Callable[[dict[str, Any]], Any] | None,
        target: str | None = None,
    ) -> Any:
        """The lines after request `rid`: callbacks answered, then its reply
        (the ring state it carries kept for the target's ring)."""
        waiting = f"the reply to request {rid} ({op})"
        while True:
            got = self.read_line(waiting)
            kind = got["type"]
            if got.get("in_reply_to") != rid or kind not in ("reply", "callback"):
                self.fail(
                    ProtocolError(f"{self.spec}: expected {waiting}, got {short(json.dumps(got))}")
                )
            if kind == "callback":
                self.answer(rid, got, callback, waiting)
                continue
            if ("result" in got) == ("error" in got) or not got.keys() <= self.reply_fields:
                self.fail(
                    ProtocolError(
                        f"{self.spec}: a reply needs exactly one of result or error"
                        f"{' (and may carry ring_state)' if self.carries_state else ''}: "
                        f"{short(json.dumps(got))}"
                    )
                )
            if "ring_state" in got:
                self.carried(got, target)
            if "error" in got:
                error = got["error"]
                if not (
                    isinstance(error, dict)
                    and isinstance(error.get("kind"), str)
                    and error["kind"].isidentifier()
                    and isinstance(error.get("message"), str)
                ):
                    self.fail(
                        ProtocolError(
                            f"{self.spec}: an error must be {{kind, message}}: "
                            f"{short(json.dumps(got))}"
                        )
                    )
                raise error_from(error)
            return got["result"]

    def carried(self, reply: dict[str, Any], target: str | None) -> None:
        """A reply's ring_state: checked, and kept as its target's ring's
        state after the request (one the oracle cannot place is dropped)."""
        problem = state_problem(reply["ring_state"])
        if problem:
            self.fail(
                ProtocolError(
                    f"{self.spec}: a reply's ring_state {problem}: {short(json.dumps(reply))}"
                )
            )
        ring = self.states.ring_of(target)
        if ring is not None:
            self.states.keep(ring, self.generation, reply["ring_state"])
        elif target is None:  # a constructor's: kept once its result names the ring
            self.unplaced = reply["ring_state"]

    def answer(
        self,
        rid: int,
        got: dict[str, Any],
        callback: Callable[[dict[str, Any]], Any] | None,
        waiting: str,
    ) -> None:
        fields = ("monotonic_id", "offset", "length")
        if (
            callback is None
            or got.get("op") != "is_free"
            or not all(type(got.get(f)) is int for f in fields)
        ):
            self.fail(
                ProtocolError(
                    f"{self.spec}: unexpected callback while waiting for {waiting}: "
                    f"{short(json.dumps(got))}"
                )
            )
        reply: dict[str, Any] = {"type": "answer", "in_reply_to": rid}
        try:
            reply["result"] = bool(callback(got))
        except Exception as exc:  # the caller's predicate: its error goes back
            reply["error"] = {"kind": type(exc).__name__, "message": str(exc)}
        self.send(reply)

    def fail(self, failure: ProgramFailure) -> NoReturn:
        """Stop the program and report: to the hook (`on_failure`: the
        oracle's worker, which exits with the status), else raise. On a
        request sent ahead that nobody asked for (shmref.process.ahead), it
        is stopped quietly: no status, and what it left is removed unsaid."""
        if self.ahead.quiet:
            self.kill(quietly=True)
            self.dead, self.stopped_quietly = str(failure), True
            raise failure
        self.kill()
        if self.removed:  # said with the failure: the property's leak
            names = ", ".join(sorted(self.removed))
            failure = type(failure)(f"{failure}; left in /dev/shm (removed): {names}")
        self.dead, self.failure = str(failure), failure
        if _ON_FAILURE is not None:
            _ON_FAILURE(failure)
        raise failure

    def kill(self, quietly: bool = False) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.account()  # what it made in the request it died in
        self.unlink(quietly)

    def unlink(self, quietly: bool = False) -> None:
        """Remove what the program created in /dev/shm and left there (and
        say so, unless it was stopped quietly: its segments were in use)."""
        self.ledger.settle()
        for name in sorted(self.ledger.own):
            if segments.unlink(name) and not quietly:
                self.removed.append(name)
        self.ledger.own.clear()

    def close(self) -> None:
        """EOF on stdin: the program closes what it holds and exits; killed
        after EOF_GRACE seconds."""
        if self.process.poll() is not None:
            self.unlink()
            return
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
            self.process.wait(timeout=EOF_GRACE)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


_PROGRAMS: dict[tuple[int, str], Program] = {}
_START = threading.Lock()


def program(spec: str, argv: list[str]) -> Program:
    """This process's program for `spec` (started on first use, and again
    after it failed; a forked child starts its own)."""
    with _START:
        key = (os.getpid(), spec)
        found = _PROGRAMS.get(key)
        if found is None or found.dead:
            found = _PROGRAMS[key] = Program(argv, spec)
        return found


def failures() -> list[ProgramFailure]:
    """How the programs this process started failed, oldest first."""
    return [p.failure for p in _PROGRAMS.values() if p.failure is not None]


def notes() -> list[str]:
    """One line for each program this process started that speaks an older
    protocol version than the current (how it is judged, what changed)."""
    return sorted(
        {
            older_version_note(p.spec, p.version)
            for p in _PROGRAMS.values()
            if p.version < PROTOCOL_VERSION
        }
    )


def removed() -> list[str]:
    """What the programs this process started left in /dev/shm (removed)."""
    return sorted({name for p in _PROGRAMS.values() for name in p.removed})


def close_all() -> None:
    """EOF to every program this process started (each exits or is killed)."""
    for started in list(_PROGRAMS.values()):
        started.close()
