"""What `python -m shmref.check` and `python -m shmref.deep` share on the
command line: the spec folder, a time bound and `--record`, then the
manifest read with Java and TLC's jar found (one line and exit 2 if not)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from shmref.core.paths import SPEC_DIR
from shmref.tlc import TlcError, find_jar, find_java
from shmref.tlc.manifest import Manifest, ManifestError, load_manifest


def add_spec_options(
    parser: argparse.ArgumentParser, *, timeout: float | None, timeout_help: str, record_help: str
) -> None:
    """--spec-dir, --timeout (default `timeout`) and --record."""
    parser.add_argument(
        "--spec-dir",
        type=Path,
        default=SPEC_DIR,
        help="folder with the .tla/.cfg files and models.toml (default: spec/)",
    )
    parser.add_argument(
        "--timeout", type=float, default=timeout, metavar="SECONDS", help=timeout_help
    )
    parser.add_argument("--record", action="store_true", help=record_help)


def load_models(command: str, spec_dir: Path) -> Manifest | None:
    """`spec_dir`'s manifest once Java and the jar are found; None after one
    line on stderr naming what is wrong (the caller exits 2)."""
    try:
        manifest = load_manifest(spec_dir / "models.toml")
        find_java()
        find_jar()
    except (TlcError, ManifestError) as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return None
    return manifest
