"""A run's own /dev/shm (shmref.oracle.privateshm): what a process makes
after `enter` is not on the machine's /dev/shm, and a machine that allows no
mount namespace gets the shared one, said with its reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from shmref.oracle import privateshm

REPO = Path(__file__).resolve().parents[2]
MAKE_ONE = """
import os, sys
from shmref.oracle import privateshm
segments = privateshm.enter(sys.argv[1])
name = f"shmref_privateshm_test_{os.getpid()}"
open(f"/dev/shm/{name}", "wb").close()
print(segments.way, name, sorted(os.listdir("/dev/shm")) == [name])
"""


def make_one(wanted: str) -> tuple[str, str, bool]:
    done = subprocess.run(
        [sys.executable, "-c", MAKE_ONE, wanted],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    way, name, alone = done.stdout.split()
    return way, name, alone == "True"


def test_what_a_private_run_makes_stays_in_it() -> None:
    way, name, alone = make_one(privateshm.PRIVATE)
    if way != privateshm.PRIVATE:
        pytest.skip("this machine allows no mount namespace")
    assert alone  # an empty /dev/shm of its own
    assert not Path("/dev/shm", name).exists()  # gone with the run, never on the machine's


def test_a_shared_run_makes_it_on_the_machines() -> None:
    """The broken input of the test above: without the namespace, it is there."""
    way, name, alone = make_one(privateshm.SHARED)
    try:
        assert way == privateshm.SHARED and Path("/dev/shm", name).exists()
    finally:
        Path("/dev/shm", name).unlink(missing_ok=True)


def test_no_namespace_is_the_shared_shm_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(privateshm, "_entered", None)
    monkeypatch.setattr(privateshm, "_private_shm", lambda: "no mount namespace: EPERM")
    segments = privateshm.enter()
    assert segments.way == privateshm.SHARED
    assert "(no mount namespace: EPERM)" in segments.detail
    assert "may be swept and reported by this one" in segments.detail
    assert privateshm.enter() is segments  # decided once per process


CALLER = """
import multiprocessing as mp, sys
from shmref.oracle import cli, privateshm
lock = mp.get_context("spawn").Lock()  # made before the run, as a test session's is
code = cli.main(["--impl", "no_such_store_module"], **eval(sys.argv[1]))
child = mp.get_context("spawn").Process(target=bool, args=(lock,))  # rebuilds the lock
child.start()
child.join()
print(code, privateshm.current().way, child.exitcode)
"""


def run_inside_a_process(**how: bool) -> tuple[int, str, int]:
    done = subprocess.run(
        [sys.executable, "-c", CALLER, repr(how)], capture_output=True, text=True, cwd=REPO
    )
    code, way, child = done.stdout.split()
    return int(code), way, int(child)


def test_a_run_inside_a_process_leaves_it_on_its_shm() -> None:
    """An in-process `main` (a test's, a script's) keeps its caller's
    /dev/shm: a lock the caller made before still reaches its children."""
    code, way, child = run_inside_a_process()
    assert (code, way, child) == (2, privateshm.SHARED, 0)


def test_moving_a_process_that_made_a_lock_hides_it_from_its_children() -> None:
    """The broken input: the command's move, done inside a process that
    already made a lock, leaves that lock out of its children's /dev/shm
    (the reader tests' spawn failed so when a test called `main`)."""
    code, way, child = run_inside_a_process(own_process=True)
    if way != privateshm.PRIVATE:
        pytest.skip("this machine allows no mount namespace")
    assert code == 2 and child != 0
