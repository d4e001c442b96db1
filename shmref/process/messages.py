"""What crosses the process protocol (docs/protocol.md), on the oracle's
side: the capabilities a hello may name, arguments as JSON carries them,
bytes as base64, a reply's error as an exception, and the failures of a
program (each one line, with the status the report gives it)."""

from __future__ import annotations

import base64
import builtins
import json
import math
from typing import Any

from shmref.contract import RING_POSITIONS
from shmref.process import PROTOCOL_VERSION, VERSIONS, VERSIONS_PAGE

CAPABILITIES = (
    "storage.get_begin",
    "storage.get_copy",
    "storage.get_end",
    "ring.data_buffer_start",
    "ring.data_buffer_end",
    "ring.monotonic_id_start",
    "ring.monotonic_id_end",
    "ring.ID_MAX",
    "ring.allocate_buf",
    "ring.access_buf",
    "ring.free_buf",
    "ring.int2byte",
    "ring.byte2int",
    "ring.get_auth_secret",
    "storage.RECLAIM_EXTRA",
    "bench",  # the bench request: a put+get loop at the program's own pace (not the contract's)
    "reply.ring_state",
    "request.pipeline",
    "request.free_ids",
)
# Capabilities of the protocol, not of the contract (docs/protocol.md,
# Capabilities): each reply to a request on a ring or a storage carries its
# ring's state; requests may come before the replies to earlier ones; a
# free_buf may come with the ids its predicate frees, and ask nothing.
REPLY_RING_STATE = "reply.ring_state"
REQUEST_PIPELINE = "request.pipeline"
REQUEST_FREE_IDS = "request.free_ids"
# the three together: a program that cannot carry its rings' states offers none
# of them (request.pipeline's replies must carry it; the rest are the protocol's)
ROUND_TRIPS = (REPLY_RING_STATE, REQUEST_PIPELINE, REQUEST_FREE_IDS)
POSITIONS = tuple(f"ring.{n}" for n in RING_POSITIONS)


class ProgramFailure(Exception):
    """The program died, hung or broke the protocol: `status` is the
    report's (CRASH, TIMEOUT, ERROR), the message one line."""

    status = "ERROR"


class ProgramCrashed(ProgramFailure):
    status = "CRASH"


class ProgramTimeout(ProgramFailure):
    status = "TIMEOUT"


class ProtocolError(ProgramFailure):
    status = "ERROR"


# One encoder for every line the oracle writes: json.dumps with an option
# builds an encoder per call, a third of a short request's encoding.
_LINE = json.JSONEncoder(allow_nan=False)


def line_of(message: dict[str, Any]) -> str:
    """A message as one line of the protocol (JSON has no NaN or infinity)."""
    return _LINE.encode(message) + "\n"


def short(line: bytes | bytearray | str, limit: int = 200) -> str:
    text = line if isinstance(line, str) else line.decode("utf-8", "replace")
    text = text.rstrip("\n")
    return repr(text if len(text) <= limit else text[:limit] + "...")


# -- values --------------------------------------------------------------------------------


def encode(value: Any) -> Any:
    """A caller's argument as JSON carries it; anything else is
    {"unrepresentable": its type name} (the program refuses it), with its
    bytes in "base64" for bytes and bytearray: a store that takes any
    hashable key, as the seed does, tells b"a" from b"b" as in process."""
    if type(value) in (bytes, bytearray):
        return {"unrepresentable": type(value).__name__, "base64": b64(value)}
    if value is None or type(value) in (bool, int):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else {"unrepresentable": "float"}
    if type(value) is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return {"unrepresentable": "str"}
        return value
    if type(value) in (list, tuple):
        return [encode(v) for v in value]
    return {"unrepresentable": type(value).__name__}


def encoded_calls(calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """Calls (op, keyword arguments) as their requests carry them (`encode`)."""
    return [(op, {k: encode(v) for k, v in kwargs.items()}) for op, kwargs in calls]


def as_version(value: Any, version: int) -> Any:
    """A message (or a value in it) as protocol `version` specified it: before
    version 2, an unrepresentable bytes argument carries no "base64"."""
    if version >= 2:
        return value
    if isinstance(value, dict):
        if "unrepresentable" in value:
            return {"unrepresentable": value["unrepresentable"]}
        return {k: as_version(v, version) for k, v in value.items()}
    if isinstance(value, list):
        return [as_version(v, version) for v in value]
    return value


def b64(data: Any) -> str:
    return base64.b64encode(bytes(data)).decode("ascii")


def unb64(text: Any, what: str) -> bytes:
    if not isinstance(text, str):
        raise ProtocolError(f"{what} is not a base64 string: {short(json.dumps(text))}")
    try:
        return base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise ProtocolError(f"{what} is not base64: {short(text)}") from exc


_KINDS: dict[str, type[BaseException]] = {}


def error_from(error: dict[str, Any]) -> BaseException:
    """The exception a reply's error names: a builtin of that name, else a
    class of that name (outcomes are compared by type name)."""
    kind, message = error["kind"], error["message"]
    cls = getattr(builtins, kind, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = _KINDS.setdefault(kind, type(kind, (Exception,), {"__module__": "builtins"}))
    return cls(message)


def hello_problem(hello: dict[str, Any]) -> str:
    """What is wrong with a hello (empty: nothing)."""
    if hello.get("type") != "hello":
        return "the first line must be the hello"
    version = hello.get("protocol")
    if type(version) is not int or version not in VERSIONS:
        said = f"protocol {version!r}" if "protocol" in hello else "no protocol version"
        return (
            f"{said}: say the version the program speaks, 1 to {PROTOCOL_VERSION} "
            f"(version {PROTOCOL_VERSION}: {VERSIONS[PROTOCOL_VERSION]}; {VERSIONS_PAGE})"
        )
    roles, caps = hello.get("roles"), hello.get("capabilities")
    if not isinstance(roles, list) or not roles or not set(roles) <= {"writer", "reader"}:
        return "roles must be a non-empty list of 'writer', 'reader'"
    if not isinstance(caps, list) or not set(caps) <= set(CAPABILITIES):
        unknown = sorted(set(caps) - set(CAPABILITIES)) if isinstance(caps, list) else caps
        return f"unknown capabilities {unknown}"
    if REPLY_RING_STATE in caps and not set(POSITIONS) <= set(caps):
        lacking = [c for c in POSITIONS if c not in caps]
        return f"{REPLY_RING_STATE} needs the ring's positions ({', '.join(lacking)} missing)"
    if REQUEST_PIPELINE in caps and REPLY_RING_STATE not in caps:
        return f"{REQUEST_PIPELINE} needs {REPLY_RING_STATE} (the ring's state in each reply)"
    if hello.get("reader_lock") not in ("oracle", "own"):
        return "reader_lock must be 'oracle' or 'own'"
    if not isinstance(hello.get("name"), str):
        return "name must be a string"
    extra = set(hello) - {"type", "protocol", "name", "roles", "capabilities", "reader_lock"}
    return f"unknown fields {sorted(extra)}" if extra else ""
