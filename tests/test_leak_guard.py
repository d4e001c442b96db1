"""The session's /dev/shm leak guard must be able to fail. It is switched on by
the installed pytest plugin when `--shmref-impl` is given (shmref.pytest_plugin)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PYTEST = [
    sys.executable,
    "-m",
    "pytest",
    "-q",
    "-p",
    "no:cacheprovider",
    "--shmref-impl",
    "refimpl",
]


def test_a_leaked_segment_fails_the_session(tmp_path):
    (tmp_path / "test_leaky.py").write_text(
        "import refimpl\n"
        "def test_leaks():\n"
        "    ring = refimpl.SingleWriterShmRingBuffer(64, create=True)\n"
        "    LEAKED.append(ring.shared_memory.name)\n"
        "    ring.is_writer = False  # so that close() does not unlink\n"
        "LEAKED = []\n"
        "def teardown_module():\n"
        "    import atexit\n"
        "    from multiprocessing import shared_memory\n"
        "    atexit.register(lambda: [shared_memory.SharedMemory(n).unlink() for n in LEAKED])\n"
    )
    run = subprocess.run(
        [*PYTEST, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert run.returncode != 0
    assert "leaked shared-memory segments" in run.stdout
