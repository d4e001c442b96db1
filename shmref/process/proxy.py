"""`--impl exec:PROGRAM`: the contract's classes (shmref.contract) over the
process protocol (docs/protocol.md), so that every property, replay and
state machine of the oracle runs unchanged on a store in any language.

Values are serialized and deserialized here, with the storage's serde
class; the program stores and returns bytes. A ring's `access_buf` and
`free_buf`'s predicate see the chunk in place: the proxy maps the segment
the program created, by the name in its handle. Capabilities the program
does not announce are absent attributes (`not run: missing X`), or, for the
ring methods the contract requires, methods that raise MissingCapability.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from refimpl.serde import MsgpackSerde, ObjectSerde
from shmref.contract import (
    AFTER_NEXT_HOOK,
    BYTES_VALUES,
    DROP_AHEAD_HOOK,
    POSITIONS_HOOK,
    RING_POSITIONS,
    SEND_AHEAD_HOOK,
)
from shmref.core.vocabulary import InjectedCopyFailure, TornCopy
from shmref.process import PROGRAM_PREFIX
from shmref.process.channel import Program, program
from shmref.process.messages import (
    POSITIONS,
    REQUEST_PIPELINE,
    b64,
    encode,
    encoded_calls,
    unb64,
)
from shmref.process.ring import RING_ALIAS, BadArgument, ProxyRing, state_property

PREFIX = PROGRAM_PREFIX
SENT_AHEAD = frozenset({"is_cached"})  # a storage's calls the oracle names ahead (observe)
# The classes' module: the oracle's watchdog (shmref.oracle.worker) looks
# for calls into the implementation by the file their module names; this
# alias names this file alone (a dotted name would name all of shmref).
ALIAS = "shmref_exec_proxy"
sys.modules.setdefault(ALIAS, sys.modules[__name__])


@dataclass
class ProcessHandle:
    """What `handle()` returns: the contract's fields (picklable, so that a
    reader process gets it)."""

    max_object_size: int
    n_readers: int
    ring_buffer_handle: tuple[int, str]
    serde_class: type
    reader_lock: Any


class ProxyRead:
    """A read in flight (split read): the program's read id, and the copy."""

    def __init__(self, storage: ProxyStorage, read_id: Any) -> None:
        self.storage, self.read_id = storage, read_id
        self.value: Any = None
        self.error: BaseException | None = None

    def close(self) -> None:
        """Nothing is held on this side (the program closes its read at get_end)."""


