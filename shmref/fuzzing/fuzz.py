"""A bad-input fuzz of an implementation's public API (issue 19).

`fuzz(impl)` builds one writer store and one reader store on real shared
memory, puts a few objects, makes some handles stale (their chunks reused),
and then lets Hypothesis draw calls that must all fail: every public method
with wrong types (including numeric look-alikes that equal the right int),
huge and negative ints, addresses whose chunk header would end past the
segment, forged, stale and validly-signed-but-absurd handles, keys that are
not valid UTF-8, bad puts. Each call must raise `ValueError`, or `TypeError`
where the argument has a wrong Python type; a returned value or any other
exception is counted, and every object put before the fuzz must still read
back intact after each batch.

Used by tests/fuzzing/test_fuzz.py (normal mode and `python -O`), by `make fuzz`
(``python -m shmref fuzz --calls N --random``) and offered to other
implementations by the oracle as a hardened-level property.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import sys
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from types import ModuleType

import hypothesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from shmref.fuzzing.cases import KINDS, Case, cases
from shmref.fuzzing.fixture import Fixture

SHOWN = 5  # examples kept per kind of problem


@dataclass
class FuzzReport:
    """What the fuzz saw: `values` and `unexpected` must both stay empty."""

    calls: int = 0
    values: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    raised: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        """No value returned where an error was due, no other exception, every message readable."""
        return not (self.values or self.unexpected or self.unreadable)

    def summary(self) -> str:
        """One line: calls made and what went wrong, counted."""
        return (
            f"fuzz: {self.calls} calls, {len(self.values)} values, "
            f"{len(self.unexpected)} unexpected, {len(self.unreadable)} unreadable"
        )

    def details(self) -> str:
        """The summary, the exceptions raised, and each wrong case in full."""
        lines = [
            self.summary(),
            "raised: " + ", ".join(f"{name} {count}" for name, count in self.raised.most_common()),
        ]
        for title, found in (
            ("values", self.values),
            ("unexpected", self.unexpected),
            ("unreadable", self.unreadable),
        ):
            lines += [f"{title} (first {SHOWN}):", *(f"  {x}" for x in found[:SHOWN])]
        return "\n".join(lines)


# -- what to pass --------------------------------------------------------------------


# -- running ---------------------------------------------------------------------------


def run_case(case: Case, report: FuzzReport) -> None:
    """Make one bad call and count what it did in `report`."""
    report.calls += 1
    try:
        value = case.call()
    except ValueError as exc:
        report.raised[type(exc).__name__] += 1
        return
    except TypeError as exc:
        report.raised[type(exc).__name__] += 1
        if not case.wrong_type:
            report.unexpected.append(f"{case.label} -> TypeError: {exc}")
        return
    except Exception as exc:  # the point of the fuzz: report, never crash
        report.raised[type(exc).__name__] += 1
        report.unexpected.append(f"{case.label} -> {type(exc).__name__}: {exc}")
        return
    report.values.append(f"{case.label} -> {str(value)[:60]}")


def fuzz(
    impl: ModuleType, calls: int = 10_240, batch: int = 64, seed: int | None = 0
) -> FuzzReport:
    """Make at least `calls` bad calls on `impl`, checking after every `batch`
    that the earlier objects still read back. `seed=None`: a random run."""
    report = FuzzReport()
    base = random.randrange(2**32) if seed is None else seed
    with ExitStack() as resources:
        fx = Fixture(impl, resources)
        for round_ in itertools.count():
            if report.calls >= calls:
                break

            @hypothesis.seed(base + round_)
            @settings(
                max_examples=max(1, math.ceil((calls - report.calls) / batch)),
                database=None,
                deadline=None,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(st.data())
            def run(data: st.DataObject) -> None:
                for n in range(batch):  # every kind in turn: none is starved
                    run_case(data.draw(cases(fx, KINDS[n % len(KINDS)])), report)
                report.unreadable.extend(fx.unreadable())

            run()
    return report


def main(argv: list[str] | None = None) -> int:
    """`python -m shmref fuzz`: every public method of `--impl` called with bad input."""
    parser = argparse.ArgumentParser(prog="python -m shmref fuzz", description=__doc__)
    parser.add_argument("--impl", default="refimpl", help="module to fuzz ('seed' for the seed)")
    parser.add_argument("--calls", type=int, default=10_240)
    parser.add_argument("--random", action="store_true", help="not derandomized (make fuzz)")
    args = parser.parse_args(argv)
    from shmref.seed.impl import load_impl

    report = fuzz(load_impl(args.impl), args.calls, seed=None if args.random else 0)
    print(report.details() if not report.ok else report.summary())
    print(f"optimized: {sys.flags.optimize}")
    return 0 if report.ok else 1
