"""Trace validation (implementation -> spec): a recorded run of the
implementation, checked by TLC against spec/ShmObjectStorage.tla through
spec/TraceShmObjectStorage.tla. The checker must accept refimpl's runs and
must be able to reject: a tampered recording, a mutant's recording."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

import refimpl
from shmref.driver import Driver
from shmref.mutants import MUTATIONS, build_mutant
from shmref.recorder import Recorder, Recording, random_workload, validate_recording

pytestmark = pytest.mark.tlc

STEPS, SEED = 300, 2  # a workload that every mutant of shmref.mutants fails


def record(impl, steps: int = STEPS, seed: int = SEED) -> Recording:
    with Driver(impl, 8, n_readers=2, id_max=5, max_obj=3) as driver:
        recorder = Recorder(driver)
        random_workload(recorder, steps, seed)
        return recorder.recording()


@pytest.fixture(scope="module")
def recording(impl) -> Recording:
    return record(impl)


def test_recording_of_the_impl_is_a_spec_behaviour(impl, recording, tmp_path):
    names = {(e["name"], e["outcome"]) for e in recording.log}
    # the workload reaches the interesting outcomes, not just puts
    # after a clear, a pending delivery is stale (seed) or rejected (refimpl's F4)
    drained = ("get_begin", "rejected" if impl.__name__ == "refimpl" else "stale")
    for wanted in [("put", "ok"), ("put", "ValueError"), ("get_end", "ok"),
                   drained, ("free_unused", "ok"), ("clear", "ok"),
                   ("get_cached", "ok"), ("get_end", "DeserializeError")]:
        assert wanted in names, f"the workload never produced {wanted}"
    recording.save(tmp_path / "run.json")
    result = validate_recording(Recording.load(tmp_path / "run.json"), out_dir=tmp_path / "tlc")
    assert result.accepted, result.explain()
    assert (tmp_path / "tlc" / "TraceRun.tla").is_file()


def first(log: list[dict], name: str, outcome: str, after: int = 10) -> int:
    return next(i for i, e in enumerate(log) if i > after and e["name"] == name
                and e["outcome"] == outcome)


def tampered_address(log: list[dict]) -> None:
    entry = log[first(log, "put", "ok")]
    key, address, chunk_id = entry["handle"]
    entry["handle"] = (key, address + 1, chunk_id)


def tampered_outcome(log: list[dict]) -> None:
    entry = log[first(log, "get_end", "ok")]
    entry["outcome"] = "stale"
    del entry["value"]


def tampered_value(log: list[dict]) -> None:
    entry = log[first(log, "get_end", "ok")]
    entry["value"] = "<foreign>"


def tampered_freed(log: list[dict]) -> None:
    index = next(i for i, e in enumerate(log) if e["name"] == "free_unused" and e.get("freed"))
    log[index]["freed"] = log[index]["freed"][:-1]


def dropped_step(log: list[dict]) -> None:
    del log[first(log, "get_cached", "ok")]


@pytest.mark.parametrize("tamper", [tampered_address, tampered_outcome, tampered_value,
                                    tampered_freed, dropped_step],
                         ids=lambda f: f.__name__)
def test_tampered_recording_is_rejected(recording, tamper, is_refimpl):
    if not is_refimpl:
        pytest.skip("tampers with refimpl's recording")
    log = copy.deepcopy(recording.log)
    tamper(log)
    result = validate_recording(Recording(recording.constants, log))
    assert not result.accepted, f"{tamper.__name__}: the checker accepted a tampered log"
    assert result.matched < len(log)


@pytest.mark.parametrize("mutant", sorted(MUTATIONS))
def test_recording_of_a_mutant_is_rejected(mutant, is_refimpl):
    if not is_refimpl:
        pytest.skip("mutants are copies of refimpl")
    result = validate_recording(record(build_mutant(mutant)))
    assert not result.accepted, f"mutant {mutant} ({MUTATIONS[mutant][3]}) was accepted"


def test_recording_roundtrips_through_json(recording, tmp_path: Path):
    recording.save(tmp_path / "r.json")
    assert Recording.load(tmp_path / "r.json") == recording


def test_ids_wrapping_under_an_in_flight_read(is_refimpl):
    """Outside A3 (an id wraps onto a handle in a read in flight, after
    clears): refimpl's get_end re-check compares the chunk's id and size,
    and so does the spec's F2 (StillOurs); the recording is accepted."""
    if not is_refimpl:
        pytest.skip("about refimpl and the spec")
    with Driver(refimpl, 8, n_readers=2, id_max=5, max_obj=3) as driver:
        recorder = Recorder(driver)
        random_workload(recorder, 300, 1, keep_a3=False)
        recording = recorder.recording()
    result = validate_recording(recording, switches={"A3": False})
    assert result.accepted, result.explain()


def test_empty_recording_is_accepted(is_refimpl):
    """The degenerate case: TLC's verdict comes from the initial state."""
    if not is_refimpl:
        pytest.skip("independent of the implementation")
    with Driver(refimpl, 4, n_readers=1, id_max=5, max_obj=2) as driver:
        assert validate_recording(Recorder(driver).recording()).accepted
