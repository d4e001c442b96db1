"""The round trips a replay costs a store program (docs/protocol.md,
Capabilities: `reply.ring_state`, `request.pipeline`, `request.free_ids`).

A program that carries its ring's state in each reply is not asked for it
after every step; one that takes requests ahead gets a ring trace's calls a
window at a time; one that takes free_buf's ids is asked nothing about each
chunk: the same verdicts in a few writes instead of a round trip a step.
And each can fail: a wrong state is caught by the replay, a malformed one or
one not offered is a protocol error in one line, a reply sent ahead without
its state too, a program that ignores the ids diverges, and what a program
does with requests the replay sent ahead and never asked for (it stopped at
a divergence), a crash included, is nobody's.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from shmref.core.paths import SPEC_DIR
from shmref.process import SCHEMA_PATH, channel
from shmref.process.ahead import AheadMismatch
from shmref.process.lines import TRAFFIC, Lines
from shmref.process.messages import ProgramFailure, ProtocolError, hello_problem
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
    # never asked: even create_ring's reply carries the new ring's state
    assert carried_ops["ring_state"] == 0
    assert sum(carried_ops.values()) < sum(asked_ops.values()) - steps


def test_a_constructor_that_carries_no_state_is_asked_for_it(tmp_path: Path) -> None:
    """A program whose constructors' replies carry no ring_state (as before
    they could) is asked `ring_state` once per trace, after create_ring,
    and gets the same verdicts."""
    verdicts, ops = replayed(f"exec:{BROKEN} quiet_constructors 0", tmp_path / "quiet.jsonl")
    assert verdicts == [True] * TRACES
    assert ops["ring_state"] == TRACES


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


def test_the_calls_go_ahead_only_with_the_ring_state() -> None:
    offered = [*POSITIONS, "reply.ring_state", "request.pipeline", "request.free_ids"]
    assert hello_problem({**HELLO, "capabilities": offered}) == ""
    problem = hello_problem({**HELLO, "capabilities": [*POSITIONS, "request.pipeline"]})
    assert "request.pipeline needs reply.ring_state" in problem


def writes_of(impl: Any) -> list[int]:
    """Counts each write to the program's stdin (a list: the count at [0])."""
    prog, count = impl.PROGRAM, [0]
    write = prog.write

    def counted(*args: Any) -> None:
        count[0] += 1
        write(*args)

    prog.write = counted
    return count


def test_a_ring_trace_goes_ahead_in_a_few_writes_with_the_same_verdicts(tmp_path: Path) -> None:
    traces = shipped.corpus("MCRing")[:20]
    verdicts, writes, logs = {}, {}, {}
    for spec in (SERVE, f"{SERVE} --plain"):
        impl = load_impl(spec)
        count = writes_of(impl)
        impl.PROGRAM.log = logs[spec] = str(tmp_path / f"{len(logs)}.jsonl")
        try:
            replayer = Replayer(impl, SPEC_DIR / "MCRing.cfg")
            verdicts[spec] = [replayer.replay(t).table() for t in traces]
        finally:
            impl.PROGRAM.log = None
            del impl.PROGRAM.write
        writes[spec] = count[0]
    assert verdicts[SERVE] == verdicts[f"{SERVE} --plain"]
    assert all("all steps match" in table for table in verdicts[SERVE])
    steps = sum(len(t.states) - 1 for t in traces)
    assert writes[f"{SERVE} --plain"] > steps  # a request (and an answer) a time
    assert writes[SERVE] < steps / 5  # a window a write, and the ring made and closed
    sent = [json.loads(line)["msg"] for line in Path(logs[SERVE]).read_text().splitlines()]
    schema = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))
    for message in sent:  # free_ids, ring states: every message as the schema says
        schema.validate(message)
    assert not [m for m in sent if m["type"] in ("callback", "answer")]  # free_ids: asked nothing
    assert [m for m in sent if m.get("op") == "free_buf" and "free_ids" in m]


def test_a_divergence_drops_what_was_sent_ahead() -> None:
    impl = load_impl(f"exec:{BROKEN} lying_state 1000000")
    replayer = Replayer(impl, SPEC_DIR / "MCRing.cfg")
    report = replayer.replay(shipped.corpus("MCRing")[1])
    assert len(report.replayed) == 1 and not report.ok  # its first step: the rest was sent ahead
    prog = impl.PROGRAM
    assert not prog.ahead and not prog.dead
    ring = impl.SingleWriterShmRingBuffer(1024, create=True)  # the same copy goes on
    try:
        assert ring.allocate_buf(40) == (0, 0)
        assert impl.PROGRAM is prog
    finally:
        ring.close()


