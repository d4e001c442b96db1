"""The one table of shmref's vocabulary: every action and every outcome.

An action of the spec, a `Driver` method, a trace step (`last_action`), a
recording entry and a state-machine rule carry the same name (DESIGN.md).
`ACTIONS` says, per name, who performs it, the spec module that defines it,
its arguments as the spec names them (= the Driver method's parameters),
the other fields its trace record carries, and the outcomes the spec can
show. `OUTCOMES` maps each outcome name to an exception TYPE; `classify`
names what a step raised by its type and by the step it happened at, never
by the text of its message. Replay, the recorder, the state machine, the
hazard replay, trace validation, the ITF schema and the layout tests look
names up here. The lowest layer: it imports nothing of shmref (DESIGN.md's
tables and `python -m shmref vocabulary` are shmref/docgen/vocabulary_doc.py).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# -- outcomes ------------------------------------------------------------------------


class HandleRejected(ValueError):
    """The oracle's signature check of a read refused the handle: the
    implementation's `verify_signature` raised ValueError (a forged handle,
    or one signed with another storage's or an older secret). Raised by
    shmref.store.splitread, which runs that check as its own step before the read,
    so that any implementation's plain ValueError is told apart by where it
    happened."""


class InjectedCopyFailure(ValueError):
    """The oracle made this copy's deserialization fail (the spec's
    COPY_FAIL): shmref's own failure, raised by the serde it wraps."""


class TornCopy(ValueError):
    """A held read's copy ended in its serde's own exception: the store's
    `get` handed its serde bytes that did not decode and let the serde's
    exception out. Its checks did not refuse the read; the bytes did (a
    read of memory reused under it shows this way when the bytes happen not
    to decode). Raised by shmref.store.splitread, which sees where the
    exception came from; the store's own exception is its cause."""


@dataclass(frozen=True)
class Outcome:
    """One outcome name of traces and recordings and the exception type an
    implementation's step shows it by. `at` says at which steps the type
    means this outcome: "read" (a step with `reads`), "call" (any other
    step) or "any"."""

    name: str
    exception: type[BaseException] | None  # None: the step returned
    at: str
    meaning: str


# The order is the order `classify` tries them: the most specific type first.
OUTCOMES: tuple[Outcome, ...] = (
    Outcome("ok", None, "any", "the call returned"),
    Outcome(
        "DeserializeError",
        InjectedCopyFailure,
        "read",
        "the copy failed (the oracle's injected failure; the spec's COPY_FAIL)",
    ),
    Outcome(
        "rejected",
        HandleRejected,
        "read",
        "the handle's signature check refused it (the oracle runs "
        "`verify_signature` as its own step; its ValueError becomes this type)",
    ),
    Outcome(
        "torn",
        TornCopy,
        "read",
        "the copy's bytes did not decode: the serde's own exception came out of the "
        "store's read (no check of the store's refused it)",
    ),
    Outcome(
        "stale",
        ValueError,
        "read",
        "a ValueError after the signature check: the chunk's id is not the handle's",
    ),
    Outcome("MemoryError", MemoryError, "any", "no room (the ring, or ID_MAX live ids)"),
    Outcome("ValueError", ValueError, "call", "a refused argument (key present, object too large)"),
    Outcome("KeyError", KeyError, "any", "a key or id that is not there"),
)
# What a caller of the seed's API can catch: the documented exception kinds.
DOCUMENTED: tuple[type[BaseException], ...] = (ValueError, MemoryError, KeyError)


