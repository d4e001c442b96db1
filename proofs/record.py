"""The record of `python -m proofs` at its full budgets, kept in
`proofs/record.json` and bound to what the proofs read.

CrossHair's searches that cannot finish ("no counterexample in 20 s") and
`diffbehavior` spend their whole budget whatever they find: on the same
files they find the same nothing, so spending it again on every CI run adds
no evidence. `make proofs` writes the record when the run passes; CI checks
that the record is of these files and says the run passed (`--check-record`),
and runs the command itself at its quick budgets. A change to any file the
proofs read makes the record stale, and CI fails until `make proofs` is run
again: the shape of the shipped TLC output (shmref.traces.shipped).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "proofs" / "record.json"
SCHEMA = 1
REMAKE = "make proofs"


def inputs(root: Path = ROOT) -> list[Path]:
    """What the proofs read: the allocator and every module of proofs/."""
    return [root / "refimpl" / "allocator.py", *sorted((root / "proofs").glob("*.py"))]


def digests(root: Path = ROOT) -> dict[str, str]:
    """Each input's SHA-256, by its path from `root`."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in inputs(root)
    }


def seed_digest(seed: Path | None) -> str | None:
    """The seed text's SHA-256 (None: no seed file, the differential skipped)."""
    if seed is None or not seed.is_file():
        return None
    return hashlib.sha256(seed.read_bytes()).hexdigest()


def crosshair_version() -> str:
    try:
        return importlib.metadata.version("crosshair-tool")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def write(summary: list[str], budgets: dict[str, float], seed: Path | None) -> Path:
    """The record of a full run that passed, with the differential run (seed present)."""
    data: dict[str, Any] = {
        "schema": SCHEMA,
        "about": f"python -m proofs at its full budgets passed on these files; {REMAKE} writes it",
        "made": time.strftime("%Y-%m-%d"),
        "crosshair": crosshair_version(),  # said, not compared: the files are what is bound
        "budgets": budgets,
        "seed_sha256": seed_digest(seed),
        "inputs": digests(),
        "summary": summary,
    }
    RECORD.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return RECORD


def problem(seed: Path | None, root: Path = ROOT, record: Path = RECORD) -> str:
    """Why the record does not stand for the files under `root` ("": it does)."""
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"{record} cannot be read ({exc}): run `{REMAKE}`"
    if data.get("schema") != SCHEMA:
        return f"{record} is of another schema: run `{REMAKE}`"
    if data.get("seed_sha256") is None:
        return f"{record} was made without the seed (no differential): run `{REMAKE}` with it"
    now, then = digests(root), data["inputs"]
    changed = sorted(name for name in now.keys() | then.keys() if now.get(name) != then.get(name))
    if changed:
        return f"{record} is stale: {', '.join(changed)} changed since; run `{REMAKE}`"
    current = seed_digest(seed)
    if current is not None and current != data["seed_sha256"]:
        return f"{record} is of another seed text than {seed}: run `{REMAKE}`"
    return ""
