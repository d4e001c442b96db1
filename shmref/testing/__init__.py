"""Building blocks for an implementer's own tests (docs/conformance.md shows
each in use):

- `machine_for(module)`: the Hypothesis state machine of the store beside the
  pure model, built with their module (or subclass `StoreMachine`);
- `replay(trace, module)`: a TLC trace replayed step by step on their module;
- `Recorder`, `record` and `validate`: a run of their module recorded and
  checked by TLC to be a behaviour of the spec.
"""

from __future__ import annotations

import typing

from shmref.core.extras import missing_extra as _missing_extra

if (_missing := _missing_extra()) is not None:  # the toolkit is shmref[oracle]'s
    raise ImportError(_missing)

from shmref.core.paths import SPEC_DIR as _SPEC_DIR
from shmref.testing.from_trace import TraceSeededMachine
from shmref.testing.machine import StoreMachine, machine_for
from shmref.traces.recording import Recorder, Recording, random_workload
from shmref.traces.recording import record as _record_workload
from shmref.traces.replay import Replayer as _Replayer
from shmref.traces.replay import ReplayReport
from shmref.traces.tracecheck import Validation
from shmref.traces.tracecheck import validate_either as _validate_either

if typing.TYPE_CHECKING:  # only the toolkit's names are public (__all__)
    from pathlib import Path
    from types import ModuleType

    from shmref import tlc

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
    cfg = _SPEC_DIR / f"{model}.cfg"
    if not cfg.is_file():
        raise ValueError(f"unknown model {model!r}: no {cfg.name} in {_SPEC_DIR}")
    return _Replayer(impl, cfg).replay(trace, model)


def record(impl: ModuleType, steps: int = 150, seed: int = 1) -> Recording:
    """A random run of `impl` (the workload of shmref.conformance), recorded."""
    return _record_workload(impl, steps, seed)


def validate(recording: Recording, out_dir: Path | None = None) -> Validation:
    """TLC's verdict: is `recording` a behaviour of the spec (of refimpl's
    protocol, or else of the seed's), as in a conformance run?"""
    return _validate_either(recording, out_dir=out_dir)


def simulate(model: str, num: int, depth: int, seed: int) -> list[tlc.Trace]:
    """`num` TLC simulation traces of `model` of at most `depth` states (the
    same seed gives the same traces; cached by the spec's hash)."""
    from shmref.tlc.corpus import simulation_corpus

    if not (_SPEC_DIR / f"{model}.cfg").is_file():
        raise ValueError(f"unknown model {model!r}: no {model}.cfg in {_SPEC_DIR}")
    return simulation_corpus(model, num, depth, seed)
