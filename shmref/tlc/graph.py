"""TLC's ``-dump dot,actionlabels`` state graph (the walks that cover it: shmref.tlc.cover)."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shmref.tlc.tlavalues import TlcError, parse_state, parse_value, split_assignment
from shmref.tlc.toolout import State, Trace

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
_DOT_ESCAPE = re.compile(r"\\(.)")


def _dot_unescaped(match: re.Match[str]) -> str:
    return _DOT_ESCAPES.get(match.group(1), match.group(1))


def _dot_unescape(label: str) -> str:
    if "\\" not in label:  # most edge labels: an action's name
        return label
    # The escapes a state's label is made of, by plain replacement (a regex
    # call per escape cost more than TLC's dump); an escaped backslash is held
    # apart first, so that "\\\\n" stays a backslash and an n.
    text = label.replace("\\\\", "\0").replace('\\"', '"')
    text = text.replace("\\n", "\n").replace("\\l", "\n").replace("\\r", "\n")
    if "\\" in text:
        text = _DOT_ESCAPE.sub(_dot_unescaped, text)
    return text.replace("\0", "\\")


def parse_dot(path: Path) -> StateGraph:
    """Parse TLC's ``-dump dot,actionlabels`` file (initial states are the
    nodes drawn ``style = filled``)."""
    path = Path(path)
    if not path.is_file():
        raise TlcError(f"dot file {path} does not exist")
    return parse_dot_text(path.read_text(encoding="utf-8", errors="replace"), str(path))


def parse_dot_text(text: str, path: str) -> StateGraph:
    """A ``-dump dot,actionlabels`` file's text; `path` names it in errors."""
    if "digraph" not in text:
        raise TlcError(f"{path}: not a Graphviz digraph")
    reader = _DotReader(path)
    reader.read(text.splitlines())
    edges = reader.edges
    missing = {e[0] for e in edges}
    missing.update([e[1] for e in edges])
    missing.difference_update(reader.states)
    if missing:
        raise TlcError(
            f"{path}: edges mention undeclared states {sorted(missing)[:3]} (file cut off?)"
        )
    return StateGraph(reader.states, reader.initial, edges)


_LABEL_OPEN = ' [label="'
# A state's label is its lines "/\ name = value" with the backslash and the
# line break escaped: /\\ name = value\n/\\ name = value...
_STATE_HEAD = "/\\\\ "
_STATE_SEP = "\\n/\\\\ "
_LABEL_BODY = re.compile(r'(?:[^"\\]|\\.)*')  # _DOT_LABEL's text between the quotes


def _is_id(text: str) -> bool:
    """A node id as _DOT_NODE/_DOT_EDGE read it (ASCII only, or the regex decides)."""
    digits = text[1:] if text[:1] == "-" else text
    return digits.isascii() and digits.isdigit()


class _Segments(dict[str, tuple[str, Any] | None]):
    """A state label's raw segment (one ``name = value``, escapes and all) ->
    the variable and its value, or None where only the regexes and
    parse_state can tell.  Most segments recur in many states: each distinct
    one is unescaped, checked and parsed once."""

    def __init__(self, values: dict[str, Any]) -> None:
        super().__init__()
        self.parsed = values

    def __missing__(self, raw: str) -> tuple[str, Any] | None:
        found = self[raw] = self._read(raw)
        return found

    def _read(self, raw: str) -> tuple[str, Any] | None:
        # Whole escapes only (so the segments unescape as the label would),
        # and no NUL (_dot_unescape's stand-in for an escaped backslash).
        if "\0" in raw or _LABEL_BODY.fullmatch(raw) is None:
            return None
        pair = split_assignment(_dot_unescape(raw))
        if pair is None:
            return None
        name, text = pair
        if text not in self.parsed:
            try:
                self.parsed[text] = parse_value(text)
            except TlcError:
                return None  # parse_state says what is wrong, and where
        return name, self.parsed[text]


