"""shmref.calls.calltrace: a failing property's calls drawn. The wrapper
must leave every call as it was (arguments, results, exceptions, no
reference kept), record only the test's own calls (not the store's calls to
itself, not Hypothesis's search, only its final run), keep a long test's
start and end, and draw the ring the calls placed. The end-to-end check runs
the suite's bad-input tests on the seed: every failing test leaves a trace
with its failure marked, and the verdicts are the same without recording."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import weakref
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from shmref.calls import calltrace, drawing
from shmref.core.runconfig import RunConfig, current_run, enter_run, running
from shmref.render import sink, svg

REPO = Path(__file__).resolve().parents[2]

STORE = """
class Value:
    pass


class SingleWriterShmRingBuffer:
    def __init__(self, data_buffer_size, name=None, create=False):
        if data_buffer_size <= 0:
            raise ValueError("size must be positive")
        self.data_buffer_size = data_buffer_size
        self.is_writer = create
        self.data_buffer_start = self.data_buffer_end = 0
        self.next_id = 0

    def allocate_buf(self, size):
        if size > self.data_buffer_size - (self.data_buffer_end - self.data_buffer_start):
            raise MemoryError("no room")
        address, chunk_id = self.data_buffer_end, self.next_id
        self.data_buffer_end += size
        self.next_id += 1
        self.byte2int(b"x")  # a call to itself: not the test's
        return address, chunk_id

    def byte2int(self, data):
        return 0

    def make_value(self):
        return Value()

    def free_buf(self, is_free, size):
        self.data_buffer_start = self.data_buffer_end
        return []


class SingleWriterShmObjectStorage:
    def __init__(self, max_object_size, n_readers, ring_buffer):
        self.ring_buffer = ring_buffer
        self.n_readers = n_readers

    def put(self, key, value):
        return self.ring_buffer.allocate_buf(len(value))

    @classmethod
    def create_from_handle(cls, handle):
        return cls(0, 1, handle)

    def get(self, address, monotonic_id):
        return "v"
