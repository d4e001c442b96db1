"""Tests for shmref.tlc against real TLC 2.15 output.

The TLC runs happen once per module, concurrently (TLC spends most of its
~1.8 s per run starting up and shutting down), on the small specs in
``tests/tlc_fixtures/``; the parser tests then look at what TLC really printed.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmref import tlc
from shmref.tlc.cover import covering_paths
from shmref.tlc.graph import StateGraph, edge_coverage, parse_dot, path_to_trace
from shmref.tlc.result import TlcRun
from shmref.tlc.runner import run_tlc
from shmref.tlc.tlavalues import FrozenDict, TlcError, parse_state, parse_value
from shmref.tlc.toolout import (
    Trace,
    parse_simulation_file,
    parse_tool_output,
    parse_trace,
    read_simulation_traces,
)

FIX = Path(__file__).resolve().parents[1] / "tlc_fixtures"
# one xdist worker makes the module's TLC runs (the `runs` fixture), not each worker
pytestmark = pytest.mark.xdist_group("tlc-runs")


def _tlc_available() -> bool:
    try:
        tlc.find_java()
        tlc.find_jar()
    except TlcError:
        return False
    return True


# --------------------------------------------------------------------------
# the real TLC runs, shared by the tests below


@dataclass
class Runs:
    """Results of the fixture runs plus the files they wrote."""

    work: Path
    private_tmp: Path
    results: dict[str, TlcRun] = field(default_factory=dict)
    progress: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def runs() -> Iterator[Runs]:
    if not _tlc_available():
        pytest.skip("needs Java and the TLC jar")
    work = Path(tempfile.mkdtemp(prefix="shmref-test-tlc-"))
    private_tmp = work / "tmp"  # run_tlc's temp folders must all be gone afterwards
    private_tmp.mkdir()
    out = Runs(work, private_tmp)
    (work / "sim1").mkdir()
    (work / "sim1" / "trace_9_9").write_text("stale trace from an earlier run\n")
    cases: dict[str, tuple[str, str, dict[str, Any]]] = {
        "pass": (
            "Pass",
            "Pass",
            {
                "dump_dot": work / "pass.dot",
                "log_path": work / "logs" / "pass.log",
                "progress": out.progress.append,
            },
        ),
        "inv": ("Inv", "Inv", {}),
        "live": ("Live", "Live", {}),
        "stutter": ("Live", "Stutter", {}),
        "deadlock": ("Pass", "Deadlock", {}),
        "assume": ("Assume", "Assume", {}),
        "one": ("One", "One", {}),
        "wrap": ("Wrap", "Wrap", {"dump_dot": work / "wrap"}),  # TLC would add ".dot"
        "bad": ("Bad", "Bad", {}),
        "sim1": ("Pass", "Pass", {"simulate": (3, 6, 7), "simulate_dir": work / "sim1"}),
        "sim2": ("Pass", "Pass", {"simulate": (3, 6, 7), "simulate_dir": work / "sim2"}),
        "sim_inv": ("Inv", "Inv", {"simulate": (2, 10, 1)}),
    }

    def one(item: tuple[str, tuple[str, str, dict[str, Any]]]) -> tuple[str, TlcRun]:
        name, (spec, cfg, kwargs) = item
        workers = 2 if "simulate" in kwargs else 1
        return name, run_tlc(
            FIX / f"{spec}.tla", FIX / f"{cfg}.cfg", workers=workers, timeout=120, **kwargs
        )

    saved = tempfile.tempdir
    tempfile.tempdir = str(private_tmp)
    try:
        with ThreadPoolExecutor(max_workers=6) as pool:
            out.results = dict(pool.map(one, cases.items()))
    finally:
        tempfile.tempdir = saved
    yield out
    shutil.rmtree(work, ignore_errors=True)


def states_of(trace: Trace | None) -> list[dict[str, Any]]:
    if trace is None:
        raise AssertionError("expected a trace")
    return [s.vars for s in trace.states]


# --------------------------------------------------------------------------
# run_tlc on real specs


@pytest.mark.tlc
def test_passing_model(runs: Runs) -> None:
    r = runs.results["pass"]
    assert (r.exit_code, r.outcome, r.violated, r.trace) == (0, "ok", None, None)
    assert (r.distinct_states, r.generated_states, r.depth) == (9, 14, 5)
    assert r.ok and r.error is None and r.seconds > 0
    assert (runs.work / "logs" / "pass.log").read_text() == r.output
    assert any(line.startswith("TLC: 9 distinct states, 14 generated") for line in runs.progress)
    assert runs.progress[-1].startswith("TLC Pass.tla: ok: 9 distinct states")
    assert r.command[r.command.index("-workers") + 1] == "1"


@pytest.mark.tlc
def test_no_files_left_behind(runs: Runs) -> None:
    assert list(runs.private_tmp.iterdir()) == []  # metadir and Java temp dir removed
    assert not (FIX / "states").exists()
    stray = {p.name for p in FIX.iterdir()} - {
        p.name for p in FIX.iterdir() if p.suffix in (".tla", ".cfg", ".md")
    }
    assert stray == set()


@pytest.mark.tlc
def test_invariant_trace_with_structured_values(runs: Runs) -> None:
    r = runs.results["inv"]
    assert (r.exit_code, r.outcome, r.violated) == (12, "invariant", "Small")
    assert r.trace is not None and r.trace.back_to is None and not r.trace.stuttering
    assert [s.index for s in r.trace.states] == [1, 2, 3, 4]
    assert [s.action for s in r.trace.states] == [None, "put", "put", "put"]
    first, second, *_, last = states_of(r.trace)
    assert first == {
        "log": (),
        "seen": frozenset(),
        "table": {"k1": 0, "k2": 0},
        "key_index": (),  # TLC prints a function with empty domain as <<>>
        "last_action": {"name": "init"},
        "neg": -1,
    }
    key = second["last_action"]["key"]
    assert second["last_action"] == {"name": "put", "key": key, "outcome": "ok"}
    assert second["log"] == ((key, 'v"q'),)
    assert second["seen"] == {key}
    assert second["key_index"] == {key: (0, -1)}
    assert isinstance(second["table"], FrozenDict) and second["table"][key] == 1
    assert last["neg"] == -4 and len(last["log"]) == 3
    assert {first["last_action"], second["last_action"]}  # hashable records


@pytest.mark.tlc
def test_liveness_lasso(runs: Runs) -> None:
    r = runs.results["live"]
    assert (r.exit_code, r.outcome, r.violated) == (13, "liveness", None)
    assert states_of(r.trace) == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert r.trace is not None
    assert (r.trace.back_to, r.trace.back_to_action, r.trace.stuttering) == (1, "step", False)
    assert r.distinct_states == 3 and r.depth == 3  # depth from the last progress message


@pytest.mark.tlc
def test_liveness_stuttering(runs: Runs) -> None:
    r = runs.results["stutter"]
    assert (r.exit_code, r.outcome) == (13, "liveness")
    assert r.trace is not None and r.trace.stuttering and r.trace.back_to is None
    assert states_of(r.trace) == [{"n": 0}]


@pytest.mark.tlc
def test_deadlock(runs: Runs) -> None:
    r = runs.results["deadlock"]
    assert (r.exit_code, r.outcome, r.violated) == (11, "deadlock", None)
    assert r.trace is not None
    assert r.trace.states[-1].vars == {"x": 2, "y": 2}
    for before, after in zip(r.trace.states, r.trace.states[1:], strict=False):
        changed = "x" if after.action == "incx" else "y"
        assert after.vars[changed] == before.vars[changed] + 1


@pytest.mark.tlc
def test_assumption_failure(runs: Runs) -> None:
    r = runs.results["assume"]
    assert (r.exit_code, r.outcome, r.trace) == (10, "assumption", None)
    assert r.error is not None and "Assumption line 5" in r.error
    assert any(m.code == 2104 for m in r.messages)


@pytest.mark.tlc
def test_single_variable_spec(runs: Runs) -> None:
    r = runs.results["one"]
    assert (r.outcome, r.violated) == ("invariant", "Low")
    assert states_of(r.trace) == [{"n": 0}, {"n": 1}, {"n": 2}]


@pytest.mark.tlc
def test_wrapped_values(runs: Runs) -> None:
    r = runs.results["wrap"]
    assert "\n    name |-> " in r.output  # TLC really wrapped the value
    row = {"name": "some long string value", "flag": True}
    expected = frozenset(
        FrozenDict(row, id=i + 100 * y, seq=(i, -i, "x")) for y in range(2) for i in range(1, 5)
    )
    assert r.trace is not None
    assert r.trace.states[2].vars == {"y": 2, "big": expected}
    assert r.trace.states[-1].action == "Next"  # the unnamed disjunct of Next


@pytest.mark.tlc
def test_parse_error(runs: Runs) -> None:
    r = runs.results["bad"]
    assert (r.exit_code, r.outcome, r.trace) == (150, "error", None)
    assert r.error is not None and r.error.startswith("parse error: ***Parse Error***")
    assert "line 4, column 9" in r.error


@pytest.mark.tlc
def test_simulation_files(runs: Runs) -> None:
    r = runs.results["sim1"]
    assert (r.outcome, r.distinct_states) == ("ok", None)
    assert r.generated_states is not None and r.generated_states > 0
    names = sorted(p.name for p in (runs.work / "sim1").iterdir())
    assert names == [f"trace_{w}_{k}" for w in (0, 1) for k in (0, 1, 2)]  # stale file gone
    traces = read_simulation_traces(runs.work / "sim1")
    assert len(traces) == 6
    steps = {"incx", "incy", "reset"}
    for trace in traces:
        assert [s.index for s in trace.states] == [1, 2, 3, 4, 5, 6]  # -depth counts states
        assert all(s.action is None for s in trace.states)
        assert trace.states[0].vars == {"x": 0, "y": 0}
        for a, b in zip(states_of(trace), states_of(trace)[1:], strict=False):
            moves = {
                "incx": a["x"] < 2 and b == {"x": a["x"] + 1, "y": a["y"]},
                "incy": a["y"] < 2 and b == {"x": a["x"], "y": a["y"] + 1},
                "reset": a == {"x": 2, "y": 2} and b == {"x": 0, "y": 0},
            }
            assert any(moves[m] for m in steps), (a, b)
    # same seed, same traces
    assert read_simulation_traces(runs.work / "sim2") == traces
    one = parse_simulation_file(runs.work / "sim1" / "trace_1_2")
    assert one == traces[5]


@pytest.mark.tlc
def test_simulation_finds_violation(runs: Runs) -> None:
    r = runs.results["sim_inv"]
    assert (r.outcome, r.violated) == ("invariant", "Small")
    assert r.trace is not None and len(r.trace.states) == 4
    assert r.trace.states[1].action == "put"


@pytest.mark.tlc
def test_dot_graph_and_covering_paths(runs: Runs) -> None:
    graph = parse_dot(runs.work / "pass.dot")
    assert len(graph.states) == 9
    assert [graph.states[n] for n in graph.initial] == [{"x": 0, "y": 0}]
    assert len(graph.edges) == 13
    assert {label for _, _, label in graph.edges} == {"incx", "incy", "reset"}
    paths = covering_paths(graph)
    assert edge_coverage(graph, paths) == 1.0
    assert_walks(graph, paths)
    assert len(paths) <= 4 and sum(map(len, paths)) <= 26
    for path in paths:
        trace = path_to_trace(graph, path)
        assert trace.states[0].vars == {"x": 0, "y": 0} and trace.states[0].action is None
        for (src, dst, label), state in zip(path, trace.states[1:], strict=True):
            assert state.action == label and state.vars == graph.states[dst]
            before = graph.states[src]
            if label == "incx":
                assert state.vars == {"x": before["x"] + 1, "y": before["y"]}


@pytest.mark.tlc
def test_dot_graph_self_loops_and_wrapped_labels(runs: Runs) -> None:
    graph = parse_dot(runs.work / "wrap")
    loops = [e for e in graph.edges if e[0] == e[1]]
    assert loops and all(label == "idle" for _, _, label in loops)
    assert "Next" in {label for _, _, label in graph.edges}
    paths = covering_paths(graph)
    assert edge_coverage(graph, paths) == 1.0
    assert_walks(graph, paths)
    r = runs.results["wrap"]
    assert r.trace is not None
    assert r.trace.states[2].vars in list(graph.states.values())


@pytest.mark.tlc
def test_timeout_kills_tlc(tmp_path: Path) -> None:
    if not _tlc_available():
        pytest.skip("needs Java and the TLC jar")
    log = tmp_path / "forever.log"
    start = time.monotonic()
    with pytest.raises(TlcError, match=r"timed out after 1\.5 s on Forever\.tla"):
        run_tlc(FIX / "Forever.tla", FIX / "Forever.cfg", workers=1, timeout=1.5, log_path=log)
    assert time.monotonic() - start < 10
    assert "TLC2 Version" in log.read_text()
    marker = str(FIX / "Forever.cfg")
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            assert marker not in cmdline, f"TLC still running as pid {proc.name}"


# --------------------------------------------------------------------------
# broken inputs


def test_missing_jar_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TLA2TOOLS_JAR", str(tmp_path / "nope.jar"))
    with pytest.raises(TlcError, match="TLA2TOOLS_JAR=.*nope.jar does not exist"):
        tlc.find_jar()
    with pytest.raises(TlcError, match="TLA2TOOLS_JAR"):
        run_tlc(FIX / "Pass.tla", FIX / "Pass.cfg")
    jar = tmp_path / "tla2tools.jar"
    jar.write_bytes(b"")
    monkeypatch.setenv("TLA2TOOLS_JAR", str(jar))
    assert tlc.find_jar() == jar


def test_java_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(TlcError) as info:
        tlc.find_java()
    assert str(info.value) == (
        "Java not found: install a JRE, e.g. apt-get install default-jre-headless"
    )


@pytest.mark.tlc
def test_not_a_jar(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if shutil.which("java") is None:
        pytest.skip("needs Java")
    fake = tmp_path / "fake.jar"
    fake.write_text("not a jar")
    monkeypatch.setenv("TLA2TOOLS_JAR", str(fake))
    with pytest.raises(TlcError, match="no TLC -tool messages"):
        run_tlc(FIX / "Pass.tla", FIX / "Pass.cfg", workers=1, timeout=60)


def test_bad_arguments(tmp_path: Path) -> None:
    if not _tlc_available():
        pytest.skip("needs Java and the TLC jar")
    with pytest.raises(TlcError, match="config .* does not exist"):
        run_tlc(FIX / "Pass.tla", tmp_path / "missing.cfg")
    with pytest.raises(TlcError, match="difftrace"):
        run_tlc(FIX / "Pass.tla", FIX / "Pass.cfg", extra_args=["-difftrace"])
    with pytest.raises(TlcError, match="simulate"):
        run_tlc(FIX / "Pass.tla", FIX / "Pass.cfg", simulate_dir=tmp_path)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello world\n",
        "Error: Could not find or load main class tlc2.TLC\n",
        "@!@!@STARTMSG 2217:4 @!@!@\n1: <Initial predicate>\nx = 1\n",  # cut off
        "@!@!@STARTMSG 2217:4 @!@!@\nx\n@!@!@ENDMSG 2110 @!@!@\n",
        "@!@!@ENDMSG 2110 @!@!@\n",
    ],
)
def test_garbage_tool_output(text: str) -> None:
    with pytest.raises(TlcError):
        parse_tool_output(text)


def test_garbage_files(tmp_path: Path) -> None:
    junk = tmp_path / "trace_0_0"
    junk.write_text("not a trace\n")
    with pytest.raises(TlcError, match="not a TLC simulation trace"):
        parse_simulation_file(junk)
    with pytest.raises(TlcError):
        read_simulation_traces(tmp_path / "missing")
    with pytest.raises(TlcError, match="not a Graphviz"):
        parse_dot(junk)
    broken = tmp_path / "g.dot"
    broken.write_text('strict digraph G {\n1 -> 2 [label="a"];\n1 [label="x = 1",style = filled]\n')
    with pytest.raises(TlcError, match="undeclared states"):
        parse_dot(broken)
    with pytest.raises(TlcError):
        parse_dot(tmp_path / "nothing.dot")


# --------------------------------------------------------------------------
# message and trace parsing on captured real output

# TLC 2.15 nests a message inside code 1000, in the middle of a line.
NESTED = """@!@!@STARTMSG 2190:0 @!@!@
Finished computing initial states: 1 distinct state generated at 2026-12-02 16:51:33.
@!@!@ENDMSG 2190 @!@!@
@!@!@STARTMSG 1000:1 @!@!@
TLC threw an unexpected exception.
This was probably caused by an error in the spec or model.
See the User Output or TLC Console for clues to what happened.
The exception was a tlc2.tool.EvalException
: @!@!@STARTMSG 2179:0 @!@!@
The second argument of \\div is 0.
@!@!@ENDMSG 2179 @!@!@
@!@!@ENDMSG 1000 @!@!@
@!@!@STARTMSG 2103:1 @!@!@
The error occurred when TLC was evaluating the nested
expressions at the following positions:
0. Line 5, column 9 to line 5, column 28 in Err
@!@!@ENDMSG 2103 @!@!@
"""

INIT_VIOLATION = """@!@!@STARTMSG 2107:1 @!@!@
Invariant Neg is violated by the initial state:
n = 0

