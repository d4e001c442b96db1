"""Stores in any language: the process protocol (docs/protocol.md, its JSON
Schema `schema.json`), the proxy that implements the contract's Python API
over it (`exec:PROGRAM`), a reference program wrapping refimpl, and mixed
deployments (one implementation's writer, another's readers)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

SCHEMA_PATH = Path(str(resources.files(__name__) / "schema.json"))
PROTOCOL_VERSION = 1
