"""What `python -m shmref check` and `python -m shmref deep` share on the
command line: the spec folder, a time bound and `--record`, then the
manifest read with Java and TLC's jar found (one line and exit 2 if not)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from shmref.core.paths import SPEC_DIR
from shmref.tlc.java import find_jar, find_java
from shmref.tlc.manifest import Manifest, ManifestError, load_manifest
from shmref.tlc.tlavalues import TlcError

# command -> (--timeout's default, its help, --record's help)
SPEC_OPTIONS: dict[str, tuple[float | None, str, str]] = {
    "check": (
        None,
        "seconds per model before giving up",
        "write the measured states/depth/time into spec/models.toml and regenerate "
        "spec/README.md's models table (only with the default --spec-dir)",
    ),
    "deep": (
        4 * 3600.0,
        "seconds per model before giving up (default 4 hours)",
        "write distinct/depth/time/workers of the runs as expected into spec/models.toml "
        "and regenerate spec/README.md's table",
    ),
}


def spec_parser(command: str, description: str | None) -> argparse.ArgumentParser:
    """`python -m shmref <command>`'s parser with --spec-dir, --timeout and
    --record as `command` (SPEC_OPTIONS) has them; the caller adds its own."""
    timeout, timeout_help, record_help = SPEC_OPTIONS[command]
    parser = argparse.ArgumentParser(
        prog=f"python -m shmref {command}",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
    return parser


def parse_spec_args(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, command: str
) -> tuple[argparse.Namespace, Manifest] | None:
    """The options (`spec_dir` resolved) and the spec's manifest; None after
    one line on stderr if either cannot be had (the caller exits 2)."""
    args = parser.parse_args(argv)
    args.spec_dir = args.spec_dir.resolve()
    manifest = load_models(command, args.spec_dir)
    return None if manifest is None else (args, manifest)


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
