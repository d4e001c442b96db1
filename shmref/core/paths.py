"""Where shmref finds its files and keeps its caches, installed or checked out.

The spec (`spec/` at the top of a checkout, `shmref/spec/` inside a wheel)
and the conformance suite (`shmref/suite`) are package data, found through
`importlib.resources` or beside the package, so a wheel carries everything
the oracle needs.
Generated things (TLC traces, the seed's module, mutants) go to a user
cache directory, one folder per spec version, never to the current folder.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.resources
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CACHE_ENV = "SHMREF_CACHE_DIR"


def _package_dir(package: str) -> Path:
    return Path(str(importlib.resources.files(package)))


PACKAGE_DIR = _package_dir("shmref")
# a wheel's copy inside the package, else the checkout's (pyproject maps spec/ there)
SPEC_DIR = PACKAGE_DIR / "spec" if (PACKAGE_DIR / "spec").is_dir() else PACKAGE_DIR.parent / "spec"
SUITE_DIR = PACKAGE_DIR / "suite"
REFIMPL_DIR = _package_dir("refimpl")


def checkout() -> Path | None:
    """The shmref checkout this package runs from, if any (its Makefile,
    FINDINGS.md and tests/ are beside it); None for an installed wheel."""
    root = PACKAGE_DIR.parent
    return root if (root / "FINDINGS.md").is_file() and (root / "tests").is_dir() else None


def spec_digest(spec_dir: Path = SPEC_DIR) -> str:
    """A hash of the spec's files: caches of TLC output are keyed by it."""
    digest = hashlib.sha256()
    for path in sorted(spec_dir.glob("*.tla")) + sorted(spec_dir.glob("*.cfg")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:12]


def cache_root() -> Path:
    """`$SHMREF_CACHE_DIR`, else `$XDG_CACHE_HOME/shmref`, else `~/.cache/shmref`."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return (base / "shmref").resolve()


def cache_dir(kind: str, keyed_by_spec: bool = True) -> Path:
    """A cache folder for `kind` (made on demand), under the spec's hash when
    what it holds depends on the spec."""
    folder = cache_root() / (spec_digest() if keyed_by_spec else "any") / kind
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def cache_lock(kind: str, name: str) -> Iterator[None]:
    """Hold an exclusive lock on one cache entry while it is built, so that
    processes building the same entry (pytest-xdist workers, a conformance
    run and its seed baseline) take turns instead of overwriting each other."""
    lock = cache_dir(kind, keyed_by_spec=False) / f".{name}.lock"
    with open(lock, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
