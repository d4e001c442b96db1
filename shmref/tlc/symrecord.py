"""The symmetry checks of every model whose cfg names a SYMMETRY
(shmref.tlc.symmetry), run once per change of what they read and kept in
`spec/symmetry.json`.

Each check dumps the whole state graph of a small instance with TLC and maps
every state and step through every transposition of the permuted values:
the same files give the same graph and the same answer, so running the
eleven of them on every CI run (about 130 CPU seconds) adds no evidence.
`make symmetry` runs them and writes the record when every graph is closed;
CI checks that the record is of these files (`--check`: the spec, its
models' manifest and the checker's own modules, by SHA-256), which a change
to any of them makes stale until `make symmetry` runs again, and CI still
runs the checks that must fail: an asymmetric spec, a graph with a missing
step, a permuted name written as a string (tests/spec/test_symmetry.py).
The shape of proofs/record.json and of the shipped TLC output.

    python -m shmref.tlc.symrecord --write [--only MODEL]   # make symmetry
    python -m shmref.tlc.symrecord --check                  # CI
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shmref.core.paths import SPEC_DIR
from shmref.tlc import manifest, symmetry
from shmref.tlc.tlavalues import TlcError

RECORD_NAME = "symmetry.json"
SCHEMA = 1
REMAKE = "make symmetry"
# The checker's modules (shmref.tlc.symmetry and what it imports): a change
# to how the graph is dumped, read or mapped makes the record stale too.
CHECKER = ("symmetry", "graph", "runner", "tlavalues", "java", "toolout", "result")
# Smaller bounds where MaxIssues <= 2 alone leaves too big a graph (re-reads
# without A1: over a million states; one issuance there, re-read up to the
# CountBound, takes 5 minutes at two); both keys and both readers stay.
BOUNDS = {"MCDoubleReadFixed": {"N": "2", "MAX_OBJ": "1", "Sizes": "{1}", "MaxIssues": "1"}}


def symmetric_models(spec_dir: Path = SPEC_DIR) -> list[str]:
    """The manifest's models (not the deep ones) whose cfg names a SYMMETRY."""
    models = manifest.load_manifest(spec_dir / "models.toml").models
    return sorted(
        m.name
        for m in models
        if not m.deep and symmetry.symmetry_of((spec_dir / m.cfg_file).read_text())
    )


def check(name: str, spec_dir: Path = SPEC_DIR) -> symmetry.SymmetryReport:
    """One model's check, on `spec_dir` (a copy, in the tests that break it)."""
    model = {m.name: m for m in manifest.load_manifest(spec_dir / "models.toml").models}[name]
    return symmetry.check_symmetry(
        name,
        spec_dir,
        spec_dir / model.tla_file,
        spec_dir / model.cfg_file,
        bounds=BOUNDS.get(name),
    )


def inputs(spec_dir: Path = SPEC_DIR) -> list[Path]:
    """What the checks read: the spec's modules and cfgs, the manifest, the checker."""
    here = Path(__file__).resolve().parent
    return [
        *sorted(spec_dir.glob("*.tla")),
        *sorted(spec_dir.glob("*.cfg")),
        spec_dir / "models.toml",
        *(here / f"{module}.py" for module in (*CHECKER, "symrecord")),
    ]


def digests(spec_dir: Path = SPEC_DIR) -> dict[str, str]:
    """Each input's SHA-256, by its folder and name (spec/X.tla, tlc/graph.py)."""
    return {
        f"{path.parent.name}/{path.name}": hashlib.sha256(path.read_bytes()).hexdigest()
        for path in inputs(spec_dir)
    }


def problem(spec_dir: Path = SPEC_DIR) -> str:
    """Why the record does not stand for these files ("" if it does)."""
    path = spec_dir / RECORD_NAME
    if not path.is_file():
        return f"{path} is missing: run `{REMAKE}`"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        recorded, models = data["inputs"], data["models"]
    except (ValueError, KeyError, TypeError) as exc:
        return f"{path} is not a record ({type(exc).__name__}: {exc}): run `{REMAKE}`"
    now = digests(spec_dir)
    changed = sorted(n for n in set(now) | set(recorded) if now.get(n) != recorded.get(n))
    if changed:
        return f"{path} is stale: {', '.join(changed)} changed since: run `{REMAKE}`"
    wanted = symmetric_models(spec_dir)
    if sorted(models) != wanted:
        return f"{path} records {sorted(models)}, the symmetric models are {wanted}: run `{REMAKE}`"
    open_ = [n for n, m in models.items() if not m.get("closed")]
    if open_:
        return f"{path} records graphs not closed under their symmetry: {', '.join(open_)}"
    return ""


def write(spec_dir: Path = SPEC_DIR, only: Sequence[str] = ()) -> int:
    """Run the checks (all, or `only` those, the others kept from the record
    if it is of these files otherwise) and write the record if every graph
    is closed; 0 if it was written."""
    path = spec_dir / RECORD_NAME
    kept: dict[str, Any] = {}
    if only and path.is_file():
        kept = json.loads(path.read_text(encoding="utf-8")).get("models", {})
    results: dict[str, Any] = {}
    for name in symmetric_models(spec_dir):
        if only and name not in only and name in kept:
            results[name] = kept[name]
            continue
        began = time.monotonic()
        report = check(name, spec_dir)
        seconds = time.monotonic() - began
        said = "closed" if report.closed else f"NOT CLOSED: {report.broken}"
        print(f"{name}: {report.states} states, {report.edges} steps, {said} ({seconds:.0f} s)")
        results[name] = {
            "symmetry": report.symmetry,
            "states": report.states,
            "steps": report.edges,
            "transpositions": report.transpositions,
            "closed": report.closed,
        }
        if not report.closed:
            print(f"{path} not written: {name}'s graph is not closed", file=sys.stderr)
            return 1
    record = {
        "schema": SCHEMA,
        "about": f"every symmetric model's small graph closed under its symmetry; {REMAKE}",
        "made": time.strftime("%Y-%m-%d"),
        "inputs": digests(spec_dir),
        "models": results,
    }
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"recorded: {path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shmref.tlc.symrecord", description=__doc__)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--write", action="store_true", help="run the checks, write the record")
    what.add_argument("--check", action="store_true", help="exit 0 if the record is of these files")
    parser.add_argument("--only", action="append", default=[], metavar="MODEL")
    args = parser.parse_args(argv)
    try:
        if args.write:
            return write(only=args.only)
    except TlcError as exc:
        print(f"shmref.tlc.symrecord: {exc}", file=sys.stderr)
        return 2
    found = problem()
    if found:
        print(f"symmetry: {found}", file=sys.stderr)
        return 1
    models = json.loads((SPEC_DIR / RECORD_NAME).read_text(encoding="utf-8"))["models"]
    print(f"{SPEC_DIR / RECORD_NAME} stands for these files: {len(models)} graphs closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
