"""A pytest plugin (`-p vllmcheck.asseed`) that makes the installed release's
module the seed of tests/findings/: the findings tests' `seed` fixture asks
`shmref.seed.build` for the module built from the seed's documentation page;
here it gets the release's `shm_object_storage.py`, its text unchanged,
written into the test's folder as `shmref_seed.py` and imported under that
name (so spawned children and `python -O` subprocesses import it too; a
caller that names no folder gets build/vllm/<VER>/findings/seed/). The
release's serde and handle are its own, where the seed build adds refimpl's."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import tempfile
from pathlib import Path
from types import ModuleType

from shmref.seed import build
from shmref.seed.aliases import SEED_MODULE
from vllmcheck import MODULE


def release_file() -> Path:
    """The installed release's module file (its package is imported to find it)."""
    spec = importlib.util.find_spec(MODULE)
    if spec is None or spec.origin is None:
        raise build.SeedMissing(f"{MODULE} is not installed")
    return Path(spec.origin)


def default_dest() -> Path:
    """Where a caller that names no folder gets it: beside the venv, under
    build/vllm/<VER>/ (never the user cache, where the seed's own build lives)."""
    if sys.prefix == sys.base_prefix:  # not in a venv: a folder of its own
        return Path(tempfile.mkdtemp(prefix="vllmcheck-seed-"))
    return Path(sys.prefix).parent / "findings" / "seed"


def release_as_seed(dest_dir: Path | None = None, seed_path: Path | None = None) -> ModuleType:
    """`build.build_seed_module`'s stand-in: the release's module as `shmref_seed`."""
    source = release_file().read_text(encoding="utf-8")
    dest = Path(dest_dir) if dest_dir is not None else default_dest()
    target = dest.resolve() / f"{SEED_MODULE}.py"
    build.write_generated(target, source)
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    return build.import_generated(SEED_MODULE, target, "RELEASE_SHA256", digest)


build.build_seed_module = release_as_seed
build.default_seed_path = release_file
