"""The CI scripts run under `set -o pipefail`: a reader that stops early
(`head`, `grep -q`) makes the writer die of SIGPIPE, and the step fails at
random (exit 141), as a landing once did on `grep ... | head -3`."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EARLY_EXIT = re.compile(r"\|\s*(head\b|grep\s+(-\w+\s+)*-\w*q)")


def early_exit_pipes(script: str) -> list[str]:
    """Lines of a pipefail script whose pipeline ends in a reader that exits early."""
    if "pipefail" not in script:
        return []
    return [
        line.strip()
        for line in script.splitlines()
        if not line.lstrip().startswith("#") and EARLY_EXIT.search(line.split(" #")[0])
    ]


def test_no_ci_script_pipes_into_a_reader_that_exits_early() -> None:
    found = {
        path.name: early_exit_pipes(path.read_text())
        for path in sorted((ROOT / ".ci").iterdir())
        if path.is_file()
    }
    assert not {name: lines for name, lines in found.items() if lines}


def test_the_check_catches_the_pipe_that_broke_a_landing() -> None:
    broken = 'set -euo pipefail\ngrep -E "^FAILED" log | head -3\nmake help | grep -q lint\n'
    assert early_exit_pipes(broken) == [
        'grep -E "^FAILED" log | head -3',
        "make help | grep -q lint",
    ]
    assert early_exit_pipes(broken.replace("pipefail", "")) == []
