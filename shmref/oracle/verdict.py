"""The vocabulary of a verdict: levels, statuses, one property's result,
and commands that replay it from a fresh shell."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from shmref.core.levels import (
    BAD,
    FAIL,
    NOT_RUN,
    PASS,
    SKIP,
)
from shmref.core.paths import checkout
from shmref.seed.aliases import alias_of, built_by_shmref
from shmref.seed.build import SEED_ENV

# the levels and statuses are shmref.core.levels' (the suite and the renderer read them
# too); the oracle's modules take them from here, with what a verdict adds
__all__ = [
    "RUN_CHECKS",
    "Check",
    "import_root",
    "level_status",
    "shell",
    "shell_impl",
]
RUN_CHECKS = (
    "the run",
    "pytest",
)  # checks of the whole run (its processes, collection), no property's


@dataclass
class Check:
    """One property of one level; `seed` is the seed's own result on it."""

    level: str
    name: str
    what: str
    status: str  # pass, FAIL, ERROR, CRASH, TIMEOUT, skip, not run, assumption, FLAKY
    cases: str = ""
    detail: str = ""
    failures: list[dict[str, str]] = field(default_factory=list)  # trace, command, case
    seed: str = ""
    attempts: list[str] = field(default_factory=list)  # each run's status, under --repeat


def shell_impl(name: str) -> str:
    """What a user types for module `name` (alias_of), quoted for a command
    line (exec:PROGRAM has spaces)."""
    return shlex.quote(alias_of(name))


def import_root(impl: ModuleType | str | None) -> str | None:
    """The sys.path entry that `impl` was imported from (None: built by
    shmref); a string is that entry already (the child process found it)."""
    if impl is None or isinstance(impl, str):
        return impl or None
    if built_by_shmref(impl.__name__) or not getattr(impl, "__file__", None):
        return None
    path = Path(impl.__file__ or "").resolve()
    depth = impl.__name__.count(".") + (1 if path.name == "__init__.py" else 0)
    root = path.parent
    for _ in range(depth):
        root = root.parent
    return str(root)


def shell(command: str, impl: ModuleType | str | None) -> str:
    """`command` as it runs when pasted into a fresh shell: this Python, the
    shmref checkout (if any) and the implementation importable, and the seed
    file it used."""
    root = checkout()
    paths = [str(root)] if root else []
    if (where := import_root(impl)) and where not in paths:
        paths.append(where)
    if command.startswith("python "):
        command = shlex.quote(sys.executable) + command[len("python") :]
    env = [f"PYTHONPATH={shlex.quote(':'.join(paths))}"] if paths else []
    if os.environ.get(SEED_ENV):
        env.append(f"{SEED_ENV}={shlex.quote(os.environ[SEED_ENV])}")
    cd = f"cd {shlex.quote(str(root))} && " if root else ""
    return cd + " ".join([*env, command])


def level_status(checks: Sequence[Check], level: str, levels: Sequence[str]) -> str:
    if level not in levels:
        return NOT_RUN
    statuses = {c.status for c in checks if c.level == level}
    if statuses & set(BAD):
        return FAIL
    if PASS in statuses:
        return PASS
    return NOT_RUN if NOT_RUN in statuses else SKIP
