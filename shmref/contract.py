"""The written contract the oracle judges an implementation by: one place.

Every name, signature and attribute the oracle (shmref.store.driver, splitread,
observe, conformance and the tests it runs with `--impl`) may use on an
implementation is listed here, derived from the seed's public API (its
documentation page: the listed methods, the constructor parameters, the
attributes its docstrings name). Everything else an implementation has is
its own business. Behaviour is observed through these names alone (return
values, exceptions, `is_cached`, what `free_unused` reclaims). The segment's
bytes, laid out as the seed documents (shmref.store.observe), are read by the
level seed-layout (a claim of its own); elsewhere read counts come only
from the store's own `shmref_read_count(address)` if it declares one
(READ_COUNT_HOOK) or a caller's explicit layout claim (Driver(layout=True)).

Capabilities are required (a module lacking one is refused, exit 2) or
optional (a property needing a missing one is reported `not run: missing
X`, never passed). docs/conformance.md carries `markdown()`'s table; a test
checks that it is current.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

# -- the layout (the seed's docstrings) ------------------------------------------------

SECRET_BYTES = 32  # [32-byte handle-signing secret][ring buffer chunks...]
HEADER_BYTES = 8  # [4-byte monotonic_id][4-byte chunk_size incl. header], little-endian
COUNT_BYTES = 4  # object: [4-byte reference_count][metadata][serialized data]


def object_size(serde: Any, value: Any) -> int:
    """The size `put` checks against `max_object_size` (markdown() says it)."""
    _data, data_bytes, _metadata, metadata_bytes = serde.serialize(value)
    return int(COUNT_BYTES + metadata_bytes + data_bytes)


# Optional hook (not a capability row): a writer storage method
# `shmref_read_count(address) -> int` (the count of the object put placed at
# `address`) lets the machines, replay and trace validation compare counts
# without the seed's layout; else they judge through the API alone.
READ_COUNT_HOOK = "shmref_read_count"
# Optional hooks of a ring in another process (shmref.process.ring): the ring
# calls its caller makes next, sent together (then those not made dropped);
# and of a free_buf predicate that frees by id alone: the ids it frees.
SEND_AHEAD_HOOK, DROP_AHEAD_HOOK = "shmref_send_ahead", "shmref_drop_ahead"
# ... and of a storage in another process: a function giving the calls its
# caller makes right after a step's last request, written behind that request
# (called as it is written); None: none after all
AFTER_NEXT_HOOK = "shmref_after_next"
FREE_IDS_HOOK = "shmref_free_ids"
# Optional hook of a ring in another process: its four positions in one call
# (what reading each of them gives; the replays observe them after every step).
POSITIONS_HOOK = "shmref_positions"
RING_POSITIONS = ("data_buffer_start", "data_buffer_end", "monotonic_id_start", "monotonic_id_end")


# -- the four classes ----------------------------------------------------------------------


@runtime_checkable
class Serde(Protocol):
    """`serde_class()` instances: what a storage stores and reads back."""

    def serialize(self, value: Any) -> tuple[Any, int, bytes, int]:
        """`value` as (data, data_bytes, metadata, md_bytes); data: bytes-like or a list of them."""

    def deserialize(self, data: memoryview) -> Any:
        """The value back from the ``[metadata][data]`` bytes that a read hands over."""


class Handle(Protocol):
    """What `storage.handle()` returns and `create_from_handle` takes. The
    oracle mostly copies it and sets `reader_lock` (readers get the lock); a
    writer made with the lock hands it on (readers attach with it as it is)."""

    max_object_size: int
    n_readers: int
    ring_buffer_handle: tuple[int, str]
    serde_class: type
    reader_lock: Any


class Ring(Protocol):
    """`SingleWriterShmRingBuffer(data_buffer_size, name=None, create=False)`."""

    is_writer: bool

    def handle(self) -> tuple[int, str]:
        """(data_buffer_size, name): what a reader's ring is constructed from."""

    def allocate_buf(self, size: int) -> tuple[int, int]:
        """Writer: a chunk for `size` data bytes, (address, monotonic_id); MemoryError if full."""

    def access_buf(
        self, address: int
    ) -> AbstractContextManager[tuple[memoryview, tuple[int, int]]]:
        """(data view, (id, size)) of the chunk at `address`, as the segment holds it now."""

    def free_buf(
        self, is_free_fn: Callable[[int, memoryview], bool], nbytes: int | None = None
    ) -> Iterable[int]:
        """Writer: reclaim the oldest chunks, while `is_free_fn(id, data view)` is true and
        fewer than `nbytes` bytes are reclaimed; the reclaimed ids, oldest first."""

    def clear(self) -> None:
        """Writer: forget every chunk."""

    def close(self) -> None:
        """Detach from the segment; the writer's close also removes it."""

    def get_auth_secret(self) -> bytes:
        """The bytes that sign handles: the same in the writer and in every reader."""

    def int2byte(self, integer: int) -> bytes:
        """`integer` as the layout's 4 little-endian signed bytes."""

    def byte2int(self, byte_data: bytes) -> int:
        """The int that `int2byte` encoded as `byte_data`."""


