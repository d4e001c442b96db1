"""What `make check` is doing while it does it (issue 33).

On a terminal (the stream is a tty) one line redrawn in place: a bar of the
models finished, "N/M", the elapsed time and the models running with their
own time. Elsewhere (CI, a pipe) one line per finished model: its number,
name, result, distinct states and seconds. Only the stream is written to:
the results table on stdout and what `--record` writes stay as they are.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from typing import TextIO

BAR = 20  # characters of the bar
TICK = 0.5  # seconds between redraws of the terminal line
QUIET = 30.0  # seconds a model runs before TLC's own progress lines are shown (off a tty)


def _clock(seconds: float) -> str:
    """12s, 3m05s: elapsed time, short."""
    whole = int(seconds)
    return f"{whole}s" if whole < 60 else f"{whole // 60}m{whole % 60:02d}s"


class Progress:
    """Models started and finished, drawn on `stream` (thread-safe: models run
    in a pool and TLC's progress arrives on reader threads)."""

    def __init__(
        self,
        total: int,
        stream: TextIO,
        *,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        tick: float | None = TICK,
    ) -> None:
        self.total = total
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self.clock = clock
        self.started = clock()
        self.done = 0
        self.running: dict[str, float] = {}  # model -> its start
        self._lock = threading.RLock()
        self._drawn = False
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        if self.tty and tick:  # the elapsed times move even while no model finishes
            self._ticker = threading.Thread(target=self._tick, args=(tick,), daemon=True)
            self._ticker.start()

    def _tick(self, every: float) -> None:
        while not self._stop.wait(every):
            with self._lock:
                self._draw()

    def line(self) -> str:
        """The terminal line: bar, N/M, elapsed, the running models."""
        now = self.clock()
        filled = BAR * self.done // max(1, self.total)
        bar = "#" * filled + "." * (BAR - filled)
        running = ", ".join(
            f"{name} {_clock(now - since)}"
            for name, since in sorted(self.running.items(), key=lambda item: item[1])
        )
        text = f"[{bar}] {self.done}/{self.total} {_clock(now - self.started)}"
        return text + (f"  running: {running}" if running else "")

    def _draw(self) -> None:
        if not self.tty:
            return
        width = shutil.get_terminal_size((80, 24)).columns - 1
        self.stream.write("\r\x1b[K" + self.line()[:width])
        self.stream.flush()
        self._drawn = True

    def _clear(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False

    def start(self, name: str) -> None:
        with self._lock:
            self.running[name] = self.clock()
            self._draw()

    def note(self, name: str, message: str) -> None:
        """TLC's own progress of a model running longer than QUIET seconds: a
        line of its own off a terminal (a sign of life in CI); on one, the
        bar's running time says it (a line would scroll the bar away)."""
        with self._lock:
            since = self.running.get(name, self.started)
            if not self.tty and self.clock() - since >= QUIET:
                self.stream.write(f"    [{name} {_clock(self.clock() - since)}] {message}\n")
                self.stream.flush()

    def finish(self, name: str, result: str, states: int | None, seconds: float | None) -> None:
        with self._lock:
            self.running.pop(name, None)
            self.done += 1
            if self.tty:
                self._draw()
                return
            count = "-" if states is None else f"{states:,}"
            took = "-" if seconds is None else f"{seconds:.1f} s"
            self.stream.write(
                f"check: [{self.done}/{self.total}] {name}: {result}, {count} distinct states, "
                f"{took} ({_clock(self.clock() - self.started)} elapsed)\n"
            )
            self.stream.flush()

    def above(self, write: Callable[[], object]) -> None:
        """Print something (a results row) without the bar in its way, then redraw."""
        with self._lock:
            self._clear()
            write()
            self._draw()

    def close(self) -> None:
        """Stop redrawing and leave the terminal line empty."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            self._clear()