@!@!@ENDMSG 2107 @!@!@
"""


def test_nested_messages() -> None:
    messages = parse_tool_output(NESTED)
    assert [(m.code, m.severity) for m in messages] == [(2190, 0), (1000, 1), (2179, 0), (2103, 1)]
    assert "second argument of \\div is 0" in messages[1].body
    assert messages[2].body == "The second argument of \\div is 0."
    assert parse_trace(messages) is None


def test_initial_state_violation_trace() -> None:
    trace = parse_trace(parse_tool_output(INIT_VIOLATION))
    assert trace is not None and states_of(trace) == [{"n": 0}]


# --------------------------------------------------------------------------
# values


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("-17", -17),
        ("TRUE", True),
        ("FALSE", False),
        ('"plain"', "plain"),
        ('"say \\"hi\\" \\\\ back"', 'say "hi" \\ back'),
        ('"a\\nb"', "a\nb"),
        ('""', ""),
        ("k1", "k1"),
        ("NoKey", "NoKey"),
        ("<<>>", ()),
        ("{}", frozenset()),
        ("<<1, -2, <<>>>>", (1, -2, ())),
        ('<<<<k1, "v\\"q">>>>', (("k1", 'v"q'),)),
        ("{-1, 0, 1}", frozenset({-1, 0, 1})),
        ("1..3", frozenset({1, 2, 3})),
        ("{1..2, {}}", frozenset({frozenset({1, 2}), frozenset()})),
        ('[name |-> "put", key |-> k1]', {"name": "put", "key": "k1"}),
        ("[ id |-> 1,\n    seq |-> <<1, -1>> ]", {"id": 1, "seq": (1, -1)}),
        ("(k1 :> 0 @@ k2 :> -3)", {"k1": 0, "k2": -3}),
        ("(1 :> <<0, 1>>)", {1: (0, 1)}),
        ("(<<1, 2>> :> {a})", {(1, 2): frozenset({"a"})}),
        ("(k1 :> [n |-> (r1 :> TRUE)])", {"k1": {"n": {"r1": True}}}),
        ("{[a |-> 1], [a |-> 1], [a |-> 2]}", frozenset({FrozenDict(a=1), FrozenDict(a=2)})),
        ("{ <<1, 2>>,\n  <<3, 4>> }", frozenset({(1, 2), (3, 4)})),
        ("(5)", 5),
    ],
)
def test_parse_value(text: str, expected: Any) -> None:
    assert parse_value(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "<<1, 2",
        "{1, }",
        "[a |-> ]",
        "1 2",
        "[x \\in S |-> 1]",
        "(k :> 1 @@)",
        "<<1>>>>",
        "1..x",
    ],
)
def test_parse_value_rejects(text: str) -> None:
    with pytest.raises(TlcError, match="cannot parse TLA\\+ value"):
        parse_value(text)


def test_frozen_dict() -> None:
    d = FrozenDict(a=1, b=(1, 2))
    assert d == {"b": (1, 2), "a": 1} and {"a": 1, "b": (1, 2)} == d
    assert d != {"a": 1} and d != [("a", 1)]
    assert hash(d) == hash(FrozenDict(b=(1, 2), a=1))
    assert len({d, FrozenDict(a=1, b=(1, 2))}) == 1
    assert frozenset({d}) == frozenset({FrozenDict({"a": 1, "b": (1, 2)})})
    with pytest.raises(TypeError):
        d["a"] = 2  # type: ignore[index]
    assert dict(d) == {"a": 1, "b": (1, 2)} and "FrozenDict" in repr(d)


def test_frozen_dict_unpickled_in_another_process_still_hashes_equal() -> None:
    """Traces are cached as pickles; str hashes differ between processes, so a
    hash cached in the pickling process must not travel with the pickle."""
    script = (
        "import pickle, sys\n"
        "from shmref.tlc.tlavalues import FrozenDict\n"
        "d = FrozenDict({'size': 3, 'id': 0}); hash(d)\n"
        "sys.stdout.buffer.write(pickle.dumps(frozenset({d})))\n"
    )
    made = [
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            check=True,
        ).stdout
        for seed in (1, 2)
    ]
    here = frozenset({FrozenDict({"id": 0, "size": 3})})
    assert [pickle.loads(data) for data in made] == [here, here]


def test_parse_state_forms() -> None:
    assert parse_state("x = 1\n") == {"x": 1}
    assert parse_state("x = {1,\n  2}\n\n") == {"x": frozenset({1, 2})}
    assert parse_state('/\\ a = <<1,\n    2>>\n/\\ b = "x = 1"\n') == {"a": (1, 2), "b": "x = 1"}
    assert parse_state("") == {}
    with pytest.raises(TlcError):
        parse_state("/\\ a = 1\nnot a continuation\n")
    with pytest.raises(TlcError):
        parse_state("/\\ a = 1\n/\\ a = 2\n")


_N1 = '1 [label="/\\\\ x = 1\\n/\\\\ y = <<1, 2>>",style = filled]'
_EDGE = '1 -> 2 [label="a",color="black",fontcolor="black"];'


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("dot", '2 [label="/\\\\ x = 2\\n/\\\\ y = <<>>"];'),  # what TLC writes
        ("dot", '2 [label="/\\\\ x = \\"a\\\\\\\\n/\\\\\\\\ y = 1\\"\\n/\\\\ y = 1"];'),  # "\n/\ "
        ("dot", '2 [label="/\\\\ x = \\"a\\\\\\n/\\\\ y = 1\\"\\n/\\\\ y = 1"];'),  # cut escapes
        ("dot", '2 [label="/\\\\ x = \\"a\0b\\"\\n/\\\\ y = \\"\\\\\\\\\\""];'),  # a NUL
        ("dot", '2 [label="/\\\\ x = <<1,",y=",2>>"];'),  # a quote inside the label
        ("dot", '2 [label="/\\\\ x = 2",foo="\\n/\\\\ y = 2"];'),  # a separator after it
        ("dot", '2 [label="/\\\\ x = 2\\n/\\\\ y = 1",style = "filled"];'),
        ("dot", '2 [label="/\\\\ x = 9\\n/\\\\ x = <<>>"];'),  # a variable twice
        ("dot", '2 [label="/\\\\ x = (2\\n/\\\\ x = <<>>"];'),  # and a bad value before it
        ("dot", '2 [label="/\\\\ x = {1,\\n\\n  2}\\n/\\\\ y = <<>>"];'),  # a blank line
        ("dot", '2 [label="/\\\\ x = {1,\\n\\t2}\\n/\\\\ y = <<>>"];'),  # \t: a t, not a tab
        ("dot", '2 [label="/\\\\ x =\\n  2\\l/\\\\ y = \\\\<<>>\\n"];'),
        ("dot", '2 [label="/\\\\ \u00e9x = 2\\n/\\\\ y\u00e9 = <<>>"];'),
        ("dot", '2 [label="/\\\\ x = 2"];\n2 [label="/\\\\ x = 3",style = filled]'),
        ("dot", '\u0662 [label="/\\\\ x = 2"];\n1 -> \u0662 [label="a"];'),
        ("dot", '\u00b2 [label="/\\\\ x = 2"];\n1 -> \u00b2 [label="a"];'),
        ("dot", '2 [label="x = 2"];\n1 -> 2 [label="a\\"b\\nc\\\\d"];\n1 -> 2;'),
        ("dot", '2 [label="/\\\\ x = 2\\n/\\\\ y = <<>>"];\n1 -> 2 [label="a"'),
        ("state", "/\\ a = 1\x85/\\ b = 2"),  # a line end of str.splitlines
        ("state", "/\\ a = 1\r\n/\\ b = {\r\n  2}\r\n"),
        ("state", "\n/\\ a = {1,\n   \n  2}\n\n"),
        ("state", "a = 1\n/\\ b = 2"),
        ("state", "/\\ a = 1\n\t/\\ b = 2"),
    ],
)
def test_lines_read_without_regexes_read_as_with_them(
    kind: str, text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """parse_dot_text and parse_state read TLC's usual lines by string
    operations: any odd one must still read (or fail) exactly as the regexes
    and parse_state's line-by-line reading take it."""
    dot = "\n".join(["strict digraph G {", _N1, text, _EDGE, "}"])

    def outcome() -> object:
        try:
            if kind == "state":
                cache: dict[str, Any] = {}
                return parse_state(text, cache), cache
            graph = tlc.parse_dot_text(dot, "g.dot")
        except TlcError as exc:
            return str(exc)
        values = [type(v) for state in graph.states.values() for v in state.values()]
        return graph.states, graph.initial, graph.edges, values

    plainly = outcome()
    monkeypatch.setattr("shmref.tlc.graph._DotReader.read_plainly", lambda *_: False)
    monkeypatch.setattr("shmref.tlc.tlavalues._split_state", lambda _: None)
    assert outcome() == plainly


