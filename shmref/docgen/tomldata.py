"""The data files behind the generated documents (docs/findings.toml,
docs/coverage.toml): read as TOML, each an array of tables, and every
problem one line that names the file."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any


def load_entries(path: Path, table: str, error: type[Exception], what: str) -> list[Any]:
    """The `[[table]]` entries of `path` (not yet checked one by one); raise
    `error` if the file is missing, is not TOML or has no such entries."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise error(f"{what} not found: {path}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML: {exc}") from exc
    entries = data.get(table)
    if not isinstance(entries, list) or not entries:
        raise error(f"{path}: no [[{table}]] entries")
    return entries
