"""Two oracle runs on one machine never touch each other's segments
(shmref.oracle.privateshm): a store that dies leaving an orphan, run beside
refimpl, and each gets the statuses it gets alone; the orphan is reported by
its own run only; and an orphan a third party leaves meanwhile is neither
swept nor named by either. The broken input: the same refimpl run on the
machine's /dev/shm (`--shm shared`) sweeps and names that third party's
orphan, so this test sees what it claims to.

The scenario runs in a process with a /dev/shm of its own (the "machine"
here), so that the third party's orphan never meets the other tests of this
session (their leak guards would charge it to whatever program ran then)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DYING = f"exec:python3 {REPO / 'tests' / 'programs' / 'misbehaving_store.py'} leak late"
REFIMPL = "exec:python3 -m shmref.process.serve refimpl"
# one property that puts (the dying store dies at its first put) and one that does not
ONLY = ("--only", "test_layout.py::test_same_results_as_refimpl")
ONLY += ("--only", "test_ring.py::TestBadInput::test_bad_buffer_sizes")

pytestmark = pytest.mark.slow
STRAY = "shmref_third_party"


def start(out: Path, impl: str, *extra: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "shmref.conformance", "--impl", impl, "--no-baseline"]
    return subprocess.Popen(
        [*command, "--no-progress", "--out", str(out), *ONLY, *extra],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(run: subprocess.Popen[str]) -> dict[str, object]:
    stdout, stderr = run.communicate(timeout=600)
    assert run.returncode in (0, 1), stdout + stderr
    assert "Traceback" not in stderr, stderr
    return json.loads(Path(run.args[run.args.index("--out") + 1], "conformance.json").read_text())


def checks(report: dict[str, object]) -> list[dict[str, str]]:
    levels = report["levels"]
    assert isinstance(levels, dict)
    return [c for body in levels.values() for c in body["checks"]]


def statuses(report: dict[str, object]) -> dict[str, str]:
    return {c["name"]: c["status"] for c in checks(report)}


def crashed(report: dict[str, object]) -> list[tuple[str, str]]:
    """The properties that got CRASH, each with the start of its detail."""
    return [(c["name"], c["detail"][:300]) for c in checks(report) if c["status"] == "CRASH"]


def removed(report: dict[str, object]) -> str:
    notes = report["not_run"]
    assert isinstance(notes, list)
    return " ".join(n for n in notes if "left in /dev/shm were removed" in n)


def third_party_orphan(name: str, *runs: Path) -> Path:
    """A segment nobody holds, made once every run has started its workers
    (what another run's dead store leaves while these run)."""
    deadline = time.monotonic() + 120
    while not all(list(out.glob("workers/*.jsonl")) for out in runs):
        assert time.monotonic() < deadline, "the runs never started their workers"
        time.sleep(0.1)
    path = Path("/dev/shm", name)
    path.write_bytes(b"\0" * 4096)
    return path


def scenario(tmp_path: Path) -> list[dict[str, object]]:
    """The runs, each report in order: the dying store and refimpl side by
    side, the dying store alone, refimpl alone on the shared /dev/shm."""
    stray_name = STRAY
    try:
        dying, served = start(tmp_path / "dying", DYING), start(tmp_path / "served", REFIMPL)
        stray = third_party_orphan(stray_name, tmp_path / "dying", tmp_path / "served")
        side_by_side = finish(dying), finish(served)
        alone_dying = finish(start(tmp_path / "dying-alone", DYING))
        shared = start(tmp_path / "served-alone", REFIMPL, "--shm", "shared")
        stray.unlink(missing_ok=True)
        stray = third_party_orphan(stray_name, tmp_path / "served-alone")
        alone_served = finish(shared)
    finally:
        Path("/dev/shm", stray_name).unlink(missing_ok=True)
    return [*side_by_side, alone_dying, alone_served]


def test_two_runs_side_by_side_keep_to_their_own_segments(tmp_path: Path) -> None:
    machine = subprocess.run(
        [sys.executable, __file__, str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=1500,
    )
    if machine.returncode == 3:
        pytest.skip(machine.stdout.strip())
    assert machine.returncode == 0, machine.stdout[-3000:] + machine.stderr[-3000:]
    *side_by_side, alone_dying, alone_served = json.loads(machine.stdout.splitlines()[-1])
    stray_name = STRAY
    for report in side_by_side:
        assert report["segments"]["way"] == "private", report["segments"]
    assert statuses(side_by_side[0]) == statuses(alone_dying)
    assert statuses(side_by_side[1]) == statuses(alone_served)
    assert "CRASH" in statuses(alone_dying).values()  # it did die
    # its orphan is named in its own report (the property it died in), side by
    # side as alone, and in no other; the third party's in neither
    dying_text, served_text = (json.dumps(report) for report in side_by_side)
    for name, report in (("side by side", side_by_side[0]), ("alone", alone_dying)):
        assert "(removed): misbehaving_" in json.dumps(report), (
            f"the dying store's orphan is not named in its report {name}: "
            f"{removed(report)!r}; {report['segments']}; {crashed(report)}"
        )
    assert removed(side_by_side[1]) == "" and "misbehaving_" not in served_text
    assert stray_name not in dying_text + served_text
    # the broken input: on the machine's /dev/shm the third party's orphan is swept, and named
    assert alone_served["segments"]["way"] == "shared"
    assert stray_name in removed(alone_served), alone_served["not_run"]


if __name__ == "__main__":  # the "machine": a /dev/shm of its own, the scenario on it
    from shmref.oracle import privateshm

    if privateshm.enter().way != privateshm.PRIVATE:
        print(f"no /dev/shm of its own to be had: {privateshm.current().detail}")
        sys.exit(3)
    print(json.dumps(scenario(Path(sys.argv[1]))))
