"""A state machine's falsifying example kept for the report's picture: only
when a report asks for traces (the run's `trace_dir`, shmref.render.sink) and
Hypothesis runs the shrunk failing example for the last time, so that the
search itself pays nothing."""

from __future__ import annotations

import sys
from typing import Any

from shmref.core import vocabulary
from shmref.render import sink
from shmref.render.build import Builder
from shmref.store.driver import Driver, Outcome


def final_run() -> bool:
    """Hypothesis is running the (shrunk) failing example for the last time."""
    try:
        from hypothesis.control import current_build_context

        return bool(current_build_context().is_final)
    except Exception:  # outside a Hypothesis test
        return False


class Drawn:
    """The steps of one machine run, drawn if it fails."""

    def __init__(self, name: str, driver: Driver, constants: dict[str, int], readers: int):
        self.driver = driver
        self.builder: Builder | None = None
        if sink.trace_dir() and final_run():
            self.builder = Builder(
                "hypothesis",
                f"Hypothesis falsifying example ({name})",
                {**constants, "UNIT": driver.unit},
                [f"r{k + 1}" for k in range(readers)],
            )

    def step(self, name: str, args: tuple[Any, ...], real: Outcome) -> None:
        """Add one step the machine took, with the ring after it (nothing unless drawing)."""
        if self.builder is None:
            return
        arguments = dict(zip(vocabulary.action(name).arguments, args, strict=False))
        steps = self.builder.trace.steps
        self.builder.add(
            len(steps) + 1,
            {"name": name, **arguments},
            real.status,
            real.result,
            self.driver.observe(),
        )

    def teardown(self) -> None:
        """Called from the machine's teardown, which runs in the run's
        `finally`: the exception in flight is the failure."""
        failure = sys.exc_info()[1]
        if self.builder is not None and failure is not None:
            sink.save(self.builder.mark(f"{type(failure).__name__}: {failure}".splitlines()[0]))
