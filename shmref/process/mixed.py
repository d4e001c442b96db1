"""Mixed deployments (`--writer IMPL --readers IMPL`): one implementation's
writer and another's readers on one segment, as vLLM's Rust frontend writes
for its Python workers.

The composed module's ring and storage classes are the writer side's; its
storage's `create_from_handle` is the readers side's. It is named
`mixed:["WRITER", "READERS"]` (JSON), a name `load_impl` builds again in a
reader's own process.
"""

from __future__ import annotations

import json
import shlex
from types import ModuleType
from typing import Any

from shmref import contract
from shmref.process import MIXED_PREFIX, PROGRAM_PREFIX, is_program

PREFIX = MIXED_PREFIX
_COMPOSED: dict[str, ModuleType] = {}


class BadCombination(ValueError):
    """A writer and readers that cannot be judged together (one line)."""


def mixed_name(writer: str, readers: str) -> str:
    return PREFIX + json.dumps([writer, readers])


def sides(name: str) -> tuple[str, str]:
    try:
        writer, readers = json.loads(name[len(PREFIX) :])
    except (ValueError, TypeError) as exc:
        raise BadCombination(f'{name!r}: not mixed:["WRITER", "READERS"]') from exc
    return str(writer), str(readers)


def roles(module: ModuleType) -> frozenset[str]:
    """What a side offers: a program's announced roles, a module both."""
    program = getattr(module, "PROGRAM", None)
    return program.roles if program is not None else frozenset({"writer", "reader"})


def compose(name: str, writer: ModuleType, readers: ModuleType) -> ModuleType:
    """The module whose writer is `writer`'s and whose readers are `readers`'."""
    if name in _COMPOSED:
        return _COMPOSED[name]
    w_name, r_name = sides(name)
    if "writer" not in roles(writer):
        raise BadCombination(f"--writer {shlex.quote(w_name)}: the program offers no writer role")
    if "reader" not in roles(readers):
        raise BadCombination(f"--readers {shlex.quote(r_name)}: the program offers no reader role")
    storage_cls: Any = writer.SingleWriterShmObjectStorage
    reader_cls: Any = readers.SingleWriterShmObjectStorage

    def create_from_handle(handle: Any) -> Any:
        return reader_cls.create_from_handle(handle)

    composed = type(
        "SingleWriterShmObjectStorage",
        (storage_cls,),
        {
            "create_from_handle": staticmethod(create_from_handle),
            "__module__": storage_cls.__module__,
        },
    )
    module = ModuleType(name, f"the writer of {w_name} with the readers of {r_name}")
    for attr, value in vars(writer).items():
        if not attr.startswith("__"):
            setattr(module, attr, value)
    module.SingleWriterShmObjectStorage = composed  # type: ignore[attr-defined]
    module.SERDE_IN_PROCESS = frozenset(  # type: ignore[attr-defined]
        role
        for role, side in (("writer", writer), ("reader", readers))
        if contract.serde_in_process(side, role)
    )
    module.WRITER, module.READERS = writer, readers  # type: ignore[attr-defined]
    _COMPOSED[name] = module
    return module


def spec_lock(spec: str) -> str:
    """How a side named on the command line locks its readers: "python" for
    a module; for a program, its hello's reader_lock (the program is
    started to say hello, then closed)."""
    if not is_program(spec):
        return "python"
    from shmref.process.channel import Program

    program = Program(shlex.split(spec[len(PROGRAM_PREFIX) :]), spec)
    try:
        return str(program.reader_lock)
    finally:
        program.close()


def pairs_line(w_name: str, r_name: str, w_lock: str, r_lock: str) -> str:
    """The one line a mixed run prints: which pairs on one segment it can judge."""
    judged = f"writer {w_name} with readers {r_name}"
    if r_lock == "own" and w_lock != "own":
        return (
            f'mixed run: {judged}: the readers lock by themselves (reader_lock "own"), '
            f"not with the Python lock the writer and the seed's readers share: judged alone "
            f"beside the writer, not beside Python readers"
        )
    if w_lock == "own" and r_lock != "own":
        return (
            f'mixed run: {judged}: the writer\'s program locks by itself (reader_lock "own"), '
            f"the readers with the handle's Python lock: judged where the writer holds no lock"
        )
    return f"mixed run: {judged}: the readers share the writer's reader lock: every pair judged"
