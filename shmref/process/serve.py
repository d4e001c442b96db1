"""A reference program behind the process protocol (docs/protocol.md): a
Python implementation of the contract (refimpl by default) served over
stdin/stdout, so that `--impl "exec:python3 -m shmref.process.serve refimpl"`
must get refimpl's own verdict on every property: the proxy adds nothing.

    python3 -m shmref.process.serve [MODULE] [--only writer|reader] [--plain]

It stores the bytes it is sent (a serde that passes frames through) and
returns the bytes after the read count. Readers run under the oracle's lock
(reader_lock "oracle"): the storage is given a lock of its own that nobody
else contends. `--only ROLE` announces one role (for mixed-run tests).
Each reply to a request on a ring or a storage carries its ring's state
(the capability reply.ring_state: the replays and state machines compare
the ring's positions after every step, without asking), and requests may
come before the replies to earlier ones (request.pipeline: it reads and
answers them in order), and a free_buf may bring the ids it frees
(request.free_ids: then it asks nothing); `--plain` leaves the protocol's
capabilities out, as a program written before them.
A module without `get_begin`, `get_copy` and `get_end` is served without
them, and its split-read properties are `not run` (the oracle cannot cut a
program's `get`); tests/programs/seed_store.py serves the seed with the
three steps, its `get` cut at its serde in the program's own process.
"""

from __future__ import annotations

import base64
import builtins
import importlib
import json
import operator
import sys
import threading
from dataclasses import dataclass
from typing import Any, TextIO

from shmref.contract import OPTIONAL, has, missing
from shmref.process import PROTOCOL_VERSION
from shmref.process.messages import (
    CAPABILITIES,
    POSITIONS,
    REPLY_RING_STATE,
    ROUND_TRIPS,
    error_from,
)
from shmref.process.states import RING_STATE_FIELDS

STATE_OF = operator.attrgetter(*RING_STATE_FIELDS)  # a ring's state, in one call


