"""The bench request (docs/protocol.md, "The bench request"; shmref.process.benchcheck):
a program runs the put+get loop at its own pace, and reference readers in
another process check every object it reported, so that a program that
claims work it did not do (tests/programs/lying_store.py) is caught, one
line naming what does not check, and leaves nothing in /dev/shm. Timings
are never asserted: the bench measures (`make bench`), tests check."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from shmref.oracle.shmclean import orphans
from shmref.process import SCHEMA_PATH
from shmref.process.benchcheck import CAPABILITY, Checkers, UncheckedWork, own_pace
from shmref.process.benchloop import MODULUS, key_of, pattern, value_of
from shmref.process.channel import Program
from shmref.process.segments import names as shm_names

REPO = Path(__file__).resolve().parents[2]
LYING = REPO / "tests" / "programs" / "lying_store.py"
SERVE = [sys.executable, "-m", "shmref.process.serve"]


@pytest.fixture(scope="module")
def checkers() -> Iterator[Checkers]:
    found = Checkers(1)
    yield found
    found.close()


def started(argv: list[str], log: Path | None = None) -> Program:
    return Program(argv, f"exec:{' '.join(argv[-2:])}", log=str(log) if log else None)


def test_values_are_the_index_plus_the_position_mod_251() -> None:
    made = pattern(300)
    assert bytes(value_of(made, 0, 4)) == bytes([0, 1, 2, 3])
    assert bytes(value_of(made, 250, 3)) == bytes([250, 0, 1])
    assert bytes(value_of(made, MODULUS + 7, 300)) == bytes((7 + j) % 251 for j in range(300))
    assert key_of("b.3.", 12) == "b.3.12"


@pytest.mark.parametrize("impl", ["refimpl", "seed"])
def test_a_python_store_answers_and_its_work_checks(
    impl: str, checkers: Checkers, tmp_path: Path
) -> None:
    """serve's loop on refimpl and on the seed (bench.serveseed, the bench's contender):
    every object is there, counted, signed, with its bytes; every message of
    the conversation follows the schema."""
    before = shm_names()
    log = tmp_path / "protocol.jsonl"
    argv = [*SERVE, impl] if impl == "refimpl" else [sys.executable, "-m", "bench.serveseed"]
    program = started(argv, log)
    try:
        assert CAPABILITY in program.capabilities
        for size, count in ((1, 3), (64, 300), (5000, 20)):
            done = own_pace(program, size, count, checkers, f"t{size}.")
            assert (done.count, done.size) == (count, size)
            assert 0 < done.seconds <= done.round_trip
    finally:
        program.close()
    assert orphans(before, settle=2.0) == []
    schema = json.loads(SCHEMA_PATH.read_text())
    whole = jsonschema.Draft202012Validator(schema)
    only = {k: v for k, v in schema.items() if k != "oneOf"}
    result = jsonschema.Draft202012Validator({**only, "$ref": "#/$defs/results/bench"})
    benches = 0
    for line in log.read_text().splitlines():
        message: dict[str, Any] = json.loads(line)["msg"]
        whole.validate(message)
        if message["type"] == "reply" and isinstance(message.get("result"), dict):
            if "seconds" in message["result"]:
                result.validate(message["result"])
                benches += 1
    assert benches == 3


LIES = {
    "none": "'t.0': get(0, 0): ValueError: Invalid SHM handle signature",  # made up
    "short": "one monotonic id to several puts",
    "phantom": "'t.19'",  # the made-up last one does not check
    "bytes": "'t.10': other bytes",
    "stale": "'t.0'",  # the cleared storage's first chunk is another object now
    "uncounted": "read count 0, its own get did not count it",
    "clock": "says 3600 s, more than the request took",
    "few": "has 19 handles for 20 puts",
}


@pytest.mark.parametrize("mode", sorted(LIES))
def test_a_program_that_claims_work_it_did_not_do_is_caught(mode: str, checkers: Checkers) -> None:
    before = shm_names()
    program = started([sys.executable, str(LYING), mode])
    try:
        with pytest.raises(UncheckedWork) as caught:
            own_pace(program, 64, 20, checkers, "t.")
    finally:
        program.close()
    text = str(caught.value)
    assert LIES[mode] in text and "\n" not in text, text
    assert orphans(before, settle=2.0) == []


def test_an_honest_run_of_the_lying_program_is_not_a_lie(checkers: Checkers) -> None:
    """The broken inputs' control: serve's own loop in the same program
    (its base class) checks, so each lie above is what is caught."""
    program = started([*SERVE, "refimpl"])
    try:
        own_pace(program, 64, 20, checkers, "t.")
    finally:
        program.close()


def test_a_bad_bench_request_is_an_error_reply() -> None:
    program = started([*SERVE, "refimpl"])
    try:
        made = program.request("create_ring", data_buffer_size=4096, name=None, create=True)
        storage = program.request(
            "create", ring=made["ring"], max_object_size=100, n_readers=1, reader_lock=False
        )["storage"]
        with pytest.raises(ValueError, match="both must be >= 1"):
            program.request("bench", storage, prefix="p", count=0, size=8, metadata="")
        with pytest.raises(ValueError, match="prefix"):
            program.request("bench", storage, prefix=3, count=1, size=8, metadata="")
        program.request("close", made["ring"])
    finally:
        program.close()
