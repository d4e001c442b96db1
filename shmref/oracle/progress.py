"""What a conformance run is doing while it runs, on stderr: property N of M,
its level, the time so far. On a terminal one line redrawn in place (a bar);
elsewhere (CI, a log) one line per finished property. Fed by the children's
events (shmref.oracle.events, through shmref.oracle.isolation); it writes
nothing into the report.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TextIO

from shmref.core.suitegroups import property_key
from shmref.oracle.events import (
    CaseResult,
    Collected,
    Event,
    Finished,
    HazardJudged,
    Lost,
    Recorded,
    Started,
)
from shmref.oracle.job import RECORDING_UNIT, Unit

WIDTH = 24  # the bar's cells
WORST = {"error": 3, "fail": 2, "pass": 1, "skip": 0}
FAILING = ("FAIL", "ERROR", "CRASH", "TIMEOUT")
SHOWN = {"error": "ERROR", "fail": "FAIL", "pass": "pass", "skip": "skip"}


def minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 60 else f"{seconds // 60:.0f} min {seconds % 60:02.0f} s"


class Progress:
    """Counts properties as the children report them. `others`: the units
    that are no pytest test (recordings, hazard replays) and how many events
    finish each."""

    def __init__(
        self,
        stream: TextIO,
        others: Mapping[Unit, int] | None = None,
        clock: Callable[[], float] = time.monotonic,
        tty: bool | None = None,
    ) -> None:
        self.stream, self.clock = stream, clock
        self.started = clock()
        self.tty = stream.isatty() if tty is None else tty
        self.left: dict[Unit, set[str]] = {}  # property -> its tests not finished yet
        self.counts: dict[Unit, int] = dict(others or {})  # events still to come, not tests
        self.status: dict[Unit, str] = {}
        self.done: list[Unit] = []
        self.running: Unit | None = None
        self.drawn = False

    @property
    def total(self) -> int:
        return len(set(self.left) | set(self.counts) | set(self.done))

    def event(self, event: Event) -> None:
        """Count what `event` finishes (the others draw nothing)."""
        match event:
            case Collected(nodes=nodes):
                for node in nodes:
                    unit = property_key(node)
                    if unit is not None and unit not in self.done:
                        self.left.setdefault(unit, set()).add(node)
            case Started(unit=unit) if unit is not None:
                self.running = unit
                self.draw()
            case CaseResult(node=node, status=status):
                unit = property_key(node)
                if unit is not None:
                    self.worse(unit, status)
            case Finished(node=node):
                unit = property_key(node)
                if unit is not None and unit in self.left:
                    self.left[unit].discard(node)
                    if not self.left[unit]:
                        self.finish(unit)
            case Recorded(error=error):
                if error:
                    self.worse(RECORDING_UNIT, "error")
                else:  # TLC's verdict on it comes with the report
                    self.status.setdefault(RECORDING_UNIT, "recorded")
                self.counted(RECORDING_UNIT)
            case HazardJudged(unit=unit, check=check):
                self.status[unit] = check.status
                self.counted(unit)
            case Lost(unit=unit, status=status):
                self.status[unit] = status
                self.finish(unit)

    def counted(self, unit: Unit) -> None:
        """One of the events that finish `unit` (a recording, a hazard) came."""
        self.counts[unit] = self.counts.get(unit, 1) - 1
        if self.counts[unit] <= 0:
            self.finish(unit)

    def worse(self, unit: Unit, status: str) -> None:
        known = self.status.get(unit)
        if known is None or WORST.get(status, 3) > WORST.get(known, 3):
            self.status[unit] = status

    def finish(self, unit: Unit) -> None:
        if unit in self.done:
            return
        self.left.pop(unit, None)
        self.counts.pop(unit, None)
        self.done.append(unit)
        if not self.tty:
            status = self.status.get(unit, "pass")
            self.stream.write(
                f"shmref: [{len(self.done)}/{self.total}] {unit[0]}: {unit[1]}: "
                f"{SHOWN.get(status, status)} ({minutes(self.clock() - self.started)})\n"
            )
            self.stream.flush()
        self.draw()

    def draw(self) -> None:
        if not self.tty:
            return
        total = max(self.total, 1)
        filled = WIDTH * len(self.done) // total
        bad = sum(1 for u in self.done if self.status.get(u, "").upper() in FAILING)
        what = f"{self.running[0]}: {self.running[1]}" if self.running else ""
        line = (
            f"[{'#' * filled}{'.' * (WIDTH - filled)}] {len(self.done)}/{self.total} "
            f"{minutes(self.clock() - self.started)}" + (f", {bad} failing" if bad else "")
        )
        self.stream.write("\r\x1b[K" + (line + "  " + what)[:110])
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """Leave the terminal's line clean for what the run prints next."""
        if self.tty and self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
