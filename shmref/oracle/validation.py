"""The protocol checks judged here, not in the child: trace validation of the
child's recordings by TLC, and the hazard replays the child judged or lost."""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from shmref import contract, tlc
from shmref.core.levels import ERROR, FAIL, NOT_RUN, PASS, PROTOCOL
from shmref.core.paths import cache_dir
from shmref.oracle.hazards import HAZARDS
from shmref.oracle.isolation import Outcome
from shmref.oracle.job import RECORDING_UNIT
from shmref.oracle.verdict import Check, shell, shell_impl
from shmref.render import sink
from shmref.render.build import Builder
from shmref.render.traceformat import Trace as Timeline
from shmref.traces.recording import Recording
from shmref.traces.tracecheck import Validation, validate_either

# TLC's verdicts on this run's recordings made beside it, keyed by the
# recording's SHA-256 (validate_early): validation_check reads them instead
# of running TLC on the same bytes again (a rejection costs two TLC runs and
# a diagnosis: 4 s a recording, after the last test).
Verdicts = dict[str, Validation]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verdict_path(key: str) -> Path:
    """An accepted recording's verdict is kept, keyed by its bytes' SHA-256
    (`digest`; and the spec's hash): the same run of the same implementation
    is not re-checked."""
    return cache_dir("validated") / f"{key}.txt"


def keep_accepted(verdict: Path, recording: Recording, fixed: object) -> str:
    note = f"{len(recording.log)} steps accepted (FIXED={fixed})"
    verdict.write_text(note + "\n")
    return note


def validate_early(path: Path, out: Path, verdicts: Verdicts) -> None:
    """TLC checks a recording as soon as the child has written it, beside the
    rest of the run (a first run's validation no longer waits for the last
    test). Its verdict goes in `verdicts` for validation_check (an accepted
    one is also kept in the cache); a recording it cannot read or TLC
    cannot judge is left for validation_check to meet again and report."""
    try:
        recording = Recording.load(path)
        key = digest(path)
        verdict = verdict_path(key)
        if not verdict.is_file():
            result = validate_either(recording, out_dir=out / "trace" / path.stem)
            if result.accepted:
                keep_accepted(verdict, recording, result.switches["FIXED"])
            verdicts[key] = result
    except Exception:  # noqa: BLE001 - validation_check meets it again and reports it
        return


def validation_check(
    name: str,
    recordings: list[tuple[Path, Recording | Exception]],
    out: Path,
    impl: ModuleType | str | None = None,
    verdicts: Verdicts | None = None,
) -> Check:
    """`verdicts`: TLC's, made beside the run (validate_early), read
    instead of running TLC again on the same bytes."""
    what = "implementation -> spec: a recorded random run is a behaviour of the spec (TLC)"
    check = Check(PROTOCOL, "trace validation", what, PASS)
    notes = []
    for path, recording in recordings:
        command = shell(
            f"python -m shmref.conformance --validate-trace {shlex.quote(str(path.resolve()))}",
            None,
        )
        if isinstance(recording, contract.MissingCapability):
            check.status, check.detail = NOT_RUN, str(recording)
            return check
        if isinstance(recording, Exception):  # no file to validate: re-record instead
            check.status = ERROR
            check.failures.append(
                {
                    "case": path.name,
                    "command": shell(
                        f"python -m shmref.conformance --impl {shell_impl(name)} "
                        f"--level {PROTOCOL} --out "
                        f"{shlex.quote(str(out.resolve()))}",
                        impl,
                    ),
                    "trace": f"recording the run crashed: {type(recording).__name__}: {recording}",
                }
            )
            continue
        key = digest(path)
        verdict = verdict_path(key)
        if verdict.is_file():
            notes.append(verdict.read_text().strip() + " (cached verdict)")
            continue
        result = (verdicts or {}).get(key) or validate_either(
            recording, out_dir=out / "trace" / path.stem
        )
        if result.accepted:
            notes.append(keep_accepted(verdict, recording, result.switches["FIXED"]))
            continue
        check.status = FAIL
        low = max(result.matched - 8, 0)
        shown = [
            f"{i + 1:>4}  {json.dumps(e)}"
            for i, e in enumerate(recording.log[low : result.matched + 1], start=low)
        ]
        drawn = rejected_trace(recording, result.matched, result.explain())
        sink.save(drawn, path.name, out / sink.FOLDER)
        check.failures.append(
            {
                "case": path.name,
                "command": command,
                "trace": result.explain() + "\nlog (last matched entries, "
                "then the first that no enabled action matches):\n" + "\n".join(shown),
            }
        )
    check.detail = "; ".join(notes)
    return check


def rejected_trace(recording: Recording, matched: int, why: str) -> Timeline:
    """The recording up to the step no spec step matches, that step marked."""
    readers = [f"r{k + 1}" for k in range(recording.constants.get("R", 0))]
    drawn = Builder("validation", "trace validation: a recorded run", recording.constants, readers)
    for k, entry in enumerate(recording.log[: matched + 1]):
        seen = recording.observed[k + 1] if recording.observed is not None else None
        handle: Sequence[Any] = entry.get("handle") or ()
        result: Any = {
            "put": (handle[1], handle[2]) if len(handle) == 3 else None,
            "get_cached": (handle[1], handle[2]) if len(handle) == 3 else None,
            "get_end": entry.get("value"),
            "free_unused": entry.get("freed"),
        }.get(entry["name"])
        drawn.add(k + 1, entry, str(entry.get("outcome", "ok")), result, seen)
    lines = why.splitlines()
    return drawn.mark(lines[-1] if len(lines) > 1 else why)


def isolated_protocol_checks(
    name: str,
    out: Path,
    outcome: Outcome,
    protocol: bool,
    no_tlc: str,
    root: str | None,
    verdicts: Verdicts | None = None,
) -> list[Check]:
    """The hazard replays the child judged (or lost), and trace validation of
    its recordings, which TLC does here (or did beside the run: `verdicts`)."""
    if not protocol:
        return []
    checks = list(outcome.checks)
    judged = {c.name for c in checks}
    for hazard in HAZARDS:
        unit = (PROTOCOL, f"hazard {hazard.model}")
        if unit[1] not in judged:
            incident = outcome.incidents.get(unit)
            status, detail = (
                (incident.status, incident.detail) if incident else (ERROR, "no result")
            )
            checks.append(Check(PROTOCOL, unit[1], hazard.what, status, detail=detail))
    incident = outcome.incidents.get(RECORDING_UNIT)
    what = "implementation -> spec: a recorded random run is a behaviour of the spec (TLC)"
    if incident is not None:
        checks.append(
            Check(PROTOCOL, RECORDING_UNIT[1], what, incident.status, detail=incident.detail)
        )
        return checks
    if no_tlc:
        checks.append(Check(PROTOCOL, RECORDING_UNIT[1], what, NOT_RUN, detail=no_tlc))
        return checks
    recordings: list[tuple[Path, Recording | Exception]] = []
    for made in outcome.recordings:
        if made.error is None:
            recordings.append((made.path, Recording.load(made.path)))
        else:
            error = made.error
            problem = contract.MissingCapability(error) if made.missing else RuntimeError(error)
            recordings.append((made.path, problem))
    try:
        checks.append(validation_check(name, recordings, out, root, verdicts))
    except tlc.TlcError as exc:
        checks.append(Check(PROTOCOL, RECORDING_UNIT[1], what, ERROR, detail=str(exc)))
    return checks
