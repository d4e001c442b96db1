"""Trace validation (implementation -> spec): check with TLC that a
recording is a behaviour of spec/ShmObjectStorage.tla, and say why not.

`validate_recording` writes the log (and, if recorded, the observed states)
as a TLA+ module extending spec/TraceShmObjectStorage.tla and runs TLC on
it: the log is accepted iff some behaviour of the spec takes the logged
actions, with the logged arguments, ends every step with the logged
outcome and shows the observed variables. A rejection is explained: a
second TLC run replays the matched prefix, then the failing call with its
results left open, which yields every result the spec allows there; the
nearest is compared field by field (the step, the field or variable, and
the values on both sides).

A recording is plain JSON, in ITF (`Recording.save_itf`, docs/itf.md) or the
older `{"constants", "log"}` form (`Recording.save`); `Recording.load` reads
both, so an implementation in another language can write one and have it
checked: `python -m shmref itf validate FILE`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shmref import tlc
from shmref.traces.explain import explain_step
from shmref.traces.recording import Recording
from shmref.traces.tlamodule import DEFAULT_SWITCHES, run_log

# -- TLA+ -------------------------------------------------------------------------


@dataclass
class Validation:
    """The verdict of TLC on one recording."""

    accepted: bool
    matched: int  # entries matched by the longest behaviour found
    total: int
    switches: dict[str, Any]
    first_unmatched: dict[str, Any] | None
    run: tlc.TlcRun
    directory: Path | None
    diagnosis: str | None = None  # rejected: which field no spec step could match

    def explain(self) -> str:
        if self.accepted:
            return (
                f"accepted: all {self.total} log entries are a behaviour of "
                f"ShmObjectStorage ({_switch_text(self.switches)})"
            )
        text = (
            f"REJECTED: entries 1..{self.matched} of {self.total} match a behaviour of "
            f"ShmObjectStorage ({_switch_text(self.switches)}), entry {self.matched + 1} "
            f"matches no enabled action: {self.first_unmatched}"
        )
        return text + (f"\n{self.diagnosis}" if self.diagnosis else "")


def _switch_text(switches: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in switches.items())


def validate_recording(
    recording: Recording,
    *,
    switches: dict[str, Any] | None = None,
    out_dir: Path | None = None,
    timeout: float = 300,
    diagnose: bool = True,
) -> Validation:
    """Run TLC on TraceShmObjectStorage with this log. `out_dir` keeps the
    generated module, cfg and TLC output (default: a temporary folder).
    A rejection is diagnosed (one more TLC run) unless `diagnose` is False."""
    chosen = {**DEFAULT_SWITCHES, **(switches or {})}
    run = run_log(recording, chosen, out_dir, timeout)
    folder = Path(out_dir) if out_dir is not None else None
    total = len(recording.log)
    if run.outcome == "invariant" and run.violated == "TraceIncomplete":
        return Validation(True, total, total, chosen, None, run, folder)
    if run.outcome == "ok" and run.depth is not None:
        matched = max(run.depth - 1, 0)
        entry = recording.log[matched] if matched < total else None
        text = None
        if diagnose and entry is not None:
            text = explain_step(
                recording, matched, chosen, timeout, folder / "diagnosis" if folder else None
            )
        return Validation(False, matched, total, chosen, entry, run, folder, text)
    raise tlc.TlcError(f"trace validation: unexpected TLC result: {run.summary()}")


def validate_either(
    recording: Recording, *, out_dir: Path | None = None, timeout: float = 300
) -> Validation:
    """Accepted by the spec of refimpl's protocol (FIXED) or by the seed's;
    a rejection is diagnosed against the one that matched more steps."""
    folder = Path(out_dir) if out_dir is not None else None
    tries = []
    for fixed in (True, False):
        result = validate_recording(
            recording,
            switches={"FIXED": fixed},
            timeout=timeout,
            out_dir=folder / f"fixed-{fixed}" if folder else None,
            diagnose=False,
        )
        if result.accepted:
            return result
        tries.append(result)
    best = max(tries, key=lambda r: r.matched)
    if best.first_unmatched is not None:
        best.diagnosis = explain_step(
            recording,
            best.matched,
            best.switches,
            timeout,
            best.directory / "diagnosis" if best.directory else None,
        )
    return best


# -- why a step matched nothing ------------------------------------------------------
