"""The round trips a replay costs a store program (docs/protocol.md,
Capabilities: `reply.ring_state`): a program that carries its ring's state
in each reply is not asked for it after every step, and gets the same
verdict; a program that says it carries the state and carries a wrong one
is caught by the replay, a malformed one or one it did not offer is a
protocol error in one line."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import pytest

from shmref.core.paths import SPEC_DIR
from shmref.process.messages import ProtocolError, hello_problem
from shmref.seed.impl import load_impl
from shmref.traces import shipped
from shmref.traces.replay import Replayer

REPO = Path(__file__).resolve().parents[2]
SERVE = "exec:python3 -m shmref.process.serve refimpl"
BROKEN = f"python3 {REPO / 'tests' / 'programs' / 'broken_store.py'}"
TRACES = 3  # MCRing simulations replayed (a few hundred steps)


def replayed(spec: str, log: Path) -> tuple[list[bool], collections.Counter[str]]:
    """Each trace's verdict, and the requests the replay sent, by op."""
    impl = load_impl(spec)
    impl.PROGRAM.log = str(log)
    try:
        replayer = Replayer(impl, SPEC_DIR / "MCRing.cfg")
        verdicts = [replayer.replay(t).ok for t in shipped.corpus("MCRing")[:TRACES]]
    finally:
        impl.PROGRAM.log = None
    sent: collections.Counter[str] = collections.Counter()
    for line in log.read_text().splitlines():
        message = json.loads(line)["msg"]
        if message["type"] == "request":
            sent[message["op"]] += 1
    return verdicts, sent


def test_a_program_that_carries_the_state_is_not_asked_for_it(tmp_path: Path) -> None:
    carried, carried_ops = replayed(SERVE, tmp_path / "carried.jsonl")
    asked, asked_ops = replayed(f"{SERVE} --plain", tmp_path / "asked.jsonl")
    assert carried == asked == [True] * TRACES
    steps = asked_ops["allocate_buf"] + asked_ops["free_buf"]
    assert asked_ops["ring_state"] >= steps > 50  # asked after every step that calls
    # asked once per trace: after create_ring, whose reply has no object to carry
    assert carried_ops["ring_state"] == TRACES
    assert sum(carried_ops.values()) < sum(asked_ops.values()) - steps


def test_a_wrong_carried_state_is_caught_by_the_replay(tmp_path: Path) -> None:
    impl = load_impl(f"exec:{BROKEN} lying_state 1000000")
    assert "reply.ring_state" in impl.PROGRAM.capabilities
    report = Replayer(impl, SPEC_DIR / "MCRing.cfg").replay(shipped.corpus("MCRing")[0])
    assert not report.ok
    assert any("data_buffer_end" in p for s in report.replayed for p in s.problems)


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("bad_state", "a reply's ring_state has ID_MAX not an integer"),
        ("unoffered_state", "a reply needs exactly one of result or error: "),
    ],
)
def test_a_malformed_or_unoffered_state_is_a_protocol_error(mode: str, says: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        impl = load_impl(f"exec:{BROKEN} {mode} 1000000")
        ring = impl.SingleWriterShmRingBuffer(1024, create=True)
        ring.allocate_buf(8)
    text = str(caught.value)
    assert says in text and '"ring_state"' in text and "\n" not in text, text


HELLO: dict[str, Any] = {
    "type": "hello",
    "protocol": 2,
    "name": "x",
    "roles": ["writer", "reader"],
    "reader_lock": "oracle",
}
POSITIONS = [
    "ring.data_buffer_start",
    "ring.data_buffer_end",
    "ring.monotonic_id_start",
    "ring.monotonic_id_end",
]


def test_the_state_is_offered_only_with_the_positions() -> None:
    assert hello_problem({**HELLO, "capabilities": [*POSITIONS, "reply.ring_state"]}) == ""
    problem = hello_problem({**HELLO, "capabilities": [*POSITIONS[1:], "reply.ring_state"]})
    assert "reply.ring_state needs the ring's positions" in problem
    assert "ring.data_buffer_start missing" in problem
