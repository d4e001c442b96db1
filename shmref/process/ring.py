"""The ring of `exec:PROGRAM` (shmref.process.proxy): the contract's
`SingleWriterShmRingBuffer` over the process protocol. `access_buf` and
`free_buf`'s predicate see the chunk in place: the proxy maps the segment the
program created, by the name in its handle. The ring methods a program
leaves out raise MissingCapability (`not run: missing ring.X`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from refimpl.segment import attach_untracked
from shmref.contract import FREE_IDS_HOOK, RING_POSITIONS, MissingCapability
from shmref.process.channel import Program, program
from shmref.process.messages import REQUEST_FREE_IDS, b64, encode, encoded_calls, unb64

# The ring class's module, for the oracle's watchdog (as shmref.process.proxy.ALIAS).
RING_ALIAS = "shmref_exec_ring"
sys.modules.setdefault(RING_ALIAS, sys.modules[__name__])


class BadArgument(ValueError, TypeError):
    """A caller's argument the proxy cannot send (a predicate that is not callable)."""


class ProxyRing:
    """`SingleWriterShmRingBuffer` over the protocol."""

    PROGRAM: Program  # set on the class built for one program: its hello
    SPEC: str
    ARGV: list[str]

    def __init__(self, data_buffer_size: int, name: str | None = None, create: bool = False):
        self._segment: Any = None
        self._closed = False
        self._prog = program(self.SPEC, self.ARGV)  # a new one if the last one failed
        got = self._prog.request(
            "create_ring",
            data_buffer_size=encode(data_buffer_size),
            name=encode(name),
            create=encode(create),
        )
        self._adopt(got["ring"], got["is_writer"], got["handle"])

    def _adopt(self, ring_id: str, is_writer: bool, handle: list[Any]) -> None:
        self._id, self.is_writer = ring_id, bool(is_writer)
        self._handle = (handle[0], handle[1])

    @classmethod
    def _attached(cls, prog: Program, ring_id: str, handle: tuple[int, str]) -> ProxyRing:
        ring = cls.__new__(cls)
        ring._segment, ring._closed = None, False
        ring._prog = prog
        ring._adopt(ring_id, False, list(handle))
        return ring

    def _call(self, op: str, **arguments: Any) -> Any:
        return self._prog.request(op, self._id, **arguments)

    def _need(self, capability: str) -> None:
        if capability not in self._prog.capabilities:
            raise MissingCapability(capability)

    def _view(self, offset: int, length: int) -> memoryview:
        if self._segment is None:
            self._segment = attach_untracked(self._handle[1])
        buf: memoryview = self._segment.buf
        return buf[offset : offset + length]

    def _state(self) -> dict[str, int]:
        """ring_state, asked once until the next request that may change it
        (the replay compares four positions after every step), or carried by
        the last reply (reply.ring_state)."""
        prog = self._prog
        known = prog.states.known.get(self._id)  # the usual case, without a call more
        if known is not None and known[0] == prog.generation:
            return known[1]
        return prog.ring_state(self._id)

    def _positions(self) -> dict[str, int]:
        """The four positions at once (shmref.contract.POSITIONS_HOOK): what
        reading each property gives, from one look at the known state."""
        state = self._state()
        return {name: state[name] for name in RING_POSITIONS}

    def handle(self) -> tuple[int, str]:
        got = self._call("handle")
        return got[0], got[1]

    def clear(self) -> None:
        self._call("clear")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if not self._prog.stopped_quietly:  # else the copy, and its segment, are gone
                self._call("close")
        finally:
            if self._segment is not None:
                with suppress(BufferError, OSError):
                    self._segment.close()

    def get_auth_secret(self) -> bytes:
        self._need("ring.get_auth_secret")
        return unb64(self._call("get_auth_secret"), "get_auth_secret's result")

    def int2byte(self, integer: int) -> bytes:
        self._need("ring.int2byte")
        return unb64(self._call("int2byte", integer=encode(integer)), "int2byte's result")

    def byte2int(self, byte_data: bytes) -> int:
        self._need("ring.byte2int")
        data = (
            b64(byte_data)
            if isinstance(byte_data, bytes | bytearray | memoryview)
            else encode(byte_data)
        )
        result: int = self._call("byte2int", data=data)
        return result

    def allocate_buf(self, size: int) -> tuple[int, int]:
        self._need("ring.allocate_buf")
        got = self._call("allocate_buf", size=encode(size))
        return got[0], got[1]

    @contextmanager
    def access_buf(self, address: int) -> Iterator[tuple[memoryview, tuple[int, int]]]:
        self._need("ring.access_buf")
        got = self._call("access_buf", address=encode(address))
        view = self._view(got["offset"], got["length"])
        try:
            yield view, (got["monotonic_id"], got["size"])
        finally:
            view.release()

    def free_buf(
        self, is_free_fn: Callable[[int, memoryview], bool], nbytes: int | None = None
    ) -> Iterable[int]:
        self._need("ring.free_buf")
        if not callable(is_free_fn):
            raise BadArgument(f"is_free_fn must be callable, not {type(is_free_fn).__name__}")
        raised: list[BaseException] = []

        def ask(callback: dict[str, Any]) -> bool:
            view = self._view(callback["offset"], callback["length"])
            try:
                return bool(is_free_fn(callback["monotonic_id"], view))
            except Exception as exc:
                raised.append(exc)
                raise
            finally:
                view.release()

        arguments = self._free_arguments(is_free_fn, nbytes)
        asks = None if "free_ids" in arguments else ask  # the ids sent: nothing to ask
        try:
            freed: list[int] = self._call("free_buf", callback=asks, **arguments)
        except Exception as exc:
            if raised and type(exc).__name__ == type(raised[-1]).__name__:
                raise raised[-1] from None  # the predicate's own exception, as raised
            raise
        return freed

    def _free_arguments(self, is_free_fn: Any, nbytes: Any) -> dict[str, Any]:
        """free_buf's arguments: with the ids a predicate frees by id alone
        (FREE_IDS_HOOK) to a program that takes them (request.free_ids)."""
        arguments: dict[str, Any] = {"nbytes": encode(nbytes)}
        ids = getattr(is_free_fn, FREE_IDS_HOOK, None)
        if ids is not None and REQUEST_FREE_IDS in self._prog.capabilities:
            arguments["free_ids"] = sorted(int(i) for i in ids)
        return arguments

    def _send_ahead(self, calls: list[tuple[str, dict[str, Any]]]) -> int:
        """The ring calls the caller makes next, in order, sent before it asks
        for each (SEND_AHEAD_HOOK: request.pipeline); how many were sent."""
        if any(op != "clear" and f"ring.{op}" not in self._prog.capabilities for op, _ in calls):
            return 0  # one the proxy refuses without asking: not sent ahead
        encoded = [
            (op, self._free_arguments(kwargs["is_free_fn"], kwargs["nbytes"]))
            if op == "free_buf"
            else encoded_calls([(op, kwargs)])[0]
            for op, kwargs in calls
        ]
        return self._prog.ahead.send(self._id, encoded)

    def _drop_ahead(self) -> None:
        """The calls sent ahead that the caller will not make (DROP_AHEAD_HOOK)."""
        self._prog.ahead.drop()

    def __del__(self) -> None:
        """A ring dropped without close() is closed, as the seed's __del__ closes
        it (a writer's segment is then removed: no leak); at interpreter exit
        the program may be gone already, which is no error of the store's."""
        if hasattr(self, "_closed") and not self._closed:
            self._closed = True
            with suppress(Exception):
                self._prog.close_later(self._id)
        if getattr(self, "_segment", None) is not None:
            with suppress(BufferError, OSError):
                self._segment.close()


def state_property(name: str) -> property:
    def get(self: ProxyRing) -> int:
        value: int = self._state()[name]
        return value

    if name != "ID_MAX":
        return property(get)

    def set_(self: ProxyRing, value: int) -> None:
        self._call("set_id_max", value=encode(value))

    return property(get, set_)
