"""What the oracle tells a child of a conformance run (shmref.oracle.worker):
one frozen `Job`, written as JSON by `write_job` and read back by
`read_job`, the only pair that knows its file. A child that dies is
replaced by one whose job is the same but for what is already done
(`dataclasses.replace` in shmref.oracle.isolation): a job is never changed
in place, so every child's job file says exactly what that child was told.

The implementation under test crosses into the child only here, as an
`ImplRef`: resolved once, in the oracle, from the contract check's answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shmref.core.levels import PROTOCOL
from shmref.process import has_programs
from shmref.seed.aliases import alias_of, is_seed

Unit = tuple[str, str]  # a property: (level, name), as the report's rows
RECORDING_UNIT: Unit = (PROTOCOL, "trace validation")  # what the recordings are judged as


def hazard_unit(model: str) -> Unit:
    """The property a hazard's replays are judged as."""
    return (PROTOCOL, f"hazard {model}")


@dataclass(frozen=True)
class ImplRef:
    """The implementation under test, in its two spellings: `name`, the
    module's own name (what the report says, e.g. shmref_seed), and `arg`,
    what loads it (shmref.seed.impl.load_impl, `--shmref-impl`: "seed")."""

    name: str
    arg: str

    @classmethod
    def of(cls, name: str) -> ImplRef:
        """The reference to module `name`, as the contract check found it."""
        return cls(name, alias_of(name))

    @property
    def is_seed(self) -> bool:
        """The seed's own code (its run is its own baseline)."""
        return is_seed(self.name)

    @property
    def has_programs(self) -> bool:
        """Its stores are programs (shmref.process): their orphans are swept."""
        return has_programs(self.arg)


@dataclass(frozen=True)
class RecordingTask:
    """One recording to make: `steps` random calls from `seed`, saved at `path`."""

    path: Path
    steps: int
    seed: int


@dataclass(frozen=True)
class Job:
    """A child's whole instruction: what to judge and how, and what earlier
    children already finished (`skip_nodes`) or lost (`skip_units`)."""

    impl: ImplRef
    out: Path  # the report folder
    profile: str  # the Hypothesis profile (shmref.session.profiles)
    levels: tuple[str, ...]
    groups: tuple[str, ...]  # the suite's groups to run (shmref.oracle.testgroups labels)
    recordings: tuple[RecordingTask, ...]
    hazards: tuple[str, ...]  # the hazard models to replay
    counterexample: Path | None  # a user's TLC output, replayed instead of the shipped ones
    shrink_budget: int  # examples each failing test may try while shrinking (0: none)
    call_timeout: float  # seconds one call into the implementation may take
    skip_nodes: tuple[str, ...] = ()
    skip_units: tuple[Unit, ...] = ()
    nodes: tuple[str, ...] | None = None  # only these suite tests (the shrinking pass)
    save_examples: Path | None = None  # the first pass: failing examples saved, unshrunk
    replay_examples: Path | None = None  # the shrinking pass: those examples replayed

    @property
    def claims(self) -> Path:
        """Where the children claim the tests they run (shmref.oracle.shards)."""
        return self.out / "workers" / "claims"


def write_job(job: Job, path: Path) -> None:
    """`job` as the JSON file a child reads (`read_job`)."""
    data: dict[str, Any] = {
        "impl": {"name": job.impl.name, "arg": job.impl.arg},
        "out": str(job.out),
        "profile": job.profile,
        "levels": list(job.levels),
        "groups": list(job.groups),
        "recordings": [
            {"path": str(r.path), "steps": r.steps, "seed": r.seed} for r in job.recordings
        ],
        "hazards": list(job.hazards),
        "counterexample": str(job.counterexample) if job.counterexample else None,
        "shrink_budget": job.shrink_budget,
        "call_timeout": job.call_timeout,
        "skip_nodes": list(job.skip_nodes),
        "skip_units": [list(unit) for unit in job.skip_units],
        "nodes": None if job.nodes is None else list(job.nodes),
        "save_examples": str(job.save_examples) if job.save_examples else None,
        "replay_examples": str(job.replay_examples) if job.replay_examples else None,
    }
    path.write_text(json.dumps(data, indent=1))


def read_job(path: Path) -> Job:
    """The job `write_job` wrote at `path`."""
    data = json.loads(path.read_text())
    return Job(
        impl=ImplRef(data["impl"]["name"], data["impl"]["arg"]),
        out=Path(data["out"]),
        profile=data["profile"],
        levels=tuple(data["levels"]),
        groups=tuple(data["groups"]),
        recordings=tuple(
            RecordingTask(Path(r["path"]), int(r["steps"]), int(r["seed"]))
            for r in data["recordings"]
        ),
        hazards=tuple(data["hazards"]),
        counterexample=Path(data["counterexample"]) if data["counterexample"] else None,
        shrink_budget=int(data["shrink_budget"]),
        call_timeout=float(data["call_timeout"]),
        skip_nodes=tuple(data["skip_nodes"]),
        skip_units=tuple((level, name) for level, name in data["skip_units"]),
        nodes=None if data["nodes"] is None else tuple(data["nodes"]),
        save_examples=Path(data["save_examples"]) if data["save_examples"] else None,
        replay_examples=Path(data["replay_examples"]) if data["replay_examples"] else None,
    )