class Storage(Protocol):
    """`SingleWriterShmObjectStorage(max_object_size, n_readers, ring_buffer,
    serde_class=..., reader_lock=None)`."""

    is_writer: bool

    def put(self, key: str, value: Any) -> tuple[int, int]:
        """Writer: store `value` under a new `key`; the object's (address, monotonic_id)."""

    def get(
        self,
        address: int,
        monotonic_id: int,
        signature: list[int] | None = None,
        key: str | None = None,
    ) -> Any:
        """The object behind a handle. A reader passes the `signature` and `key` the writer
        issued; a chunk that no longer holds that object is a ValueError."""

    def get_cached(self, key: str) -> tuple[int, int]:
        """Writer: `key`'s (address, monotonic_id) handed out once more; each reader owes a read."""

    def is_cached(self, key: str) -> bool:
        """Writer: whether an object is stored under `key`."""

    def get_signature(self, key: str) -> list[int]:
        """Writer: the signature a reader passes to `get` with `key`'s current handle."""

    def touch(
        self, key: str, address: int = 0, monotonic_id: int = 0, signature: list[int] | None = None
    ) -> None:
        """Without the readers' lock (the writer): keep `key`'s object from eviction until
        `get_cached` or `release_touches`. With it: check the handle without reading."""

    def release_touches(self) -> None:
        """Writer: stop protecting the objects `touch` protected and nobody looked up."""

    def free_unused(self) -> None:
        """Writer: reclaim the oldest objects that every reader has read, to make room."""

    def clear(self) -> None:
        """Writer: forget every object; a reader's clear does nothing."""

    def close(self) -> None:
        """Close the storage's ring."""

    def handle(self) -> Handle:
        """What a reader process passes to `create_from_handle` to attach."""

    @staticmethod
    def create_from_handle(handle: Handle) -> Storage:
        """A reader storage on the writer's ring, built from the writer's `handle()`."""


# -- capabilities --------------------------------------------------------------------------


@dataclass(frozen=True)
class Capability:
    """One name the oracle uses: `where` is module, ring, storage (instance
    attributes and methods) or handle."""

    where: str
    name: str
    required: bool
    why: str

    @property
    def label(self) -> str:
        """How reports name it: `storage.put`, `ring.ID_MAX`, or a module name bare."""
        return self.name if self.where == "module" else f"{self.where}.{self.name}"


def _methods(proto: type) -> list[str]:
    return [
        n
        for n, v in vars(proto).items()
        if not n.startswith("_") and (inspect.isfunction(v) or isinstance(v, staticmethod))
    ]


def _attributes(proto: type) -> list[str]:
    return [n for n in getattr(proto, "__annotations__", {}) if not n.startswith("_")]


CAPABILITIES: tuple[Capability, ...] = (
    Capability(
        "module",
        "SingleWriterShmRingBuffer",
        True,
        "the ring class: `(data_buffer_size: int, name: str | None = None, create: bool = False)`",
    ),
    Capability(
        "module",
        "SingleWriterShmObjectStorage",
        True,
        "the storage class: "
        "`(max_object_size: int, n_readers: int, ring_buffer, serde_class=<its "
        "default>, reader_lock=None)`; readers come from `create_from_handle`",
    ),
    *(
        Capability("ring", n, True, "the seed's documented ring API")
        for n in (*_attributes(Ring), *_methods(Ring))
    ),
    *(
        Capability("storage", n, True, "the seed's documented storage API")
        for n in (*_attributes(Storage), *_methods(Storage))
    ),
    *(
        Capability("handle", n, True, "storage.handle() fields read by create_from_handle")
        for n in _attributes(Handle)
    ),
    *(Capability("serde", n, True, "handle.serde_class() instances") for n in _methods(Serde)),
    # optional: the seed has them; properties that need one say so when missing
    *(
        Capability(
            "ring",
            n,
            False,
            "the ring's position, named in the seed's docstring "
            "(Key Concepts); compared with the spec's variables",
        )
        for n in ("data_buffer_start", "data_buffer_end", "monotonic_id_start", "monotonic_id_end")
    ),
    Capability(
        "ring",
        "ID_MAX",
        False,
        "settable id bound (exclusive): small ids make wraparound reachable in tests",
    ),
    Capability(
        "storage",
        "ring_buffer",
        False,
        "the storage's ring (constructor argument): the fuzzer's reader-side ring calls",
    ),
    Capability(
        "storage",
        "verify_signature",
        False,
        "a reader's signature check, as a step of its own (a refusal there is "
        "`rejected`, after it `stale`: shmref.core.vocabulary)",
    ),
    Capability(
        "storage", "get_begin", False, "native split read (refimpl's), preferred when present"
    ),
    Capability("storage", "get_copy", False, "native split read"),
    Capability("storage", "get_end", False, "native split read"),
    Capability(
        "module",
        "SERDE_IN_PROCESS",
        False,
        "the serde runs in the store's process: a serde's failure reaches the store "
        "(implicit for a module; `exec:` lacks it; set: the roles that have it)",
    ),
)
REQUIRED = tuple(c for c in CAPABILITIES if c.required)
OPTIONAL = tuple(c for c in CAPABILITIES if not c.required)
SPLIT_READ_NATIVE = ("get_begin", "get_copy", "get_end")


