"""The oracle's conversation with its children, in its smallest proofs: a
job read back is the job written (shmref.oracle.job), every kind of event
read back is the event written (shmref.oracle.events), a line that is no
event is refused, and the implementation's spellings resolve to one
ImplRef. That the children are run and heard with them is
tests/oracle/test_isolation.py's; that the progress lines come out of
them, tests/oracle/test_runner.py's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from shmref.core.levels import HARDENED, PROTOCOL
from shmref.oracle.events import (
    KINDS,
    Beat,
    CaseResult,
    Collected,
    CollectError,
    ContractEnded,
    Ended,
    Event,
    Finished,
    HazardJudged,
    Loaded,
    Lost,
    NotLoaded,
    ProgramFailed,
    PytestExited,
    Recorded,
    Reserved,
    Spoken,
    Stalled,
    Started,
    encode,
    parse,
)
from shmref.oracle.job import (
    RECORDING_UNIT,
    ImplRef,
    Job,
    RecordingTask,
    hazard_unit,
    read_job,
    write_job,
)
from shmref.oracle.verdict import Check

NODE = "test_ring.py::TestBadInput::test_bad_addresses"
UNIT = (HARDENED, "test_ring.py::TestBadInput")
EVERY_KIND: list[Event] = [
    Beat(),
    Collected((NODE, "test_ring.py::test_a")),
    Reserved(NODE, "/tmp/claims/abc"),
    Started(NODE, UNIT),
    Started(None, RECORDING_UNIT),
    CaseResult(NODE, "fail", "E   assert 1 == 2"),
    Finished(NODE),
    Recorded(Path("/tmp/recording-1.json"), None),
    Recorded(Path("/tmp/recording-2.json"), "MissingCapability: ring.ID_MAX", True),
    HazardJudged(
        hazard_unit("MCX"),
        Check(PROTOCOL, "hazard MCX", "what", "FAIL", detail="d", failures=[{"case": "c"}]),
    ),
    CollectError("test_ring.py: ImportError"),
    ProgramFailed("ERROR", "shmref.process: ERROR: exec:bad: a line that is not JSON"),
    Stalled("a call into the implementation did not return within 10 s", "  File ...\n"),
    PytestExited(1),
    Spoken(448_733, 167_463),
    Ended(),
    Lost(UNIT, "CRASH", NODE),
    Loaded("shmref_seed", "", ("an older protocol version",)),
    NotLoaded("mod: does not import: ImportError: no"),
    ContractEnded("", "ERROR", "ValueError: bad", ("psm_1",)),
]


def test_every_kind_read_back_is_the_event_written() -> None:
    assert {event.kind for event in EVERY_KIND} == set(KINDS)
    for event in EVERY_KIND:
        line = encode(event)
        assert "\n" not in line and line.startswith('{"e": "' + event.kind + '"')
        assert parse(line) == event


@pytest.mark.parametrize(
    "line",
    [
        "hello",
        "[1, 2]",
        '{"e": "nothing"}',
        '{"loaded": "refimpl"}',  # the contract check's child before its events
        '{"e": "case", "node": "t", "status": "maybe", "text": ""}',
        '{"e": "finish"}',
        '{"e": "beat", "node": "t"}',
    ],
)
def test_a_line_that_is_no_event_is_refused(line: str) -> None:
    with pytest.raises(ValueError, match="not an event"):
        parse(line)


def test_a_job_read_back_is_the_job_written(tmp_path: Path) -> None:
    job = Job(
        impl=ImplRef.of("shmref_seed"),
        out=tmp_path,
        profile="shmref-quick",
        levels=(HARDENED, PROTOCOL),
        groups=("test_ring.py::TestBadInput",),
        recordings=(RecordingTask(tmp_path / "recording-1.json", 150, 1),),
        hazards=("MCX",),
        counterexample=None,
        shrink_budget=10.0,
        call_timeout=10.0,
    )
    successor = replace(job, skip_nodes=(NODE,), skip_units=(UNIT,), recordings=())
    for told in (job, successor, replace(job, counterexample=tmp_path / "tlc.out")):
        write_job(told, tmp_path / "1.json")
        assert read_job(tmp_path / "1.json") == told
    assert job.skip_nodes == () and job.recordings  # a successor never changes its model
    assert job.claims == tmp_path / "workers" / "claims"


def test_the_implementations_spellings_resolve_to_one_reference() -> None:
    seed = ImplRef.of("shmref_seed")
    assert (seed.name, seed.arg, seed.is_seed, seed.has_programs) == (
        "shmref_seed",
        "seed",
        True,
        False,
    )
    program = ImplRef.of("exec:./store --fast")
    assert (program.arg, program.is_seed, program.has_programs) == (
        "exec:./store --fast",
        False,
        True,
    )
    assert ImplRef.of("refimpl") == ImplRef("refimpl", "refimpl")
