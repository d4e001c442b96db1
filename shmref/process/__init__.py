"""Stores in any language: the process protocol (docs/protocol.md, its JSON
Schema `schema.json`), the proxy that implements the contract's Python API
over it (`exec:PROGRAM`), a reference program wrapping refimpl, and mixed
deployments (one implementation's writer, another's readers)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

SCHEMA_PATH = Path(str(resources.files(__name__) / "schema.json"))
PROTOCOL_VERSION = 2  # the current version; a program says the one it speaks in its hello
# Every version the oracle speaks, and what a program of the version before
# must change to speak it (docs/protocol.md, "Versions"): a program is judged
# as the version it says specified, and told in one line what changed since.
VERSIONS: dict[int, str] = {
    1: "the first version (2026-12-05)",
    2: (
        'a bytes or bytearray argument arrives as {"unrepresentable": "bytes", "base64": ...}'
        " with its value: a store that keeps any key compares that value (2026-12-06)"
    ),
}
VERSIONS_PAGE = 'docs/protocol.md, "Versions"'
PROGRAM_PREFIX = "exec:"  # `exec:PROGRAM`: a store program behind the protocol (proxy.py)
MIXED_PREFIX = "mixed:"  # `mixed:["WRITER", "READERS"]`: one's writer, another's readers (mixed.py)


def is_program(spec: str) -> bool:
    """`spec` names a store program (its own processes) rather than a Python module."""
    return spec.startswith(PROGRAM_PREFIX)


def has_programs(spec: str) -> bool:
    """`spec` may start store programs: a program, or a mixed deployment."""
    return spec.startswith((PROGRAM_PREFIX, MIXED_PREFIX))


def older_version_note(spec: str, version: int) -> str:
    """One line for a program that speaks an older version than the current:
    how it is judged, and what changed since (each version's change)."""
    changed = "; ".join(
        f"version {v}: {VERSIONS[v]}" for v in sorted(VERSIONS) if version < v <= PROTOCOL_VERSION
    )
    return (
        f"{spec}: speaks protocol version {version}, judged as version {version} specified "
        f"(the current is {PROTOCOL_VERSION}; {changed}; {VERSIONS_PAGE})"
    )
