"""`make check` says what it is doing (issue 33): a bar redrawn in place on a
terminal, one line per finished model elsewhere, and nothing it records
changes. The drawing is tested with a fake clock; one run of `python -m
shmref check` on two tiny fixture models needs Java (marked `tlc`)."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shmref.tlc.java import find_jar, find_java
from shmref.tlc.progress import Progress
from shmref.tlc.tlavalues import TlcError

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "tlc_fixtures"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_one_line_per_finished_model() -> None:
    out, clock = io.StringIO(), Clock()
    shown = Progress(2, out, tty=False, clock=clock)
    shown.start("MCRing")
    shown.start("MCLive")
    shown.note("MCRing", "TLC: 5 distinct states")  # a short model: no line of its own
    clock.now += 31
    shown.note("MCRing", "TLC: 900 distinct states")  # a long one: a sign of life
    shown.finish("MCRing", "PASS", 13229, 4.04)
    clock.now += 60
    shown.finish("MCLive", "UNEXPECTED", None, None)
    shown.close()
    assert out.getvalue().splitlines() == [
        "    [MCRing 31s] TLC: 900 distinct states",
        "check: [1/2] MCRing: PASS, 13,229 distinct states, 4.0 s (31s elapsed)",
        "check: [2/2] MCLive: UNEXPECTED, - distinct states, - (1m31s elapsed)",
    ]
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


def test_on_a_terminal_one_line_redrawn_in_place() -> None:
    out, clock = io.StringIO(), Clock()
    shown = Progress(4, out, tty=True, clock=clock, tick=None)
    shown.start("MCStorage")
    clock.now += 65
    shown.start("MCRing")
    shown.note("MCRing", "TLC: 5 distinct states")  # never scrolls the bar away
    shown.above(lambda: out.write("a results row\n"))
    shown.finish("MCRing", "PASS", 9, 1.0)
    shown.close()
    text = out.getvalue()
    frames = text.split("\r\x1b[K")
    assert "\n" not in "".join(f for f in frames if f.startswith("["))  # each frame one line
    assert "[....................] 0/4 1m05s  running: MCStorage 1m05s, MCRing 0s" in frames
    assert "a results row\n" in frames  # the bar cleared before the row, redrawn after
    assert frames[-2] == "[#####...............] 1/4 1m05s  running: MCStorage 1m05s"
    assert frames[-1] == ""  # close() leaves the line empty
    assert "TLC: 5" not in text


def _tiny_spec(tmp_path: Path) -> Path:
    """Two fixture models: one must pass, one must violate its invariant."""
    spec = tmp_path / "spec"
    spec.mkdir()
    for name in ("Pass", "Inv"):
        for ext in ("tla", "cfg"):
            shutil.copy(FIX / f"{name}.{ext}", spec / f"{name}.{ext}")
    (spec / "models.toml").write_text(
        '[[model]]\nname = "Pass"\nexpect = "pass"\nwhat = "passes"\n\n'
        '[[model]]\nname = "Inv"\nexpect = "invariant"\nproperty = "Small"\nwhat = "fails"\n'
    )
    return spec


@pytest.mark.tlc
@pytest.mark.xdist_group("tlc-runs")
def test_check_prints_a_line_per_finished_model_in_ci(tmp_path: Path) -> None:
    try:
        find_java()
        find_jar()
    except TlcError as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"TLC not available: {exc}")
    spec = _tiny_spec(tmp_path)
    manifest = (spec / "models.toml").read_bytes()
    proc = subprocess.run(  # stderr is a pipe here, as in CI
        [sys.executable, "-m", "shmref", "check", "--spec-dir", str(spec), "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("check: [")]
    assert len(lines) == 2 and "\r" not in proc.stderr and "\x1b" not in proc.stderr
    assert {line.split("]")[0] for line in lines} == {"check: [1/2", "check: [2/2"}
    by_name = {line.split("] ")[1].split(":")[0]: line for line in lines}
    assert "Pass: PASS, 9 distinct states, " in by_name["Pass"]
    assert "Inv: expected FAIL reproduced, 8 distinct states, " in by_name["Inv"]
    assert all(line.endswith(" elapsed)") and " s (" in line for line in lines)
    # the results table is unchanged on stdout, and nothing was recorded
    assert proc.stdout.splitlines()[1].startswith("model ")
    assert "check: all 2 model(s) as expected" in proc.stdout.splitlines()[-1]
    assert (spec / "models.toml").read_bytes() == manifest
    assert not (spec / "README.md").exists()
