"""One command of `make lint`, as make expands it: the lint tests check the
command CI runs, not a copy of it."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def lint_command(marker: str, what: str) -> list[str]:
    """The one line of `make lint` holding `marker` (`-n`: nothing runs), split."""
    assert shutil.which("make"), "make is needed to read the lint target"
    outer = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")  # under `make test`: not the outer make's flags
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "-o", "setup", "lint", f"PYTHON={sys.executable}"],
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if k not in outer},
        capture_output=True,
        text=True,
        check=True,
    )
    found = [shlex.split(line) for line in done.stdout.splitlines() if marker in line]
    assert len(found) == 1, f"make lint should run one {what}:\n{done.stdout}"
    return found[0]
