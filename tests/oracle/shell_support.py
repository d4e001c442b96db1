"""A replay command as a user runs it: pasted into a new shell."""

from __future__ import annotations

import os
import subprocess


def in_a_fresh_shell(command: str) -> subprocess.CompletedProcess[str]:
    """`command` pasted into a new shell: no inherited environment, no working directory."""
    return subprocess.run(
        ["bash", "-c", command],
        cwd="/",
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "HOME": "/tmp"},
        timeout=600,
    )