class ProxyStorage:
    """`SingleWriterShmObjectStorage` over the protocol."""

    PROGRAM: Program
    SPEC: str
    ARGV: list[str]
    RING: type[ProxyRing]
    # deserialize runs here, after the program's read: a get held at its
    # serde would be cut after its end (shmref.contract.split_read_missing)
    SERDE_IN_PROCESS: frozenset[str] = frozenset()

    def __init__(
        self,
        max_object_size: int,
        n_readers: int,
        ring_buffer: Any,
        serde_class: type = MsgpackSerde,
        reader_lock: Any = None,
    ) -> None:
        ring = ring_buffer._id if isinstance(ring_buffer, self.RING) else encode(ring_buffer)
        self._prog = (
            ring_buffer._prog
            if isinstance(ring_buffer, self.RING)
            else program(self.SPEC, self.ARGV)
        )
        got = self._prog.request(
            "create",
            ring=ring,
            max_object_size=encode(max_object_size),
            n_readers=encode(n_readers),
            reader_lock=reader_lock is not None,
        )
        self._adopt(got["storage"], got["is_writer"], ring_buffer, serde_class, reader_lock)
        self.max_object_size, self.n_readers = max_object_size, n_readers

    def _adopt(
        self, storage_id: str, is_writer: bool, ring: Any, serde_class: type, lock: Any
    ) -> None:
        self._id, self.is_writer, self.ring_buffer = storage_id, bool(is_writer), ring
        self.serde_class, self._reader_lock = serde_class, lock
        self.ser_de = serde_class()

    def _call(self, op: str, **arguments: Any) -> Any:
        with self._locked():
            return self._prog.request(op, self._id, **arguments)

    def _locked(self) -> AbstractContextManager[Any]:
        """The caller's reader lock around the request, if the program's
        readers lock under the oracle's lock (hello: reader_lock "oracle")."""
        if not self._oracle_locks():
            return nullcontext()
        lock: AbstractContextManager[Any] = self._reader_lock
        return lock

    def _handle_args(self, address: Any, monotonic_id: Any, signature: Any, key: Any) -> Any:
        """A signature is a list: a tuple (JSON would make it one) is sent as
        unrepresentable, for the program to refuse as the seed does."""
        tuple_signature = type(signature) is tuple
        return {
            "address": encode(address),
            "monotonic_id": encode(monotonic_id),
            "signature": {"unrepresentable": "tuple"} if tuple_signature else encode(signature),
            "key": encode(key),
        }

    def put(self, key: str, value: Any) -> tuple[int, int]:
        data, data_bytes, metadata, md_bytes = self.ser_de.serialize(value)
        frames = data if type(data) is list else [data]
        for part in (metadata, *frames):
            if not isinstance(part, bytes | bytearray | memoryview):
                raise BadArgument(f"Unsupported data type for serialization: {type(part).__name__}")
        # The serde runs here, not in the program: a serde that lies about
        # its sizes is refused here (the program only ever sees bytes).
        sizes = (memoryview(metadata).nbytes, sum(memoryview(f).nbytes for f in frames))
        if (md_bytes, data_bytes) != sizes:
            raise ValueError(
                f"serializer returned sizes ({md_bytes}, {data_bytes}) that do not match "
                f"its bytes {sizes}"
            )
        got = self._call(
            "put", key=encode(key), metadata=b64(metadata), data=[b64(f) for f in frames]
        )
        return got[0], got[1]

    def _value(self, got: Any, what: str) -> bytes:
        if not isinstance(got, dict):
            raise_bad(self._prog, f"{what}'s result must be {{data}}, not {got!r}")
        return unb64(got.get("data"), f"{what}'s data")

    def get(
        self,
        address: int,
        monotonic_id: int,
        signature: list[int] | None = None,
        key: str | None = None,
    ) -> Any:
        got = self._call("get", **self._handle_args(address, monotonic_id, signature, key))
        return self.ser_de.deserialize(memoryview(self._value(got, "get")))

    def get_cached(self, key: str) -> tuple[int, int]:
        got = self._call("get_cached", key=encode(key))
        return got[0], got[1]

    def is_cached(self, key: str) -> bool:
        return bool(self._call("is_cached", key=encode(key)))

    def get_signature(self, key: str) -> list[int]:
        got: list[int] = self._call("get_signature", key=encode(key))
        return got

    def verify_signature(
        self, key: str | None, address: int, monotonic_id: int, signature: Any
    ) -> None:
        self._call("verify_signature", **self._handle_args(address, monotonic_id, signature, key))

    def touch(
        self, key: str, address: int = 0, monotonic_id: int = 0, signature: Any = None
    ) -> None:
        self._call("touch", **self._handle_args(address, monotonic_id, signature, key))

    def release_touches(self) -> None:
        self._call("release_touches")

    def free_unused(self) -> None:
        self._call("free_unused")

    def clear(self) -> None:
        self._call("clear")

    def close(self) -> None:
        self._call("close")

    def handle(self) -> ProcessHandle:
        got = self._call("handle")
        size, name = got["ring_buffer_handle"]
        return ProcessHandle(
            got["max_object_size"],
            got["n_readers"],
            (size, name),
            self.serde_class,
            self._reader_lock,
        )

    @classmethod
    def _from_handle(cls, handle: Any) -> ProxyStorage:
        ring_handle = handle.ring_buffer_handle
        prog = program(cls.SPEC, cls.ARGV)
        got = prog.request(
            "attach",
            max_object_size=encode(handle.max_object_size),
            n_readers=encode(handle.n_readers),
            ring_buffer_handle=encode(ring_handle),
            reader_lock=handle.reader_lock is not None,
        )
        storage = cls.__new__(cls)
        storage._prog = prog
        ring = cls.RING._attached(prog, got["ring"], (ring_handle[0], ring_handle[1]))
        storage._adopt(
            got["storage"], got["is_writer"], ring, handle.serde_class, handle.reader_lock
        )
        storage.max_object_size, storage.n_readers = handle.max_object_size, handle.n_readers
        return storage

    def _oracle_locks(self) -> bool:
        """The oracle holds this storage's reader lock around each request."""
        return self._reader_lock is not None and self._prog.reader_lock == "oracle"

    def _send_ahead_refused(self, calls: list[tuple[str, dict[str, Any]]]) -> bool:
        return self._oracle_locks() or any(op not in SENT_AHEAD for op, _ in calls)

    def _send_ahead(self, calls: list[tuple[str, dict[str, Any]]]) -> int:
        """The calls the caller makes next, sent before it asks for each
        (SEND_AHEAD_HOOK: request.pipeline): `is_cached` alone, on a storage
        the oracle holds no lock around (a lock held around each request
        would not be held while the program runs one sent ahead)."""
        if self._send_ahead_refused(calls):
            return 0
        return self._prog.ahead.send(self._id, encoded_calls(calls))

    def _drop_ahead(self) -> None:
        """The calls sent ahead that the caller will not make (DROP_AHEAD_HOOK)."""
        self._prog.ahead.drop()

    def _after_next(self, calls: Callable[[], list[tuple[str, dict[str, Any]]]] | None) -> None:
        """The calls the caller makes right after the step's last request to
        this program (AFTER_NEXT_HOOK: those `_send_ahead` takes, named when
        that request is written, behind it); None: forget them."""
        if calls is None or self._oracle_locks():
            self._prog.after_next = None
            return

        def encoded() -> list[tuple[str, dict[str, Any]]]:
            named = calls()
            return [] if self._send_ahead_refused(named) else encoded_calls(named)

        self._prog.after_next = (self._id, encoded)

    _reclaim_extra: Any = None

    def _set_reclaim_extra(self, value: int) -> None:
        """refimpl's knob (capability storage.RECLAIM_EXTRA): 0 frees as the seed."""
        self._call("set_reclaim_extra", value=encode(value))
        self._reclaim_extra = value

    # the split read, present when announced (shmref.process.proxy.build)
    def _get_begin(
        self, address: int, monotonic_id: int, signature: Any = None, key: Any = None
    ) -> ProxyRead:
        got = self._call("get_begin", **self._handle_args(address, monotonic_id, signature, key))
        if not isinstance(got, dict) or not isinstance(got.get("read"), str):
            raise_bad(self._prog, f"get_begin's result must be {{read}}, not {got!r}")
        return ProxyRead(self, got["read"])

    def _get_copy(self, read: ProxyRead) -> None:
        read_id = read.read_id if isinstance(read, ProxyRead) else encode(read)
        data = self._value(self._call("get_copy", read=read_id), "get_copy")
        try:
            read.value = self.ser_de.deserialize(memoryview(data))
        except Exception as exc:  # reported by get_end, after the read is counted
            read.error = exc

    def _get_end(self, read: ProxyRead) -> Any:
        read_id = read.read_id if isinstance(read, ProxyRead) else encode(read)
        self._call("get_end", read=read_id)
        if isinstance(read.error, InjectedCopyFailure):
            raise read.error  # the oracle's own (the spec's COPY_FAIL)
        if read.error is not None:  # the serde here failed on the program's bytes: no refusal
            raise TornCopy(
                f"its serde could not decode the bytes: {type(read.error).__name__}: {read.error}"
            ) from read.error
        return read.value