# -- actions -------------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """One action name. `arguments` are the Driver method's parameters and
    the trace fields of the call (spec names, units); `results` the other
    fields of its trace record; `driver` the Driver method (None: a step
    of the environment or inside one call, with nothing to call)."""

    name: str
    actor: str  # ring, writer, reader, environment
    spec: tuple[str, ...]  # the spec modules whose steps log this name; () = oracle only
    arguments: tuple[str, ...]
    results: tuple[str, ...]
    outcomes: tuple[str, ...]  # what the spec can show
    call: str  # the real call, for DESIGN.md
    driver: str | None = None
    reads: bool = False  # a step of a read: a ValueError is a refusal (stale)
    recorded: bool = False  # the recorder logs it (trace validation)
    places: bool = False  # returns the (address, id) of its chunk
    allocates: bool = False  # ... a chunk it has just allocated
    inject: tuple[tuple[str, str], ...] = ()  # outcome -> Driver keyword that causes it

    @property
    def fields(self) -> tuple[str, ...]:
        """Every field of its trace record besides name and outcome."""
        return self.arguments + self.results


def _row(
    name: str,
    actor: str,
    spec: str,
    arguments: str,
    results: str,
    outcomes: str,
    call: str,
    calls: bool = True,
    **flags: Any,
) -> Action:
    """One row of the table (lists of names are space-separated); an action
    that `calls` has the Driver method of its own name."""
    return Action(
        name,
        actor,
        tuple(spec.split()),
        tuple(arguments.split()),
        tuple(results.split()),
        tuple(outcomes.split()),
        call,
        driver=name if calls else None,
        **flags,
    )


_READ = "StorageReader.tla"
# fmt: off
ACTIONS: tuple[Action, ...] = (
    _row("init", "environment",
         "RingBuffer.tla StorageState.tla IndRing.tla IndStorage.tla", "", "", "ok",
         "the initial state (first state of every trace)", calls=False),
    _row("allocate_buf", "ring", "RingBuffer.tla", "size", "", "ok MemoryError",
         "`ring.allocate_buf(16*size - 8)`", places=True, allocates=True),
    _row("mark_free", "ring", "RingBuffer.tla", "id", "", "ok",
         "environment: the chunk's `is_free_fn` starts answering True"),
    _row("free_buf", "ring", "RingBuffer.tla", "nbytes", "freed", "ok",
         "`ring.free_buf(lambda id, buf: id in marked, 16*nbytes)`"),
    _row("clear", "writer", "RingBuffer.tla StorageClear.tla", "", "", "ok",
         "`storage.clear()` (ring model: `ring.clear()`)", recorded=True),
    _row("put", "writer", "MCRingBytes.tla StorageWriter.tla", "key size", "handle",
         "ok ValueError MemoryError", "`storage.put(key, value)`; issues a handle to every reader",
         recorded=True, places=True, allocates=True),
    _row("get_cached", "writer", "StorageWriter.tla", "key", "handle", "ok",
         "`storage.get_cached(key)` + `get_signature`; issues the handle again",
         recorded=True, places=True),
    _row("touch", "writer", "StorageWriter.tla", "key", "", "ok",
         "`storage.touch(key)` (writer side)", recorded=True),
    _row("release_touches", "writer", "StorageWriter.tla", "", "", "ok",
         "`storage.release_touches()`", recorded=True),
    _row("free_unused", "writer", "StorageWriter.tla", "", "freed", "ok KeyError",
         "`storage.free_unused()`", recorded=True),
    _row("get_begin", "reader", _READ, "reader handle", "", "ok rejected stale",
         "`verify_signature` (refused: rejected), then open the chunk and check its id "
         "(refused: stale)", reads=True, recorded=True),
    _row("get_copy", "reader", _READ, "reader", "", "ok DeserializeError",
         "deserialize the payload (`fail=True`: the oracle's injected failure)",
         reads=True, recorded=True, inject=(("DeserializeError", "fail"),)),
    _row("get_end", "reader", _READ, "reader", "handle value", "ok stale DeserializeError",
         "increment the chunk's count under the reader lock, return the value",
         reads=True, recorded=True),
    _row("get_check", "reader", _READ, "reader", "handle", "ok",
         "spec only (`SPLIT_END`): get_end's re-check as its own step; one call cannot "
         "be stopped inside, so nothing is called", calls=False, reads=True),
    _row("drop_delivery", "environment", _READ, "reader handle", "", "ok",
         "a delivery that will never be read (request aborted); no call", calls=False),
    _row("reader_touch", "reader", "", "reader handle", "", "ok rejected stale",
         "a reader's `storage.touch(key, address, id, signature)`: validates, counts nothing",
         reads=True),
    _row("writer_get", "writer", "", "handle", "", "ok stale",
         "`storage.get(address, id)` on the writer: no signature, not counted", reads=True),
    _row("get_begin_foreign", "reader", "", "reader handle", "", "ok rejected stale",
         "get_begin of a handle signed with another storage's secret", reads=True),
)
# fmt: on

_BY_NAME = {a.name: a for a in ACTIONS}
_OUTCOME_BY_NAME = {o.name: o for o in OUTCOMES}


class UnknownAction(ValueError):
    """A name that is no action of the vocabulary."""


def action(name: str) -> Action:
    """The action called `name` (one clear message if there is none)."""
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise UnknownAction(
            f"{name!r} is no action of shmref's vocabulary (known: {', '.join(_BY_NAME)})"
        ) from None


def spec_actions() -> tuple[Action, ...]:
    """The actions a TLC trace of the spec can log, in table order."""
    return tuple(a for a in ACTIONS if a.spec)


def recorded_actions() -> tuple[Action, ...]:
    return tuple(a for a in ACTIONS if a.recorded)


def outcome_type(name: str) -> type[BaseException] | None:
    """The exception type an outcome name stands for (None: "ok")."""
    if name not in _OUTCOME_BY_NAME:
        raise ValueError(f"{name!r} is no outcome (known: {', '.join(_OUTCOME_BY_NAME)})")
    return _OUTCOME_BY_NAME[name].exception


def exception_named(name: str) -> type[BaseException] | None:
    """The exception type of the table whose class name is `name` (how a
    reader process reports what it raised), or None."""
    for outcome in OUTCOMES:
        if outcome.exception is not None and outcome.exception.__name__ == name:
            return outcome.exception
    return None


def classify(name: str, exc: BaseException) -> str:
    """The outcome of action `name` that raised `exc`: by the exception's
    type and the kind of step (a read or another call), never its text.
    An exception of no outcome's type is named by its class (`undocumented`)."""
    at = "read" if action(name).reads else "call"
    for outcome in OUTCOMES:
        if (
            outcome.exception is not None
            and outcome.at in ("any", at)
            and isinstance(exc, outcome.exception)
        ):
            return outcome.name
    return undocumented(exc)