class Unrepresentable:
    """An argument JSON could not carry (the proxy said which type it was)."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<a {self.type_name}>"


@dataclass
class Frames:
    """A put's value: the serde's bytes, as the oracle sent them."""

    metadata: bytes
    data: list[bytes] | list[memoryview]  # memoryview: the bench request's values


class PassThroughSerde:
    """Stores Frames as they are; reads back the bytes after the read count."""

    def serialize(self, value: Any) -> tuple[Any, int, bytes, int]:
        return value.data, sum(map(len, value.data)), value.metadata, len(value.metadata)

    def deserialize(self, data: memoryview) -> Any:
        return bytes(data)


@dataclass
class Handle:
    max_object_size: Any
    n_readers: Any
    ring_buffer_handle: Any
    serde_class: type
    reader_lock: Any


def decode(value: Any) -> Any:
    """A request's argument as the caller gave it: bytes and bytearray come
    with their bytes (docs/protocol.md, Values); another value JSON cannot
    carry stays an Unrepresentable, for the store to refuse."""
    if isinstance(value, dict) and "unrepresentable" in value:
        kind = str(value["unrepresentable"])
        if kind in ("bytes", "bytearray") and isinstance(value.get("base64"), str):
            data = base64.b64decode(value["base64"])
            return data if kind == "bytes" else bytearray(data)
        return Unrepresentable(kind)
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def kind_of(exc: BaseException) -> str:
    """The builtin exception the error is (the first in its MRO)."""
    for cls in type(exc).__mro__:
        if getattr(builtins, cls.__name__, None) is cls:
            return str(cls.__name__)
    return type(exc).__name__


NOT_MINE = object()  # a group of ops that does not answer this one


class Server:
    carry_state = True  # offer reply.ring_state (when the module has the ring's positions)

    def __init__(self, impl: Any, roles: list[str], out: TextIO, inp: TextIO) -> None:
        self.impl, self.roles, self.out, self.inp = impl, roles, out, inp
        self.objects: dict[str, Any] = {}
        self.counter = 0
        self.current = 0
        self.reads: dict[int, tuple[Any, Any]] = {}  # reads in flight: (storage, read)

    def close_reads(self, obj: Any) -> None:
        """Closing a storage (or its ring) closes the reads still open on it:
        a read the oracle abandoned is never ended (the protocol has no op
        for it; a program must close such reads itself)."""
        for key, (storage, read) in list(self.reads.items()):
            if obj is storage or obj is getattr(storage, "ring_buffer", None):
                if hasattr(read, "close"):
                    read.close()
                del self.reads[key]

    def send(self, message: dict[str, Any]) -> None:
        self.out.write(json.dumps(message) + "\n")
        self.out.flush()

    def hello(self) -> None:
        lacking = {label for label in _missing_optional(self.impl)}
        caps = [c for c in CAPABILITIES if c not in lacking]
        if not hasattr(self.impl.SingleWriterShmObjectStorage, "RECLAIM_EXTRA"):
            caps.remove("storage.RECLAIM_EXTRA")
        if not self.carry_state or not set(POSITIONS) <= set(caps):
            caps = [c for c in caps if c not in ROUND_TRIPS]  # none of the protocol's own
        self.carry_state = REPLY_RING_STATE in caps
        name = getattr(self.impl, "__name__", "?")
        self.send(
            {
                "type": "hello",
                "protocol": PROTOCOL_VERSION,
                "name": f"shmref.process.serve {name}",
                "roles": self.roles,
                "capabilities": caps,
                "reader_lock": "oracle",
            }
        )

    def keep(self, prefix: str, obj: Any) -> str:
        self.counter += 1
        name = f"{prefix}{self.counter}"
        self.objects[name] = obj
        return name

    def ring_state_of(self, target: Any) -> dict[str, int] | None:
        """The state of the ring of a request's target (a ring, or a storage's
        ring) after the request; None for an object it does not know."""
        obj = self.objects.get(target) if isinstance(target, str) else None
        ring = obj if isinstance(target, str) and target[:1] == "r" else None
        if ring is None and obj is not None and target[:1] == "s":
            ring = getattr(obj, "ring_buffer", None)
        if ring is None:
            return None
        try:
            values = STATE_OF(ring)
        except AttributeError:
            return None
        if not all(type(v) is int for v in values):
            return None
        return dict(zip(RING_STATE_FIELDS, values, strict=True))

    def target(self, message: dict[str, Any]) -> Any:
        return self.objects[message["object"]]

    def ask_is_free(self, ring: Any, chunk_id: int, view: memoryview) -> bool:
        address = ring.metadata.get(chunk_id, 0) % ring.data_buffer_size
        offset = ring.DATA_OFFSET + address + ring.MD_SIZE
        self.send(
            {
                "type": "callback",
                "in_reply_to": self.current,
                "op": "is_free",
                "monotonic_id": chunk_id,
                "offset": offset,
                "length": len(view),
            }
        )
        answer = json.loads(self.inp.readline())
        if "error" in answer:  # the caller's predicate raised: stop freeing, say so
            raise error_from(answer["error"])
        return bool(answer["result"])

    def run(self) -> None:
        self.hello()
        for line in self.inp:
            message = json.loads(line)
            self.current = message["id"]
            try:
                args = {k: decode(v) if type(v) in (dict, list) else v for k, v in message.items()}
                result = self.handle(message["op"], message, args)
                reply: dict[str, Any] = {
                    "type": "reply",
                    "in_reply_to": message["id"],
                    "result": result,
                }
            except Exception as exc:  # the implementation's answer, sent back
                reply = {
                    "type": "reply",
                    "in_reply_to": message["id"],
                    "error": {"kind": kind_of(exc), "message": str(exc)},
                }
            target = message.get("object")
            made = reply.get("result") if target is None else None
            if isinstance(made, dict):  # a constructor's: the ring it names, or its storage's
                target = made.get("ring", made.get("storage"))
            state = self.ring_state_of(target) if self.carry_state else None
            if state is not None:
                reply["ring_state"] = state
            self.send(reply)
        for obj in reversed(list(self.objects.values())):  # EOF: close what is open
            if hasattr(obj, "close"):
                try:
                    obj.close()
                except Exception:
                    pass

    def handle(self, op: str, raw: dict[str, Any], a: dict[str, Any]) -> Any:
        """One request's result: a constructor's, a storage's, or any object's."""
        if op in ("create_ring", "create", "attach"):
            return self.construct(op, a)
        obj = self.target(raw)
        for group in (self.storage_op, self.object_op):
            found = group(op, obj, a, raw)
            if found is not NOT_MINE:
                return found
        raise ValueError(f"unknown op {op!r}")

    def construct(self, op: str, a: dict[str, Any]) -> Any:
        """create_ring, create, attach: a new object, kept under an id."""
        impl = self.impl
        if op == "create_ring":
            ring = impl.SingleWriterShmRingBuffer(
                a["data_buffer_size"], name=a["name"], create=a["create"]
            )
            size, name = ring.handle()
            return {
                "ring": self.keep("r", ring),
                "is_writer": bool(ring.is_writer),
                "handle": [size, name],
            }
        if op == "create":
            ring = (
                self.objects.get(a["ring"], a["ring"]) if isinstance(a["ring"], str) else a["ring"]
            )
            lock = threading.Lock() if a["reader_lock"] else None
            storage = impl.SingleWriterShmObjectStorage(
                a["max_object_size"],
                a["n_readers"],
                ring,
                serde_class=PassThroughSerde,
                reader_lock=lock,
            )
            return {"storage": self.keep("s", storage), "is_writer": bool(storage.is_writer)}
        if op == "attach":
            rbh = a["ring_buffer_handle"]
            handle = Handle(
                a["max_object_size"],
                a["n_readers"],
                tuple(rbh) if isinstance(rbh, list) else rbh,
                PassThroughSerde,
                threading.Lock() if a["reader_lock"] else None,
            )
            storage = impl.SingleWriterShmObjectStorage.create_from_handle(handle)
            return {
                "storage": self.keep("s", storage),
                "ring": self.keep("r", storage.ring_buffer),
                "is_writer": bool(storage.is_writer),
            }
        return NOT_MINE

    def storage_op(self, op: str, obj: Any, a: dict[str, Any], raw: dict[str, Any]) -> Any:
        """A storage's puts, reads (whole or split) and lookups (NOT_MINE: another op)."""
        if op in ("put",):
            frames = Frames(
                base64.b64decode(a["metadata"]), [base64.b64decode(d) for d in a["data"]]
            )
            return list(obj.put(a["key"], frames))
        if op in ("get", "get_begin", "touch", "verify_signature"):
            args = (a["address"], a["monotonic_id"], a["signature"], a["key"])
            if op == "get":
                return {"data": base64.b64encode(obj.get(*args)).decode()}
            if op == "get_begin":
                begun = obj.get_begin(*args)
                self.reads[id(begun)] = (obj, begun)
                return {"read": self.keep("g", begun)}
            if op == "touch":
                return obj.touch(a["key"], a["address"], a["monotonic_id"], a["signature"])
            return obj.verify_signature(a["key"], a["address"], a["monotonic_id"], a["signature"])
        if op in ("get_copy", "get_end"):
            read: Any = self.objects.get(a["read"]) if isinstance(a["read"], str) else a["read"]
            if op == "get_copy":
                obj.get_copy(read)
                if getattr(read, "error", None) is not None:
                    raise read.error
                return {"data": base64.b64encode(read.value).decode()}
            try:
                obj.get_end(read)
            finally:
                if isinstance(a["read"], str) and a["read"] in self.objects:
                    self.reads.pop(id(self.objects.pop(a["read"])), None)
            return None
        if op in ("get_cached", "allocate_buf"):
            arg = a["key"] if op == "get_cached" else a["size"]
            return list(getattr(obj, op)(arg))
        if op in ("is_cached", "get_signature"):
            return (
                getattr(obj, op)(a["key"])
                if op == "is_cached"
                else list(obj.get_signature(a["key"]))
            )
        return NOT_MINE

    def object_op(self, op: str, obj: Any, a: dict[str, Any], raw: dict[str, Any]) -> Any:
        """What any object answers: closing, its handle, the ring's own calls,
        the knobs and the bench request (NOT_MINE: another op)."""
        if op == "close":
            self.close_reads(obj)
        if op in ("release_touches", "free_unused", "clear", "close"):
            return getattr(obj, op)()
        if op == "handle":
            got = obj.handle()
            if isinstance(got, tuple):
                return list(got)
            return {
                "max_object_size": got.max_object_size,
                "n_readers": got.n_readers,
                "ring_buffer_handle": list(got.ring_buffer_handle),
            }
        if op == "get_auth_secret":
            return base64.b64encode(bytes(obj.get_auth_secret())).decode()
        if op == "int2byte":
            return base64.b64encode(obj.int2byte(a["integer"])).decode()
        if op == "byte2int":
            data = base64.b64decode(a["data"]) if isinstance(a["data"], str) else a["data"]
            return obj.byte2int(data)
        if op == "access_buf":
            with obj.access_buf(a["address"]) as (view, (chunk_id, size)):
                address = a["address"] % obj.data_buffer_size
                offset = obj.DATA_OFFSET + address + obj.MD_SIZE
                return {
                    "monotonic_id": chunk_id,
                    "size": size,
                    "offset": offset,
                    "length": len(view),
                }
        if op == "free_buf":
            if isinstance(raw.get("free_ids"), list):  # request.free_ids: nothing to ask
                free = frozenset(raw["free_ids"])
                return list(obj.free_buf(lambda i, _v: i in free, a["nbytes"]))
            return list(obj.free_buf(lambda i, v: self.ask_is_free(obj, i, v), a["nbytes"]))
        if op == "ring_state":
            return {n: getattr(obj, n) for n in RING_STATE_FIELDS}
        if op == "set_reclaim_extra":
            obj.RECLAIM_EXTRA = a["value"]
            return None
        if op == "set_id_max":
            obj.ID_MAX = a["value"]
            return None
        if op == "bench":  # docs/protocol.md, "The bench request"
            return self.bench(obj, raw)
        return NOT_MINE

    def bench(self, writer: Any, raw: dict[str, Any]) -> dict[str, Any]:
        """The bench request: the loop on `writer`, with a reader of its own
        segment made (and closed) outside the clock."""
        from shmref.process.benchloop import own_loop

        prefix, count, size = raw.get("prefix"), raw.get("count"), raw.get("size")
        if not (isinstance(prefix, str) and type(count) is int and type(size) is int):
            raise ValueError("bench: prefix (str), count and size (int) are required")
        if count < 1 or size < 1:
            raise ValueError(f"bench: count {count} and size {size}: both must be >= 1")
        metadata = base64.b64decode(raw.get("metadata", ""), validate=True)
        got = writer.handle()
        handle = Handle(
            got.max_object_size,
            got.n_readers,
            tuple(got.ring_buffer_handle),
            PassThroughSerde,
            threading.Lock(),
        )
        reader = self.impl.SingleWriterShmObjectStorage.create_from_handle(handle)
        try:
            seconds, placed = own_loop(
                writer, reader, prefix, count, size, lambda value: Frames(metadata, [value])
            )
        finally:
            reader.close()
        return {
            "seconds": seconds,
            "handles": [[a, i, base64.b64encode(s).decode()] for a, i, s in placed],
        }


def _missing_optional(impl: Any) -> list[str]:
    lacking = missing(impl, optional=True)
    return [
        c.label
        for c in OPTIONAL
        if c.label in lacking or not has(impl, c.name) and c.where == "module"
    ]


def main(argv: list[str]) -> int:
    roles = ["writer", "reader"]
    if "--plain" in argv:
        argv = [a for a in argv if a != "--plain"]
        Server.carry_state = False
    if "--only" in argv:
        at = argv.index("--only")
        roles = [argv[at + 1]]
        argv = argv[:at] + argv[at + 2 :]
    name = argv[0] if argv else "refimpl"
    impl = importlib.import_module(name)
    # the protocol is on stdout: anything the implementation prints goes to stderr
    out, sys.stdout = sys.stdout, sys.stderr
    Server(impl, roles, out, sys.stdin).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