def test_a_crash_on_a_request_nobody_asked_for_is_nobodys() -> None:
    """It lies at its first step (the replay diverges there) and aborts at its
    first allocate_buf, a step the replay never takes: one at a time, it was
    never sent. Sent ahead, its crash is not the property's: the copy is
    stopped quietly, and the next request starts another."""
    spec = f"exec:{BROKEN} lie_then_abort 1"
    impl = load_impl(spec)
    prog = impl.PROGRAM
    report = Replayer(impl, SPEC_DIR / "MCRing.cfg").replay(shipped.corpus("MCRing")[1])
    assert len(report.replayed) == 1 and not report.ok, report.table()
    assert prog.dead and prog.stopped_quietly and prog.failure is None and not prog.removed
    assert prog not in [p for p in channel._PROGRAMS.values() if p.failure is not None]
    ring = impl.SingleWriterShmRingBuffer(1024, create=True)  # another copy
    try:
        assert ring._prog is not prog and not ring._prog.dead
    finally:
        ring.close()


def test_a_reply_sent_ahead_without_its_state_is_a_protocol_error() -> None:
    impl = load_impl(f"exec:{BROKEN} stateless 1000000")
    with pytest.raises(ProgramFailure, match=r"request \d+, sent ahead \(request.pipeline\), carr"):
        Replayer(impl, SPEC_DIR / "MCRing.cfg").replay(shipped.corpus("MCRing")[1])


def test_a_program_that_keeps_what_free_ids_name_diverges() -> None:
    impl = load_impl(f"exec:{BROKEN} keeps_free_ids 1000000")
    reports = [Replayer(impl, SPEC_DIR / "MCRing.cfg").replay(t) for t in shipped.corpus("MCRing")]
    problems = [p for r in reports for s in r.replayed for p in s.problems]
    assert any(p.startswith("freed ids []") for p in problems), problems[:3]


def test_another_call_than_the_one_sent_ahead_is_the_oracles_mistake() -> None:
    impl = load_impl(SERVE)
    ring = impl.SingleWriterShmRingBuffer(1024, create=True)
    try:
        assert ring.shmref_send_ahead([("allocate_buf", {"size": 8}), ("clear", {})]) == 2
        assert ring.allocate_buf(8) == (0, 0)  # the first sent ahead
        with pytest.raises(AheadMismatch, match="asked for allocate_buf .* while clear"):
            ring.allocate_buf(8)
        ring.shmref_drop_ahead()  # the clear, dropped (the program made it: ids go on)
        assert ring.allocate_buf(8) == (0, 1)
    finally:
        ring.close()


def test_an_observation_asks_is_cached_of_every_key_in_one_write() -> None:
    from shmref.store.driver import Driver

    seen, writes = {}, {}
    for spec in (SERVE, f"{SERVE} --plain"):
        impl = load_impl(spec)
        with Driver(impl, 8, n_readers=0, max_obj=2) as driver:
            for key in ("a", "b", "c", "d", "e"):
                assert driver.put(key, 2).status == "ok"  # e reclaims a and b
            count = writes_of(impl)
            try:
                seen[spec] = driver.observe()
            finally:
                del impl.PROGRAM.write
            writes[spec] = count[0]
    assert seen[SERVE] == seen[f"{SERVE} --plain"]
    assert sorted(seen[SERVE]["key_index"]) == ["c", "d", "e"]
    # plain: ring_state, then is_cached of each key placed; else those, in one write
    assert (writes[SERVE], writes[f"{SERVE} --plain"]) == (1, 6)