class MissingCapability(Exception):
    """A property needs an optional capability the implementation lacks."""

    def __init__(self, label: str) -> None:
        super().__init__(f"not run: missing {label}")
        self.label = label


def has(obj: Any, name: str) -> bool:
    """Is `name` there, without triggering more than a getattr?"""
    try:
        getattr(obj, name)
    except Exception:  # a property that raises counts as missing
        return False
    return True


def split_read_missing(storage: Any) -> str | None:
    """None if reads can be split: natively, or (shmref.store.splitread) by
    holding the store's own `get` at its serde, which every store's `get`
    is given through the handle's `serde_class`; no bytes of the segment are
    read for it (what they mean is the store's layout). Only where the
    serde runs inside the store's read: a program's `get` has copied and
    counted before the oracle's serde sees its bytes, so holding that serde
    would cut the read after its end (`SERDE_IN_PROCESS` on the storage's
    class says so, as on a module)."""
    if all(has(storage, n) for n in SPLIT_READ_NATIVE):
        return None
    if not has(storage, "get"):
        return "storage.get_begin/get_copy/get_end or storage.get"
    return None if serde_in_process(storage, "reader") else "storage.get_begin/get_copy/get_end"


SERDE_IN_PROCESS = "SERDE_IN_PROCESS"
ROLES = frozenset({"writer", "reader"})


def serde_in_process(impl: Any, role: str) -> bool:
    """Does `role`'s serde ("writer": serialize at put; "reader": deserialize
    at a read) run in the store's process? Implicit for a module; the process
    proxy (and a mixed module with such a side) sets SERDE_IN_PROCESS to the
    roles that do."""
    return role in getattr(impl, SERDE_IN_PROCESS, ROLES)


def require_serde_in_process(impl: Any, role: str) -> None:
    """For a property that injects a serde's failure and judges what the
    store does with it: not run where the serde runs elsewhere."""
    if not serde_in_process(impl, role):
        raise MissingCapability(SERDE_IN_PROCESS)


BYTES_VALUES = "BYTES_VALUES"
OLD_PROTOCOL = (
    "bytes values (a program of protocol version 1 is sent none: docs/protocol.md, Versions)"
)


def require_bytes_values(obj: Any) -> None:
    """For a property that tells one bytes argument from another: not run
    where the transport drops their value. A program that speaks version 1
    of the process protocol is sent `{"unrepresentable": "bytes"}` without
    it, as that version specified; the proxy's classes say so
    (`BYTES_VALUES` false). Every module has it."""
    if not carries_bytes_values(obj):
        raise MissingCapability(OLD_PROTOCOL)


def carries_bytes_values(obj: Any) -> bool:
    """Does a bytes argument reach `obj` (a storage, or its class) with its
    value? False only for a program of protocol version 1."""
    return bool(getattr(obj, BYTES_VALUES, True))


def missing(impl: ModuleType, *, optional: bool = False) -> list[str]:
    """The contract's names that `impl` lacks (required ones; with
    `optional`, the optional ones). Instance attributes are looked up on a
    small ring and storage, created and closed here."""
    wanted = OPTIONAL if optional else REQUIRED
    lacking = [
        c.label
        for c in wanted
        if c.where == "module"
        and not (
            all(serde_in_process(impl, r) for r in ROLES)
            if c.name == SERDE_IN_PROCESS
            else has(impl, c.name)
        )
    ]
    ring_cls = getattr(impl, "SingleWriterShmRingBuffer", None)
    storage_cls = getattr(impl, "SingleWriterShmObjectStorage", None)
    if ring_cls is None or storage_cls is None:
        return lacking
    try:
        ring = ring_cls(1024, create=True)
    except Exception as exc:  # the message names it; no traceback
        return [
            *lacking,
            f"SingleWriterShmRingBuffer(1024, create=True) raised {type(exc).__name__}: {exc}",
        ]
    try:
        try:
            storage = storage_cls(256, 1, ring)
        except Exception as exc:
            return [
                *lacking,
                f"SingleWriterShmObjectStorage(256, 1, ring) raised {type(exc).__name__}: {exc}",
            ]
        handle = storage.handle() if has(storage, "handle") else None
        serde_cls = getattr(handle, "serde_class", None)
        serde = serde_cls() if isinstance(serde_cls, type) else None
        objects = {"ring": ring, "storage": storage, "handle": handle, "serde": serde}
        for cap in wanted:
            if cap.where != "module" and not has(objects[cap.where], cap.name):
                lacking.append(cap.label)
    finally:
        ring.close()
    return lacking