# --------------------------------------------------------------------------
# covering paths on synthetic graphs


def assert_walks(graph: StateGraph, paths: list[list[tuple[str, str, str]]]) -> None:
    edges = set(graph.edges)
    for path in paths:
        assert path and path[0][0] in graph.initial
        assert all(e in edges for e in path)
        assert all(a[1] == b[0] for a, b in zip(path, path[1:], strict=False))


def graph_of(edges: list[tuple[str, str, str]], initial: set[str]) -> StateGraph:
    nodes = {n for e in edges for n in e[:2]} | initial
    return StateGraph({n: {"n": n} for n in nodes}, set(initial), edges)


def test_covering_paths_ignores_unreachable_edges() -> None:
    g = graph_of(
        [("a", "b", "go"), ("b", "b", "stay"), ("b", "a", "back"), ("z", "a", "never")], {"a"}
    )
    paths = covering_paths(g)
    assert paths == [[("a", "b", "go"), ("b", "b", "stay"), ("b", "a", "back")]]
    assert edge_coverage(g, paths) == 1.0
    assert edge_coverage(g, []) == 0.0
    assert covering_paths(graph_of([], {"a"})) == []
    assert edge_coverage(graph_of([], {"a"}), []) == 1.0


def test_covering_paths_tour_each_component_balanced_once() -> None:
    """A component's edges go in one closed tour, balanced by the shortest
    path from a state with more ways in to one with more ways out (c -> a
    taken twice here); a later component's tour starts with the shortest way
    to it, which takes the edges between components too."""
    g = graph_of(
        [
            ("i", "a", "in"),
            ("a", "b", "ab"),
            ("b", "c", "bc"),
            ("c", "a", "ca"),
            ("a", "c", "ac"),
            ("c", "d", "out"),
            ("d", "d", "stay"),
        ],
        {"i"},
    )
    paths = covering_paths(g)
    assert [[label for _, _, label in path] for path in paths] == [
        ["in", "ab", "bc", "ca", "ac", "ca"],
        ["in", "ac", "out", "stay"],
    ]
    assert [len(p) for p in covering_paths(g, max_length=2)] == [3, 4, 3, 4]  # pieces of 2