def test_a_finalizers_close_waits_for_the_requests_sent_ahead() -> None:
    """The garbage collector may close a dropped ring (its finalizer) at any
    allocation, in the middle of writing requests ahead too: that close is
    sent once their replies are read, never between them (it would take an
    id, or a reply, that is theirs)."""
    impl = load_impl(SERVE)
    prog = impl.PROGRAM
    ring = impl.SingleWriterShmRingBuffer(1024, create=True)
    dropped = impl.SingleWriterShmRingBuffer(1024, create=True)
    dropped._closed = True  # its finalizer's close is the one below
    record = prog.record

    def collector_runs(direction: str, message: Any) -> None:
        if message.get("op") == "allocate_buf" and not prog.deferred:
            prog.close_later(dropped._id)
        record(direction, message)

    prog.record = collector_runs
    try:
        assert ring.shmref_send_ahead([("allocate_buf", {"size": 8})] * 2) == 2
        assert prog.deferred == [dropped._id]
        assert [ring.allocate_buf(8), ring.allocate_buf(8)] == [(0, 0), (16, 1)]
        assert prog.deferred == []  # sent now, after both replies
    finally:
        del prog.record
        ring.close()


def test_a_programs_ring_gives_its_four_positions_in_one_call() -> None:
    """POSITIONS_HOOK gives what reading each position gives; a ring whose
    hook raises (the broken input) is read one position at a time."""
    from shmref.contract import POSITIONS_HOOK, RING_POSITIONS
    from shmref.store.driver import Driver

    impl = load_impl(SERVE)
    ring = impl.SingleWriterShmRingBuffer(1024, create=True)
    try:
        ring.allocate_buf(40)
        each = {name: getattr(ring, name) for name in RING_POSITIONS}
        assert each["data_buffer_end"] > 0
        assert getattr(ring, POSITIONS_HOOK)() == each == Driver._positions(ring)
    finally:
        ring.close()

    class Raising:
        data_buffer_start, data_buffer_end, monotonic_id_start, monotonic_id_end = 0, 48, 0, 1

        def shmref_positions(self) -> dict[str, int]:
            raise RuntimeError("no state")

    assert Driver._positions(Raising()) == dict(zip(RING_POSITIONS, (0, 48, 0, 1), strict=True))


def test_the_observation_after_a_rules_last_step_goes_behind_it(tmp_path: Path) -> None:
    """A state-machine rule's last step (one request) is followed by the
    invariants' observation: its is_cached requests are written behind the
    step's, before the step's reply is read, and the state observed is the
    same as one request at a time."""
    from shmref.store.driver import Driver

    seen, logs = {}, {}
    for spec in (SERVE, f"{SERVE} --plain"):
        impl = load_impl(spec)
        with Driver(impl, 8, n_readers=0, max_obj=2) as driver:
            for key in ("a", "b", "c", "d", "e"):
                assert driver.put(key, 2).status == "ok"
            impl.PROGRAM.log = logs[spec] = str(tmp_path / f"{len(logs)}.jsonl")
            try:
                with driver.observed_after("touch"):
                    assert driver.touch("e").status == "ok"
                seen[spec] = driver.observe()
            finally:
                impl.PROGRAM.log = None
    assert seen[SERVE] == seen[f"{SERVE} --plain"]
    lines = [json.loads(line) for line in Path(logs[SERVE]).read_text().splitlines()]
    order = [(m["dir"], m["msg"].get("op", m["msg"]["type"])) for m in lines]
    # the touch, the five is_cached behind it, then the six replies
    assert order == [("out", "touch")] + [("out", "is_cached")] * 5 + [("in", "reply")] * 6


def test_an_observation_written_behind_a_step_is_exact_or_dropped() -> None:
    """The broken inputs: a step that ends its test (nobody observes: the
    driver's close drops the replies), a step that makes no request (what
    was named is forgotten), and a step of two requests (two free_unused),
    which is the oracle's mistake, named."""
    from shmref.store.driver import Driver

    impl = load_impl(SERVE)
    prog = impl.PROGRAM
    with Driver(impl, 8, n_readers=0, max_obj=2) as driver:
        assert driver.put("a", 2).status == "ok"
        with driver.observed_after("touch"):
            pass  # no request: nothing written, nothing left named
        with driver.observed_after("allocate_buf"):  # not one of OBSERVED_BEHIND
            assert prog.after_next is None
        with driver.observed_after("put"):
            assert driver.put("b", 2).status == "ok"  # put, then get_signature: behind it
        assert [q.op for q in prog.ahead.queued] == ["is_cached"] * 2  # b's too
        assert sorted(driver.observe()["key_index"]) == ["a", "b"]
        assert prog.after_next is None and not prog.ahead
        with driver.observed_after("free_unused"):
            assert driver.free_unused().status == "ok"
        assert prog.ahead  # the observation, waiting to be asked for
    assert not prog.ahead and not prog.dead  # dropped by the driver's close
    with Driver(impl, 8, n_readers=0, max_obj=2) as driver:
        assert driver.put("a", 2).status == "ok"
        with pytest.raises(AheadMismatch, match="asked for free_unused .* while is_cached"):
            with driver.observed_after("free_unused"):
                driver.free_unused()
                driver.free_unused()
    assert not prog.ahead and not prog.dead


