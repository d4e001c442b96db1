"""What the oracle's children say, each kind of event declared once: a frozen
dataclass whose `kind` is its name in the stream. A child writes one JSON
line per event (`encode`: its kind in `e`, the time in `t`, its fields),
and the oracle reads each line back with `parse`, the one reader that
shmref.oracle.isolation and shmref.oracle.progress share; both dispatch
on the event's class. As pytest-xdist's workers do: one configuration in
(shmref.oracle.job), typed events out, each handled in one place.

Two children talk this way: a conformance run's worker (shmref.oracle.worker,
into workers/N.jsonl, written by its `Events.emit`) and the contract check's
(shmref.oracle.checkchild, on its stdout). `Lost` is the oracle's own: the
incident of a property whose child it lost, told to its listener beside the
children's events, never written by a child.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args

from shmref.oracle.job import Unit
from shmref.oracle.verdict import Check

CaseStatus = Literal["pass", "fail", "error", "skip"]  # a pytest test's result
KINDS: dict[str, type[Event]] = {}  # kind -> its class, filled as each is declared


@dataclass(frozen=True)
class Event:
    """One thing a child said. A subclass names its kind once
    (`class Beat(Event, kind="beat")`); two with one kind are refused."""

    kind: ClassVar[str]

    def __init_subclass__(cls, kind: str, **rest: Any) -> None:
        super().__init_subclass__(**rest)
        if kind in KINDS:
            raise TypeError(f"event kind {kind!r} is declared twice")
        cls.kind = kind
        KINDS[kind] = cls

    @classmethod
    def decode(cls, fields: dict[str, Any]) -> Event:
        """The event from its line's fields (JSON lists are tuples here)."""
        return cls(**{name: _frozen(value) for name, value in fields.items()})


def _frozen(value: Any) -> Any:
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def encode(event: Event) -> str:
    """`event` as one JSON line (without its newline)."""
    return json.dumps({"e": event.kind, "t": time.time(), **asdict(event)}, default=str)


def parse(line: str) -> Event:
    """The event `encode` wrote as `line`; ValueError for any other line."""
    try:
        data = json.loads(line)
    except ValueError:
        data = None
    if not isinstance(data, dict) or data.get("e") not in KINDS:
        raise ValueError(f"not an event: {line[:200]!r}")
    fields = {name: value for name, value in data.items() if name not in ("e", "t")}
    try:
        return KINDS[data["e"]].decode(fields)
    except (TypeError, KeyError) as exc:
        raise ValueError(f"not an event ({exc}): {line[:200]!r}") from None


# -- a conformance run's worker (shmref.oracle.worker) ---------------------------------------


@dataclass(frozen=True)
class Beat(Event, kind="beat"):
    """The child is alive and not frozen with the GIL held (its watchdog, twice a second)."""


@dataclass(frozen=True)
class Collected(Event, kind="collected"):
    """The suite's tests this child may run (the job's selection)."""

    nodes: tuple[str, ...]


@dataclass(frozen=True)
class Reserved(Event, kind="reserve"):
    """The test this child claimed to run next (shmref.oracle.shards), and its claim file:
    another child's if this one dies first."""

    node: str
    claim: str


@dataclass(frozen=True)
class Started(Event, kind="start"):
    """A test, a recording or a hazard replay starts: what dies now dies in `unit`."""

    node: str | None  # the suite's test; None for a recording or a hazard replay
    unit: Unit | None


@dataclass(frozen=True)
class CaseResult(Event, kind="case"):
    """A test's result (the worst of its phases is kept)."""

    node: str
    status: CaseStatus
    text: str

    @classmethod
    def decode(cls, fields: dict[str, Any]) -> Event:
        if fields.get("status") not in get_args(CaseStatus):
            raise TypeError(f"no test status: {fields.get('status')!r}")
        return super().decode(fields)


@dataclass(frozen=True)
class Finished(Event, kind="finish"):
    """A test is over, teardown included."""

    node: str


@dataclass(frozen=True)
class Recorded(Event, kind="recording"):
    """A recording saved at `path` (TLC validates it in the oracle), or the error
    that stopped it; `missing`: the error is a capability the store lacks."""

    path: Path
    error: str | None
    missing: bool = False

    @classmethod
    def decode(cls, fields: dict[str, Any]) -> Event:
        return cls(Path(fields["path"]), fields["error"], bool(fields.get("missing", False)))


@dataclass(frozen=True)
class HazardJudged(Event, kind="hazard"):
    """A hazard's replays judged in the child: the property's check."""

    unit: Unit
    check: Check

    @classmethod
    def decode(cls, fields: dict[str, Any]) -> Event:
        level, name = fields["unit"]
        return cls((level, name), Check(**fields["check"]))


@dataclass(frozen=True)
class CollectError(Event, kind="collect_error"):
    """A suite module that did not import."""

    text: str


@dataclass(frozen=True)
class ProgramFailed(Event, kind="program_failed"):
    """A store program broke the protocol, died or hung (shmref.process.channel):
    the running property's status, whatever the test did with the exception."""

    status: str
    detail: str


@dataclass(frozen=True)
class Stalled(Event, kind="stall"):
    """A call into the implementation has not returned within the call timeout:
    where it is stuck, and the stack."""

    detail: str
    stack: str


@dataclass(frozen=True)
class PytestExited(Event, kind="pytest_exit"):
    """pytest's exit code (for whoever reads the stream: the results came as cases)."""

    code: int


@dataclass(frozen=True)
class Spoken(Event, kind="spoken"):
    """What the child's oracle said to store programs, when it ends
    (shmref.process.lines.Traffic: requests written, round trips waited)."""

    requests: int
    round_trips: int


@dataclass(frozen=True)
class Ended(Event, kind="end"):
    """The child did all it could claim and exits normally."""


# -- the oracle's own (shmref.oracle.isolation) ----------------------------------------------


@dataclass(frozen=True)
class Lost(Event, kind="lost"):
    """A property's child died or was killed in it: the property's status
    (CRASH, TIMEOUT, or a store program's), told to the oracle's listener."""

    unit: Unit
    status: str
    node: str | None


# -- the contract check's child (shmref.oracle.checkchild) -----------------------------------


@dataclass(frozen=True)
class Loaded(Event, kind="loaded"):
    """The implementation imported (a program: started, its hello read): its
    module's name, the sys.path entry it came from, notes on its protocol version."""

    name: str
    root: str
    notes: tuple[str, ...]


@dataclass(frozen=True)
class NotLoaded(Event, kind="not_loaded"):
    """The implementation did not import, in one line: nothing to judge."""

    problem: str


@dataclass(frozen=True)
class ContractEnded(Event, kind="contract_end"):
    """The check is over: what the module lacks (`problem`), how a call or its
    program failed (`status` "" if none), what it left in /dev/shm."""

    problem: str
    status: str
    detail: str
    leaked: tuple[str, ...]