"""


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[ModuleType]:
    """A small store module of its own (instrumenting a class is for the
    process: never refimpl's or the seed's classes here), in a run that
    asks for traces (its `trace_dir`)."""
    with running(RunConfig(trace_dir=str(tmp_path / "timelines"))):
        module = ModuleType("fake_store_for_calltrace")
        exec(compile(STORE, "fake_store_for_calltrace.py", "exec"), module.__dict__)
        assert calltrace.instrument(module)
        calltrace.RECORDER.reset()
        yield module


def test_nothing_is_instrumented_without_a_report() -> None:
    with running(None):
        nothing_is_instrumented()


def nothing_is_instrumented() -> None:
    module = ModuleType("untouched")
    exec(compile(STORE, "untouched.py", "exec"), module.__dict__)
    before = dict(vars(module.SingleWriterShmRingBuffer))
    assert not calltrace.instrument(module)
    assert dict(vars(module.SingleWriterShmRingBuffer)) == before


def test_calls_are_unchanged_and_nothing_is_kept(store: ModuleType) -> None:
    ring = store.SingleWriterShmRingBuffer(64, create=True)
    assert ring.allocate_buf(16) == (0, 0)
    with pytest.raises(MemoryError, match="no room") as raised:
        ring.allocate_buf(1000)
    assert type(raised.value) is MemoryError  # the same exception, not a copy
    value = ring.make_value()
    kept = weakref.ref(value)
    del value
    gc.collect()
    assert kept() is None  # a result is remembered as text only
    with pytest.raises(ValueError):
        store.SingleWriterShmRingBuffer(0, create=True)


def test_the_tests_calls_are_drawn_with_the_ring(store: ModuleType, tmp_path: Path) -> None:
    ring = store.SingleWriterShmRingBuffer(64, create=True)
    writer = store.SingleWriterShmObjectStorage(32, 2, ring)
    writer.put("a", b"x" * 16)
    writer.put("b", b"x" * 16)
    reader = store.SingleWriterShmObjectStorage.create_from_handle(ring)
    reader.get(0, 0)
    with pytest.raises(MemoryError):
        ring.allocate_buf(1000)
    calltrace.save_failure("test_x.py::test_y", "Failed: DID NOT RAISE <class 'ValueError'>")
    traces, problems = sink.load_all(tmp_path / "timelines")
    assert not problems and list(traces) == ["test_x.py::test_y"]
    trace = traces["test_x.py::test_y"]
    actions = [(s.actor, s.action, s.outcome) for s in trace.steps]
    assert actions == [  # no byte2int: the store's call to itself is not the test's
        ("writer", "SingleWriterShmRingBuffer", "ok"),
        ("writer", "SingleWriterShmObjectStorage", "ok"),
        ("writer", "put", "ok"),
        ("writer", "put", "ok"),
        ("r1", "create_from_handle", "ok"),
        ("r1", "get", "ok"),
        ("writer", "allocate_buf", "MemoryError"),
    ]
    assert trace.source == "calls" and trace.readers == ["r1"]
    assert trace.steps[2].args == {"key": "'a'", "value": "b'xxxxxxxxxxxxxxxx'"}
    assert trace.steps[-1].diverged and "DID NOT RAISE" in trace.steps[-1].note
    after_read = trace.steps[5].ring
    assert after_read is not None and after_read.end == 2  # 32 B of a 64 B ring: 2 cells of 16
    states = [(c.id, c.key, c.address, c.size, c.state, c.count) for c in after_read.chunks]
    assert states == [(0, "a", 0, 1, "read", 1), (1, "b", 1, 1, "live", 0)]
    assert 'class="diverged"' in svg.render(trace)


def test_a_long_test_keeps_its_start_and_its_end(store: ModuleType) -> None:
    ring = store.SingleWriterShmRingBuffer(1 << 20, create=True)
    for _ in range(199):
        ring.allocate_buf(8)
    trace = calltrace.RECORDER.trace("test_x.py::test_long", "AssertionError")
    assert trace is not None
    kept = calltrace.KEPT_HEAD + calltrace.KEPT_TAIL
    assert len(trace.steps) == kept and trace.omitted == 200 - kept
    assert [s.index for s in trace.steps[:2]] == [1, 2] and trace.steps[-1].index == 200
    assert trace.constants["N"] <= drawing.MAX_CELLS  # 1 MiB drawn in cells of 32 KiB
    drawn = svg.render(trace)
    assert f"{200 - kept} steps left out" in drawn and 'data-steps="200"' in drawn


def test_only_hypothesis_final_run_is_recorded(store: ModuleType) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(database=None, max_examples=200, derandomize=True)
    @given(st.integers(min_value=1, max_value=1000))
    def fails_from_50(size: int) -> None:
        ring = store.SingleWriterShmRingBuffer(4096, create=True)
        ring.allocate_buf(size)
        assert size < 50

    with pytest.raises(AssertionError):
        fails_from_50()
    trace = calltrace.RECORDER.trace("test_x.py::fails_from_50", "AssertionError")
    assert trace is not None and trace.source == "hypothesis"
    assert [(s.action, s.args) for s in trace.steps] == [
        ("SingleWriterShmRingBuffer", {"data_buffer_size": "4096", "create": "True"}),
        ("allocate_buf", {"size": "50"}),  # the shrunk example, and only it
    ]


def test_a_test_that_left_its_own_trace_keeps_it(store: ModuleType, tmp_path: Path) -> None:
    own = tmp_path / "timelines" / sink.file_name("test_x.py::test_machine")
    own.parent.mkdir(parents=True)
    own.write_text("{}", encoding="utf-8")
    store.SingleWriterShmRingBuffer(64, create=True)
    calltrace.save_failure("test_x.py::test_machine", "AssertionError")
    assert own.read_text(encoding="utf-8") == "{}"


def run_bad_input(impl: str, tmp_path: Path, traces: Path | None) -> dict[str, set[str]]:
    """The suite's bad-input tests on `impl`: each test's outcome."""
    run = RunConfig(trace_dir=str(traces) if traces is not None else None)
    config = run.write(tmp_path / f"run-{traces is not None}.json")
    report = tmp_path / f"report-{traces is not None}.json"
    command = f"-m pytest -q -p no:cacheprovider --shmref-impl={impl} --pyargs shmref.suite"
    command += f" --shmref-run={config}"
    subprocess.run(
        [
            sys.executable,
            *command.split(),
            "-k",
            "TestBadInput or TestBadPuts",
            f"--junitxml={report}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    outcomes: dict[str, set[str]] = {}
    for case in ET.parse(report).iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        parts = str(case.get("classname")).split(".")
        at = next(k for k, part in enumerate(parts) if part.startswith("test_"))
        name = "::".join([f"{parts[at]}.py", *parts[at + 1 :], str(case.get("name"))])
        outcomes.setdefault(name, set()).update(kinds or ["passed"])  # teardown: a 2nd entry
    return outcomes


def test_every_failing_bad_input_test_of_the_seed_is_drawn_and_judged_alike(
    tmp_path: Path,
) -> None:
    timelines = tmp_path / "timelines"
    recorded = run_bad_input("seed", tmp_path, timelines)
    plain = run_bad_input("seed", tmp_path, None)
    assert recorded == plain  # recording changes no verdict
    failed = {name for name, kind in recorded.items() if "failure" in kind}
    assert len(failed) > 10  # the seed fails many of them (hardened level)
    traces, problems = sink.load_all(timelines)
    assert not problems and set(traces) == failed
    for trace in traces.values():
        assert trace.source == "calls" and trace.diverged_at == len(trace.steps) - 1
        assert trace.steps and trace.verdict


# -- a crash: the calls streamed before it -------------------------------------------------------


def test_a_call_that_never_returned_is_drawn_as_the_crash(tmp_path: Path) -> None:
    calls = tmp_path / "1.calls.jsonl"
    ring = {"start": 0, "end": 1, "chunks": []}
    step = {"index": 1, "actor": "writer", "action": "put", "args": {"key": "'k'"}}
    lines = [
        {"case": "test_x.py::test_other"},
        {"call": "put", "actor": "writer", "args": {}},
        {"case": "test_x.py::test_y"},
        {"call": "put", "actor": "writer", "args": {"key": "'k'"}},
        {
            "step": {**step, "outcome": "ok", "result": "(0, 0)", "ring": ring},
            "constants": {"N": 8},
        },
        {"call": "get", "actor": "r1", "args": {"address": "0"}},
    ]
    text = "\n".join(json.dumps(line) for line in lines) + '\n{"call": "cut sho'
    calls.write_text(text, encoding="utf-8")
    trace = drawing.crash_trace(calls, "test_x.py::test_y", "CRASH", "killed by SIGSEGV\nmore")
    assert trace is not None and trace.constants == {"N": 8}
    assert [(s.actor, s.action, s.outcome) for s in trace.steps] == [
        ("writer", "put", "ok"),
        ("r1", "get", "CRASH"),
    ]
    last = trace.steps[-1]
    assert last.diverged and last.result == "never returned"
    assert last.note == "CRASH in this call: killed by SIGSEGV" and last.ring == trace.steps[0].ring
    assert drawing.crash_trace(calls, "test_x.py::test_unknown", "CRASH", "") is None
    assert drawing.crash_trace(tmp_path / "missing", "test_x.py::test_y", "CRASH", "") is None


def test_hypothesis_search_streams_its_current_example_only(
    store: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the search (not the final run) calls are streamed, not recorded:
    a crash shows the example it happened in, with each call's outcome."""
    from hypothesis import Phase, given, settings
    from hypothesis import strategies as st

    calls = tmp_path / "child.calls.jsonl"
    run = current_run()
    assert run is not None  # the store fixture's, restored after the test
    enter_run(run.but(calls_file=str(calls)))
    calltrace.RECORDER.reset("test_x.py::test_search")
    seen: list[int] = []

    @settings(database=None, max_examples=5, phases=[Phase.generate], derandomize=True)
    @given(st.integers(min_value=1, max_value=30))
    def search(size: int) -> None:
        seen.append(size)
        ring = store.SingleWriterShmRingBuffer(64, create=True)
        ring.allocate_buf(size)
        with pytest.raises(MemoryError):
            ring.allocate_buf(1000)

    search()
    assert calltrace.RECORDER.trace("test_x.py::test_search", "") is None  # nothing recorded
    trace = drawing.crash_trace(calls, "test_x.py::test_search", "TIMEOUT", "hung")
    assert trace is not None
    assert [(s.action, s.args, s.outcome) for s in trace.steps] == [
        ("SingleWriterShmRingBuffer", {"data_buffer_size": "64", "create": "True"}, "ok"),
        ("allocate_buf", {"size": str(seen[-1])}, "ok"),  # the last example, alone
        ("allocate_buf", {"size": "1000"}, "TIMEOUT"),  # its outcome was never streamed
    ]
    assert calls.stat().st_size < 2000  # one example's calls, not the whole search's
