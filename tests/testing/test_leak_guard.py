"""The session's /dev/shm leak guard must be able to fail, and blame the test
that created the segment. It is switched on by the installed pytest plugin
when `--shmref-impl` is given (shmref.pytest_plugin): that is what this test
is about, so it runs one tiny pytest session of two tests as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTEST = [
    sys.executable,
    "-m",
    "pytest",
    "-q",
    "-p",
    "no:cacheprovider",
    "-p",
    "no:xdist",
    "--shmref-impl",
    "refimpl",
]


def test_a_leaked_segment_fails_the_session_and_blames_its_test(tmp_path):
    (tmp_path / "test_leaky.py").write_text(
        "import refimpl\n"
        "LEAKED = []\n"
        "def test_creates_and_leaks():\n"
        "    ring = refimpl.SingleWriterShmRingBuffer(64, create=True)\n"
        "    LEAKED.append(ring.shared_memory.name)\n"
        "    ring.is_writer = False  # so that close() does not unlink\n"
        "    ring.close()\n"
        "def test_innocent_last():\n"
        "    pass\n"
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
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert run.returncode != 0, run.stdout
    assert "leaked shared-memory segments" in run.stdout, run.stdout
    assert "ERROR at teardown of test_creates_and_leaks" in run.stdout, run.stdout
    blamed = [line for line in run.stdout.splitlines() if line.startswith(("ERROR", "FAILED"))]
    assert blamed and not any("test_innocent_last" in line for line in blamed), blamed