def test_covering_paths_two_initial_states_and_max_length() -> None:
    chain = [(str(i), str(i + 1), "next") for i in range(10)]
    g = graph_of([*chain, ("x", "5", "jump")], {"0", "x"})
    paths = covering_paths(g)
    assert_walks(g, paths)
    assert edge_coverage(g, paths) == 1.0
    capped = covering_paths(g, max_length=3)
    assert_walks(g, capped)
    assert edge_coverage(g, capped) == 1.0 and len(capped) > len(paths)


def test_path_to_trace_rejects_non_walks() -> None:
    g = graph_of([("a", "b", "go"), ("c", "a", "x")], {"a", "c"})
    with pytest.raises(TlcError, match="not a walk"):
        path_to_trace(g, [("a", "b", "go"), ("c", "a", "x")])
    with pytest.raises(TlcError, match="empty path"):
        path_to_trace(g, [])
    trace = path_to_trace(g, [("c", "a", "x"), ("a", "b", "go")])
    assert [(s.index, s.action, s.vars["n"]) for s in trace.states] == [
        (1, None, "c"),
        (2, "x", "a"),
        (3, "go", "b"),
    ]


@st.composite
def random_graphs(draw: st.DrawFn) -> StateGraph:
    n = draw(st.integers(1, 12))
    nodes = [str(i) for i in range(n)]
    edges = draw(
        st.lists(
            st.tuples(st.sampled_from(nodes), st.sampled_from(nodes), st.sampled_from("abc")),
            max_size=40,
            unique=True,
        )
    )
    initial = draw(st.sets(st.sampled_from(nodes), min_size=1))
    return graph_of(edges, initial)


@settings(max_examples=200, deadline=None)
@given(random_graphs(), st.none() | st.integers(1, 5))
def test_covering_paths_cover_everything(graph: StateGraph, max_length: int | None) -> None:
    paths = covering_paths(graph, max_length=max_length)
    assert_walks(graph, paths)
    assert edge_coverage(graph, paths) == 1.0


def test_covering_paths_scale() -> None:
    # a 60x60 grid (7,000 edges) must stay fast and need few walks
    side = 60
    edges = []
    for i in range(side):
        for j in range(side):
            here = f"{i},{j}"
            edges.append((here, f"{(i + 1) % side},{j}", "down"))
            edges.append((here, f"{i},{(j + 1) % side}", "right"))
    g = graph_of(edges, {"0,0"})
    start = time.monotonic()
    paths = covering_paths(g)
    assert time.monotonic() - start < 5
    assert edge_coverage(g, paths) == 1.0
    assert [len(p) for p in paths] == [len(edges)]  # balanced: one tour, each edge once