def raise_bad(prog: Program, text: str) -> None:
    from shmref.process.messages import ProtocolError

    prog.fail(ProtocolError(f"{prog.spec}: {text}"))


_MODULES: dict[str, ModuleType] = {}


def build(spec: str) -> ModuleType:
    """The module `exec:PROGRAM` stands for: its program started here (for
    its hello), its classes bound to it; one module per program, so that
    every caller in this process shares its classes."""
    argv = shlex.split(spec[len(PREFIX) :])
    if not argv:
        raise ValueError(f"{spec!r}: name a program after exec:")
    prog = program(spec, argv)
    if spec in _MODULES:
        return _MODULES[spec]
    caps = prog.capabilities
    ring_attrs: dict[str, Any] = {
        "PROGRAM": prog,
        "SPEC": spec,
        "ARGV": argv,
        "__module__": RING_ALIAS,
    }
    for name in RING_POSITIONS:
        if f"ring.{name}" in caps:
            ring_attrs[name] = state_property(name)
    if set(POSITIONS) <= caps:
        ring_attrs[POSITIONS_HOOK] = ProxyRing._positions
    if "ring.ID_MAX" in caps:
        ring_attrs["ID_MAX"] = state_property("ID_MAX")
    if REQUEST_PIPELINE in caps:
        ring_attrs[SEND_AHEAD_HOOK] = ProxyRing._send_ahead
        ring_attrs[DROP_AHEAD_HOOK] = ProxyRing._drop_ahead
    ring_cls = type("SingleWriterShmRingBuffer", (ProxyRing,), ring_attrs)
    storage_attrs: dict[str, Any] = {
        BYTES_VALUES: prog.version >= 2,  # version 1 sends bytes without their value
        "PROGRAM": prog,
        "SPEC": spec,
        "ARGV": argv,
        "RING": ring_cls,
        "__module__": ALIAS,
    }
    if {"storage.get_begin", "storage.get_copy", "storage.get_end"} <= caps:
        for name in ("get_begin", "get_copy", "get_end"):
            storage_attrs[name] = getattr(ProxyStorage, f"_{name}")
    if REQUEST_PIPELINE in caps:
        storage_attrs[SEND_AHEAD_HOOK] = ProxyStorage._send_ahead
        storage_attrs[DROP_AHEAD_HOOK] = ProxyStorage._drop_ahead
        storage_attrs[AFTER_NEXT_HOOK] = ProxyStorage._after_next
    if "storage.RECLAIM_EXTRA" in caps:
        storage_attrs["RECLAIM_EXTRA"] = property(
            lambda self: self._reclaim_extra, ProxyStorage._set_reclaim_extra
        )
    storage_cls = type("SingleWriterShmObjectStorage", (ProxyStorage,), storage_attrs)
    storage_cls.create_from_handle = staticmethod(storage_cls._from_handle)  # type: ignore[attr-defined]
    module = ModuleType(spec, f"the store program {argv[0]!r} behind the process protocol")
    module.SingleWriterShmRingBuffer = ring_cls  # type: ignore[attr-defined]
    module.SingleWriterShmObjectStorage = storage_cls  # type: ignore[attr-defined]
    module.ObjectSerde = ObjectSerde  # type: ignore[attr-defined]
    module.MsgpackSerde = MsgpackSerde  # type: ignore[attr-defined]
    module.PROGRAM = prog  # type: ignore[attr-defined]
    # the proxy serializes and deserializes here, not in the program: a
    # serde's failure never reaches the program (contract.SERDE_IN_PROCESS)
    module.SERDE_IN_PROCESS = frozenset()  # type: ignore[attr-defined]
    _MODULES[spec] = module
    return module
