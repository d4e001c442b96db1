"""Building blocks for an implementer's own tests (docs/conformance.md shows
each in use):

- `machine_for(module)`: the Hypothesis state machine of the store beside the
  pure model, built with their module (or subclass `StoreMachine`);
- `replay(trace, module)`: a TLC trace replayed step by step on their module;
- `Recorder`, `record` and `validate`: a run of their module recorded and
  checked by TLC to be a behaviour of the spec.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from shmref.core.extras import missing_extra

if (_missing := missing_extra()) is not None:  # the toolkit is shmref[oracle]'s
    raise ImportError(_missing)

from shmref import tlc
from shmref.core.paths import SPEC_DIR
from shmref.testing.machine import StoreMachine, machine_for
from shmref.testing.seeded import TraceSeededMachine
from shmref.traces.recorder import (
    Recorder,
    Recording,
    Validation,
    random_workload,
    validate_either,
)
from shmref.traces.recorder import record as record_workload
from shmref.traces.replay import Replayer, ReplayReport

__all__ = [
    "Recorder",
    "Recording",
    "ReplayReport",
    "StoreMachine",
    "TraceSeededMachine",
    "Validation",
    "machine_for",
    "random_workload",
    "record",
    "replay",
    "simulate",
    "validate",
]


def replay(trace: tlc.Trace, impl: ModuleType, model: str = "MCStorage") -> ReplayReport:
    """Replay a TLC trace of `model` (its constants from spec/MODEL.cfg) on
    `impl`; `.ok` says whether every step matched, `.table()` shows them."""
    cfg = SPEC_DIR / f"{model}.cfg"
    if not cfg.is_file():
        raise ValueError(f"unknown model {model!r}: no {cfg.name} in {SPEC_DIR}")
    return Replayer(impl, cfg).replay(trace, model)


def record(impl: ModuleType, steps: int = 150, seed: int = 1) -> Recording:
    """A random run of `impl` (the workload of shmref.conformance), recorded."""
    return record_workload(impl, steps, seed)


def validate(recording: Recording, out_dir: Path | None = None) -> Validation:
    """TLC's verdict: is `recording` a behaviour of the spec (of refimpl's
    protocol, or else of the seed's), as in a conformance run?"""
    return validate_either(recording, out_dir=out_dir)


def simulate(model: str, num: int, depth: int, seed: int) -> list[tlc.Trace]:
    """`num` TLC simulation traces of `model` of at most `depth` states (the
    same seed gives the same traces; cached by the spec's hash)."""
    from shmref.tlc.corpus import simulation_corpus

    if not (SPEC_DIR / f"{model}.cfg").is_file():
        raise ValueError(f"unknown model {model!r}: no {model}.cfg in {SPEC_DIR}")
    return simulation_corpus(model, num, depth, seed)