class _DotReader:
    """parse_dot_text's graph so far.  The lines TLC writes are read by plain
    string operations (a regex match per line and per state line was half
    of the symmetry check's time); any other line, and any label whose
    reading could differ, is read by the regexes and parse_state."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.states: dict[str, dict[str, Any]] = {}
        self.initial: set[str] = set()
        self.edges: list[Edge] = []
        self.seen: set[Edge] = set()
        self.values: dict[str, Any] = {}  # a value's text -> the value, shared by the states
        self.segments = _Segments(self.values)
        self.ids: set[str] = set()  # the node ids seen to be plain numbers

    def read(self, lines: Iterable[str]) -> None:
        """The dot file's lines: nodes and edges (the rest is Graphviz's framing)."""
        for number, raw in enumerate(lines, 1):
            line = raw.strip()
            if line and (line[0].isdigit() or line[0] == "-") and not self.read_plainly(line):
                self.read_slowly(number, line)

    def read_plainly(self, line: str) -> bool:
        """A node, or an edge whose label has no escape, read without a regex;
        False if the line needs them."""
        opener = line.find(_LABEL_OPEN)
        if opener < 0 or not line.endswith(("]", "];")):
            return False
        arrow = line.find(" -> ", 0, opener)
        if arrow < 0:
            return self.node(line, line[:opener], opener)
        label_end = line.find('"', opener + len(_LABEL_OPEN))
        label = line[opener + len(_LABEL_OPEN) : label_end]
        src, dst = line[:arrow], line[arrow + 4 : opener]
        if label_end < 0 or "\\" in label or not (self.is_id(src) and self.is_id(dst)):
            return False
        self.add_edge((src, dst, label))
        return True

    def is_id(self, text: str) -> bool:
        """_is_id, remembered: a node's id recurs in each of its edges."""
        if text in self.ids:
            return True
        if _is_id(text):
            self.ids.add(text)
            return True
        return False

    def node(self, line: str, node: str, opener: int) -> bool:
        """``node [label="state"...]`` for a new node whose label's every
        segment reads plainly (the label then ends at the line's last quote)."""
        start = opener + len(_LABEL_OPEN) + len(_STATE_HEAD)
        end = line.rfind('"')
        if end < start or not line.startswith(_STATE_HEAD, start - len(_STATE_HEAD)):
            return False
        if node in self.states or not self.is_id(node):
            return False
        pieces = line.split(_STATE_SEP)  # the line's text before the label holds none
        after = len(line) - end  # the closing quote and what follows it
        if len(pieces[-1]) < after:
            return False  # a separator after the last quote
        pieces[-1] = pieces[-1][:-after]
        pieces[0] = pieces[0][start:]
        pairs = list(map(self.segments.__getitem__, pieces))
        if None in pairs:
            return False
        state = dict(pairs)  # type: ignore[arg-type]
        if len(state) != len(pairs):
            return False  # a variable twice: parse_state's error
        self.states[node] = state
        if line.find("filled", end + 1) >= 0:
            self.initial.add(node)
        return True

    def read_slowly(self, number: int, line: str) -> None:
        """A line as the regexes read it (a state's label by parse_state)."""
        edge = _DOT_EDGE.match(line)
        if edge is not None:
            self.add_edge((edge.group(1), edge.group(2), _dot_unescape(edge.group(3) or "")))
            return
        node = _DOT_NODE.match(line)
        if node is None:
            raise TlcError(f"{self.path}:{number}: cannot parse dot line {line[:80]!r}")
        if node.group(1) not in self.states:
            try:
                label = _dot_unescape(node.group(2))
                self.states[node.group(1)] = parse_state(label, self.values)
            except TlcError as exc:
                raise TlcError(f"{self.path}:{number}: {exc}") from None
        if "filled" in node.group(3):
            self.initial.add(node.group(1))

    def add_edge(self, triple: Edge) -> None:
        """An edge the first time it comes: the graph keeps distinct triples."""
        if triple not in self.seen:
            self.seen.add(triple)
            self.edges.append(triple)


def reachable_bfs(
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


def edge_coverage(graph: StateGraph, paths: Iterable[Sequence[Edge]]) -> float:
    """Fraction of the edges reachable from the initial states that the paths
    take (1.0 when there is no such edge)."""
    dist, _, _ = reachable_bfs(graph)
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
