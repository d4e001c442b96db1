"""A hazard's verdict: its model's shipped counterexamples each replayed on
the implementation (shmref.oracle.hazards), the worst result deciding, and
the command that replays them from a fresh shell."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from shmref import contract
from shmref.core.levels import ASSUMPTION, ERROR, FAIL, NOT_RUN, PASS, PROTOCOL
from shmref.oracle.hazards import Hazard, HazardReplay, StepError, replay_hazard
from shmref.oracle.verdict import Check, shell, shell_impl
from shmref.render import sink
from shmref.traces import shipped
from shmref.traces.shipped import Counterexample


def hazard_counterexamples(model: str) -> list[Counterexample]:
    """The model's counterexamples, shipped in the package (made once from the
    spec by `make spec-traces`): every machine judges a store on the same ones."""
    return shipped.counterexamples(model)


# Which result of one counterexample decides the property: the worst.
_RANK = {ERROR: 4, FAIL: 3, ASSUMPTION: 2, PASS: 1}


def hazard_check(
    name: str,
    impl: ModuleType,
    hazard: Hazard,
    counterexamples: Sequence[Counterexample],
    problem: str = "",
) -> tuple[Check, HazardReplay | None]:
    """The hazard judged on every shipped counterexample of its model: the
    worst result decides, and the detail says on how many each result came,
    so a store whose verdict depends on the counterexample shows it. The
    replay returned is the deciding one (the first of the worst)."""
    what = hazard.what
    label = f"hazard {hazard.model}"
    if hazard.serde_fails and not contract.serde_in_process(impl, hazard.serde_fails):
        detail = str(contract.MissingCapability(contract.SERDE_IN_PROCESS))
        return Check(PROTOCOL, label, what, NOT_RUN, detail=detail), None
    if not counterexamples:
        check = Check(PROTOCOL, label, what, ERROR, detail=problem or "no counterexample")
        check.failures.append({"case": hazard.model, "trace": check.detail, "command": ""})
        return check, None
    judged = []
    for counterexample in counterexamples:
        check, replay = judge(name, impl, hazard, counterexample)
        if check.status == NOT_RUN:
            return check, None  # a missing capability: the same on every counterexample
        judged.append((check, replay, counterexample))
    worst = max(_RANK.get(check.status, 0) for check, _r, _c in judged)
    deciding = [item for item in judged if _RANK.get(item[0].status, 0) == worst]
    check, replay, first = deciding[0]
    combined = Check(PROTOCOL, label, what, check.status)
    shown = len(judged)
    if shown == 1:
        combined.detail = check.detail
    elif len(deciding) == shown:
        closed = sum(1 for _c, r, _x in judged if r is not None and r.closed)
        combined.detail = f"{check.status} on all {shown} counterexamples"
        if check.status == PASS:
            combined.detail = f"closed on all {shown} counterexamples" + (
                f" ({closed} left where the fixed protocol leaves them)" if closed else ""
            )
        combined.detail += f"; {first.name}: {check.detail}"
    else:
        names = ", ".join(c.name for _k, _r, c in deciding)
        combined.detail = (
            f"{check.status} on {len(deciding)} of {shown} counterexamples ({names}); "
            f"{first.name}: {check.detail}"
        )
    for bad, drawn, counterexample in deciding:
        combined.failures += bad.failures
        if drawn is not None and drawn.timeline is not None and bad.status != PASS:
            sink.save(drawn.timeline, case_of(hazard, counterexample))  # as its failure's case
    return combined, replay


def judge(
    name: str, impl: ModuleType, hazard: Hazard, counterexample: Counterexample
) -> tuple[Check, HazardReplay | None]:
    """The hazard judged on one counterexample."""
    what = hazard.what
    label = f"hazard {hazard.model}"
    case = case_of(hazard, counterexample)
    source = counterexample.source
    command = hazard_command(name, hazard, impl)
    try:
        replay = replay_hazard(impl, hazard, counterexample.trace, counterexample.closing)
    except contract.MissingCapability as exc:
        return Check(PROTOCOL, label, what, NOT_RUN, detail=str(exc)), None
    except StepError as exc:  # an implementation crash is a failure, named by its step
        check = Check(PROTOCOL, label, what, ERROR, detail=str(exc))
        table = HazardReplay(hazard, str(exc), exc.rows).table()
        check.failures.append({"case": case, "trace": f"{exc}\n{table}", "command": command})
        return check, HazardReplay(hazard, str(exc), exc.rows, exc.timeline)
    except Exception as exc:  # building the driver (constructor, handle) failed
        check = Check(
            PROTOCOL,
            label,
            what,
            ERROR,
            detail=f"setting up the replay: {type(exc).__name__}: {exc}",
        )
        check.failures.append({"case": case, "trace": check.detail, "command": command})
        return check, None
    if replay.violation is None:
        detail = replay.closed or "closed"
        return Check(PROTOCOL, label, what, PASS, detail=detail), replay
    status = FAIL
    if not hazard.closable and hazard.expect in replay.violation:
        status = ASSUMPTION
    check = Check(PROTOCOL, label, what, status, detail=replay.violation)
    if status == ASSUMPTION:
        check.detail = "open, as for every seed-compatible implementation: " + replay.violation
    elif not hazard.closable:
        check.detail = (
            f"a violation other than the hazard's own ({hazard.expect!r}): " + replay.violation
        )
    check.failures.append(
        {
            "case": case,
            "trace": f"TLC counterexample of spec/{hazard.model}: {source}, "
            f"replayed on {name}:\n{replay.table()}",
            "command": command,
        }
    )
    return check, replay


def supplied_counterexample(model: str, path: Path) -> Counterexample:
    """A user's TLC output (`--counterexample FILE`) of the model, to judge a
    store on instead of the shipped ones; a ShippedError names the file."""
    trace, violated = shipped.read_counterexample(path)
    if any("last_action" not in state.vars for state in trace.states):
        raise shipped.ShippedError(
            f"{path}: its states have no last_action: not a counterexample of spec/{model}"
        )
    return Counterexample(model, path.name, "supplied", trace, violated, None, path.resolve())


def case_of(hazard: Hazard, counterexample: Counterexample) -> str:
    """A counterexample's failure case, as the report names it and its picture."""
    return f"{hazard.model} {counterexample.name}"


def hazard_command(name: str, hazard: Hazard, impl: ModuleType | None = None) -> str:
    return shell(
        f"python -m shmref.conformance --impl {shell_impl(name)} --hazard {hazard.model}", impl
    )
