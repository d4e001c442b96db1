"""Which vLLM the summary of FINDINGS.md describes: the `vllm-project/vllm`
commits its vLLM columns were read at, and what is known of the version the
seed matches (the `[versions]` table of docs/findings.toml). Shown above the
table and in its headers, so that no column compares with a "current"
upstream that has moved on since."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from shmref.docgen.datafiles import load_data
from shmref.docgen.oracle_snapshot import FindingsError

COMMITS = ("code_path", "upstream")
KEYS = ("code_path", "code_path_note", "upstream", "upstream_note", "seed_note")


@dataclass(frozen=True)
class Versions:
    code_path: str  # the commit of the callers' files the "vLLM code path" column names
    code_path_note: str
    upstream: str  # the commit of shm_object_storage.py the "vLLM upstream" column compares with
    upstream_note: str
    seed_note: str  # what is known of the upstream version the seed is


def load_versions(path: Path) -> Versions:
    """The `[versions]` table of `path`; FindingsError naming what is wrong."""
    raw = load_data(path, FindingsError, "findings data").get("versions")
    if not isinstance(raw, dict):
        raise FindingsError(f"{path}: no [versions] table (the vLLM commits the columns describe)")
    missing = [k for k in KEYS if k not in raw]
    unknown = sorted(set(raw) - set(KEYS))
    if missing or unknown:
        raise FindingsError(
            f"{path}: [versions]: missing {missing or 'nothing'}, unknown {unknown or 'none'}"
        )
    for key in KEYS:
        value = raw[key]
        if not isinstance(value, str) or not value.strip():
            raise FindingsError(f"{path}: [versions] {key} must be a non-empty string")
        if key in COMMITS and not re.fullmatch(r"[0-9a-f]{40}", value):
            raise FindingsError(
                f"{path}: [versions] {key} must be a full vllm-project/vllm commit "
                f"(40 hex digits), not {value!r}"
            )
    return Versions(**raw)


def header(column: str, commit: str, which: str = "") -> str:
    """A column's header with the commit it describes (of `which` file, if the
    column reads several: the others are in the lines above the table)."""
    if which:
        return f"{column} ({which} at `{commit[:7]}`, others above)"
    return f"{column} at `{commit[:7]}`"


def notes(versions: Versions) -> str:
    """The lines above the summary table: each vLLM column's commit, and the seed's version."""
    return "\n".join(
        [
            "The vLLM columns describe these versions of `vllm-project/vllm`:",
            "",
            f"- **vLLM code path** at `{versions.code_path}`: {versions.code_path_note}",
            f"- **vLLM upstream** at `{versions.upstream}`: {versions.upstream_note}",
            f"- **The seed**: {versions.seed_note}",
        ]
    )