def test_a_finalizers_close_before_the_step_does_not_take_its_observation() -> None:
    """The garbage collector may close a dropped ring between naming the
    observation and the step's request: that close goes alone, and the
    observation goes behind the step (a close that took it left the step
    asking while is_cached waited: AheadMismatch)."""
    from shmref.store.driver import Driver

    impl = load_impl(SERVE)
    prog = impl.PROGRAM
    dropped = impl.SingleWriterShmRingBuffer(1024, create=True)
    dropped._closed = True  # its finalizer's close is the one below
    with Driver(impl, 8, n_readers=0, max_obj=2) as driver:
        assert driver.put("a", 2).status == "ok"
        with driver.observed_after("touch"):
            prog.close_later(dropped._id)  # sent now: nothing in flight
            assert prog.after_next is not None and not prog.ahead
            assert driver.touch("a").status == "ok"
        assert prog.ahead  # behind the step
        assert sorted(driver.observe()["key_index"]) == ["a"]
    assert not prog.ahead and not prog.dead


def test_every_step_observed_behind_has_its_observation_written_behind_it(
    tmp_path: Path,
) -> None:
    """Driver.OBSERVED_BEHIND (actions) and ahead.FOLLOWED (their last
    requests' ops) are two lists that must agree: each action, taken as a
    state machine takes it, gets the observation's is_cached written right
    behind its last request, never after a reply (a round trip of its own)."""
    from shmref.store.driver import Driver

    impl = load_impl(SERVE)
    log = tmp_path / "log.jsonl"
    taken: list[str] = []

    def behind(driver: Driver, action: str, *args: Any, refused: bool = False) -> None:
        log.write_text("")
        impl.PROGRAM.log = str(log)
        try:
            with driver.observed_after(action):
                getattr(driver, action)(*args)
            driver.observe()
        finally:
            impl.PROGRAM.log = None
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        first = next(i for i, m in enumerate(lines) if m["msg"].get("op") == "is_cached")
        # refused at verify_signature: no get_begin, the observation goes alone
        wanted = "in" if refused else "out"
        assert lines[first - 1]["dir"] == wanted, f"{action}: {[m['msg'] for m in lines]}"
        taken.append(action)

    with Driver(impl, 16, n_readers=1, max_obj=2) as driver:
        behind(driver, "put", "a", 2)
        address, monotonic_id = driver.placed["a"]
        handle = ("a", driver._scaled(address), monotonic_id)
        behind(driver, "get_cached", "a")
        behind(driver, "touch", "a")
        behind(driver, "release_touches")
        behind(driver, "writer_get", handle)
        behind(driver, "reader_touch", 0, handle)
        behind(driver, "get_begin_foreign", 0, handle, refused=True)
        behind(driver, "get_begin", 0, handle)
        behind(driver, "get_copy", 0)
        behind(driver, "get_end", 0)
        behind(driver, "free_unused")
        behind(driver, "clear")
    assert sorted(taken) == sorted(Driver.OBSERVED_BEHIND)


def test_traffic_counts_requests_and_the_waits_for_their_replies() -> None:
    """What the report says of a program's run: every request written, and a
    round trip each time a reply leaves none unanswered (three written
    together, then their replies: one); a reply nobody asked for counts
    nothing, and neither do callbacks, answers and the hello."""
    lines = Lines()
    before = (TRAFFIC.requests, TRAFFIC.round_trips)
    request, reply = {"type": "request", "id": 1}, {"type": "reply", "in_reply_to": 1}
    lines.log = None
    for message in ({"type": "hello"}, request, {"type": "callback"}, {"type": "answer"}, reply):
        lines.record("out" if message["type"] in ("request", "answer") else "in", message)
    for message in (request, request, request, reply, reply, reply, reply):
        lines.record("out" if message is request else "in", message)
    assert (TRAFFIC.requests - before[0], TRAFFIC.round_trips - before[1]) == (4, 2)