_CLASS_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\Z", re.ASCII)


def undocumented(exc: BaseException) -> str:
    """The outcome name of an exception of no outcome's type (one the
    contract does not document): its class name, which no spec action
    shows, so a recording that holds it is rejected at that step. A class
    whose name is an outcome's (a store's own `DeserializeError`) is named
    with its module, never taken for that outcome."""
    cls = type(exc)
    if cls.__name__ in _OUTCOME_BY_NAME:
        module = ".".join(re.sub(r"\W", "_", p, flags=re.ASCII) for p in cls.__module__.split("."))
        return f"{module}.{cls.__name__}"
    return cls.__name__


def is_undocumented(name: object) -> bool:
    """Whether `name` can be what `undocumented` gives: a (dotted) class
    name that is no outcome of the table."""
    return isinstance(name, str) and name not in _OUTCOME_BY_NAME and bool(_CLASS_NAME.match(name))


def documented_kind(exc: BaseException) -> str:
    """What a caller of the seed's API can catch: the documented class
    `exc` is an instance of, else its own class name."""
    for cls in DOCUMENTED:
        if isinstance(exc, cls):
            return cls.__name__
    return type(exc).__name__


# -- checks of the table -------------------------------------------------------------

_NAME = re.compile(r'\bname\s*\|->\s*"([A-Za-z_][A-Za-z0-9_]*)"')
_COMMENT = re.compile(r"\(\*.*?\*\)|\\\*[^\n]*", re.DOTALL)


def names_in_spec(spec_dir: Path) -> dict[str, set[str]]:
    """Every `name |-> "x"` of a `last_action` record in the .tla files
    (comments left out): action name -> the modules that log it."""
    found: dict[str, set[str]] = {}
    for path in sorted(spec_dir.glob("*.tla")):
        text = _COMMENT.sub("", path.read_text())
        for match in _NAME.finditer(text):
            found.setdefault(match.group(1), set()).add(path.name)
    return found


def spec_problems(spec_dir: Path, actions: Sequence[Action] = ACTIONS) -> list[str]:
    """Where the table and the spec's modules disagree: an action the spec
    logs that the table lacks, or a module the table names that does not
    log the action."""
    found = names_in_spec(spec_dir)
    table = {a.name: a for a in actions}
    problems = []
    for name, modules in sorted(found.items()):
        if name not in table:
            problems.append(
                f"spec action {name!r} ({', '.join(sorted(modules))}) is not in the vocabulary"
            )
        elif set(table[name].spec) != modules:
            problems.append(
                f"action {name!r}: the vocabulary says {sorted(table[name].spec)}, "
                f"the spec logs it in {sorted(modules)}"
            )
    for a in actions:
        if a.spec and a.name not in found:
            problems.append(f"action {a.name!r}: no spec module logs it (the vocabulary says so)")
    return problems


def driver_problems(driver: type, actions: Iterable[Action] = ACTIONS) -> list[str]:
    """Actions whose Driver method is missing or whose parameters are not
    the action's arguments (plus its injection keywords)."""
    problems = []
    for a in actions:
        if a.driver is None:
            continue
        method = getattr(driver, a.driver, None)
        if not callable(method):
            problems.append(f"action {a.name!r}: {driver.__name__}.{a.driver} does not exist")
            continue
        params = tuple(p for p in inspect.signature(method).parameters if p != "self")
        wanted = a.arguments + tuple(keyword for _outcome, keyword in a.inject)
        if params != wanted:
            problems.append(
                f"action {a.name!r}: {driver.__name__}.{a.driver}{params} takes "
                f"{params}, the vocabulary says {wanted}"
            )
    return problems


def table_problems(actions: Sequence[Action] = ACTIONS) -> list[str]:
    """The table's own consistency: unique names, known outcomes and actors."""
    problems = []
    seen: set[str] = set()
    for a in actions:
        if a.name in seen:
            problems.append(f"action {a.name!r} is in the table twice")
        seen.add(a.name)
        if a.actor not in ("ring", "writer", "reader", "environment"):
            problems.append(f"action {a.name!r}: unknown actor {a.actor!r}")
        for name in (*a.outcomes, *(o for o, _k in a.inject)):
            if name not in _OUTCOME_BY_NAME:
                problems.append(f"action {a.name!r}: unknown outcome {name!r}")
    return problems
