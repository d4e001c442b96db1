"""Stores in any language: the process protocol (docs/protocol.md, its JSON
Schema `schema.json`), the proxy that implements the contract's Python API
over it (`exec:PROGRAM`), a reference program wrapping refimpl, and mixed
deployments (one implementation's writer, another's readers)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

SCHEMA_PATH = Path(str(resources.files(__name__) / "schema.json"))
PROTOCOL_VERSION = 1
PROGRAM_PREFIX = "exec:"  # `exec:PROGRAM`: a store program behind the protocol (proxy.py)
MIXED_PREFIX = "mixed:"  # `mixed:["WRITER", "READERS"]`: one's writer, another's readers (mixed.py)


def is_program(spec: str) -> bool:
    """`spec` names a store program (its own processes) rather than a Python module."""
    return spec.startswith(PROGRAM_PREFIX)


def has_programs(spec: str) -> bool:
    """`spec` may start store programs: a program, or a mixed deployment."""
    return spec.startswith((PROGRAM_PREFIX, MIXED_PREFIX))
