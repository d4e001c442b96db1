"""The data files behind the generated documents (docs/findings.toml,
docs/coverage.toml, the oracle's JSON report or snapshot): read and parsed,
every problem one line that names the file."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any


def load_data(path: Path, error: type[Exception], what: str) -> Any:
    """`path` parsed as TOML (`.toml`) or JSON; raise `error` if it is
    missing or does not parse."""
    toml = path.suffix == ".toml"
    try:
        text = path.read_text(encoding="utf-8")
        return tomllib.loads(text) if toml else json.loads(text)
    except FileNotFoundError as exc:
        raise error(f"{what} not found: {path}") from exc
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise error(f"{path}: not valid {'TOML' if toml else 'JSON'}: {exc}") from exc


def load_entries(path: Path, table: str, error: type[Exception], what: str) -> list[Any]:
    """The `[[table]]` entries of the TOML file `path` (not yet checked one
    by one); raise `error` if it is missing, not TOML or has no such entries."""
    entries = load_data(path, error, what).get(table)
    if not isinstance(entries, list) or not entries:
        raise error(f"{path}: no [[{table}]] entries")
    return entries