PROTOCOLS: dict[str, type] = {"ring": Ring, "storage": Storage, "handle": Handle, "serde": Serde}


def signature(cap: Capability) -> str:
    """`name(args) -> result` for a method of the protocols, `name: type` for
    an attribute, else the bare name."""
    proto = PROTOCOLS.get(cap.where)
    member = vars(proto).get(cap.name) if proto is not None else None
    if isinstance(member, staticmethod):
        member = member.__func__
    if inspect.isfunction(member):
        sig = inspect.signature(member)
        params = [p for p in sig.parameters.values() if p.name != "self"]
        text = str(sig.replace(parameters=params)).replace("'", "")
        return f"{cap.name}{text}"
    annotation = getattr(proto, "__annotations__", {}).get(cap.name)
    return f"{cap.name}: {annotation}" if annotation else cap.name


# -- messages ----------------------------------------------------------------------------

# Exceptions are judged by kind (state machines, replays, hazards, the
# protocol's replies), except in the properties that look for words of a
# refusal's message: these words, all of them (tests/oracle/test_contract_words.py
# holds the suite's `pytest.raises(..., match=...)` to this table).
REFUSAL_WORDS: dict[str, str] = {
    "Not enough space": "MemoryError: allocate_buf finds no room (the seed's words)",
    "already exists": "ValueError: put of a key already stored (the seed's)",
    "modified or is invalid": "ValueError: get of a handle whose chunk changed (the seed's)",
    "Lock must be provided": "ValueError: a reader storage without a lock (the seed's)",
    "exceeds max object size": "ValueError: put of an object over max_object_size (the seed's)",
    "no valid chunk": "ValueError: access_buf at an address where no chunk starts (hardened)",
    "only the writer": "ValueError: a writer-only call on a reader (hardened)",
    "closed": "ValueError: a call on a closed ring or storage (hardened)",
    "less than": "ValueError: attaching with a size larger than the segment (hardened)",
    "ids are live": "MemoryError: allocate_buf when every id is in use (hardened)",
    "past the 100-byte buffer": "ValueError: an address past the ring's buffer (hardened)",
    "integer": "ValueError: a size or address that is not an int (hardened)",
    "segment name": "ValueError: a ring name that is not a segment name (hardened)",
    "cannot store a (object|set|function)": "TypeError: put of a value the serde refuses",
    r"ints in \[-2\*\*63, 2\*\*64\)": "ValueError: put of an int msgpack cannot hold",
}


def markdown() -> str:
    """The contract as docs/conformance.md shows it (a test keeps them equal)."""
    from shmref.core import tables  # here: tabulate is shmref[oracle]'s, the contract is not

    need = {True: "yes", False: "optional"}
    rows = [(c.where, f"`{signature(c)}`", need[c.required], c.why) for c in CAPABILITIES]
    table = tables.markdown(("where", "name", "required", "why"), rows)
    layout = (
        f"Layout (the level seed-layout; read from the segment, never from attributes): "
        f"`[{SECRET_BYTES}-byte secret][chunks]`, chunk "
        f"`[4-byte id][4-byte size incl. the {HEADER_BYTES}-byte header][object]`, "
        f"object `[{COUNT_BYTES}-byte read count][serde metadata][serde data]`, "
        "integers little-endian and signed."
    )
    size = (
        f"Object size (every level): `put` measures an object as the {COUNT_BYTES}-byte "
        "read count + the data and metadata sizes `serde.serialize` returns "
        "(`shmref.contract.object_size`); exactly `max_object_size` is stored, "
        "one byte more is a `ValueError`, whatever the layout."
    )
    words = (
        "Messages: exceptions are judged by kind, except where a property looks for "
        "words of the message (a regular expression each): "
        + "; ".join(f"`{pattern}` ({why})" for pattern, why in REFUSAL_WORDS.items())
        + "."
    )
    return "\n".join([table, "", layout, "", size, "", words]) + "\n"


DOC_BEGIN = "<!-- contract: generated by shmref.contract.markdown(); do not edit -->"
DOC_END = "<!-- end of contract -->"
