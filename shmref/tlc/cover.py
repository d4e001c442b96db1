"""Walks from the initial states that together take every reachable edge of
a TLC state graph: what the state-graph property replays, step by step.

A replay costs what its steps cost, and on a store in another process each
walk also costs a ring made and closed. So the walks are few and their steps
not many more than the edges:

- Inside each strongly connected component every edge is taken by one
  closed tour (Hierholzer's), once the component is balanced: from each
  state with more ways in than out, paths to the nearest states with more
  ways out than in (nearest pairs first), taken twice (the Chinese postman's
  cover, with a greedy matching). A component is never left while an edge
  of its own is untaken: a walk cannot come back to it.
- The edges between components then go by walks from the nearest untaken
  one, each walk going on to the nearest untaken edge out of the component
  it entered.

A tour longer than `max_length` is cut, each piece starting with the
shortest way to its first state. Every order here is the graph file's or
the breadth-first search's: the same graph gives the same walks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence

from shmref.tlc.graph import Edge, StateGraph, reachable_bfs


def covering_paths(graph: StateGraph, *, max_length: int | None = None) -> list[list[Edge]]:
    """Walks from initial states that take every reachable edge (self-loops
    included) at least once; `max_length` caps a walk (a piece of a tour may
    exceed it by the shortest way to its start; a walk between components by
    the shortest way to its first edge and one more)."""
    cover = _Cover(graph)
    walks: list[list[Edge]] = []
    for members in cover.components:
        tour = cover.tour(members)
        if tour:
            walks.extend(cover.pieces(tour, max_length))
    walks.extend(cover.crossings(max_length))
    return walks


class _Cover:
    """The reachable graph, its components and the edges still untaken."""

    def __init__(self, graph: StateGraph) -> None:
        self.dist, self.parent, out = reachable_bfs(graph)
        self.order = {node: i for i, node in enumerate(self.dist)}  # breadth-first order
        self.component = _components(list(self.dist), out)
        self.inner: dict[str, list[Edge]] = {}  # each state's edges within its component
        self.crossing: list[Edge] = []  # edges from one component to another, nearest first
        for node in self.dist:
            for e in out.get(node, ()):
                if self.component[e[1]] == self.component[node]:
                    self.inner.setdefault(node, []).append(e)
                else:
                    self.crossing.append(e)
        self.crossing.sort(key=lambda e: self.dist[e[0]])
        grouped: dict[int, list[str]] = {}
        for node in self.dist:
            grouped.setdefault(self.component[node], []).append(node)
        self.components = list(grouped.values())  # each in breadth-first order
        self.untaken = set(self.crossing)
        self.exits: dict[str, deque[Edge]] = {}  # each state's untaken crossing edges
        self.exits_left: dict[int, int] = {}  # untaken crossing edges out of each component
        for e in self.crossing:
            self.exits.setdefault(e[0], deque()).append(e)
            c = self.component[e[0]]
            self.exits_left[c] = self.exits_left.get(c, 0) + 1

    # -- inside a component ----------------------------------------------------------------

    def tour(self, members: Sequence[str]) -> list[Edge]:
        """A closed walk from the component's state nearest an initial one
        that takes each of its edges (and the balancing paths)."""
        edges = {node: list(self.inner.get(node, ())) for node in members}
        if not any(edges.values()):
            return []
        for path in self.balancing(members):
            for e in path:
                edges[e[0]].append(e)
        tour = _euler(members[0], edges)
        if len(tour) != sum(map(len, edges.values())):  # not balanced: a bug here
            raise AssertionError(f"the tour of the component of {members[0]} misses edges")
        return tour

    def balancing(self, members: Sequence[str]) -> Iterator[list[Edge]]:
        """Paths, each from a state with more ways in than out to one with
        more ways out than in, that leave every state with as many of each:
        all searches widened one step at a time, so nearer pairs match first."""
        surplus: dict[str, int] = {}
        for node in members:
            for e in self.inner.get(node, ()):
                surplus[e[1]] = surplus.get(e[1], 0) + 1
                surplus[node] = surplus.get(node, 0) - 1
        wanted = {node: -n for node, n in surplus.items() if n < 0}  # more ways out
        searches = {node: _search(node) for node in members if surplus.get(node, 0) > 0}
        while searches:
            for start in list(searches):
                back, layer = searches[start]
                reached = self.widen(back, layer)
                for node in reached:
                    while wanted.get(node) and surplus[start]:
                        wanted[node] -= 1
                        surplus[start] -= 1
                        yield _walk_back(back, node)
                    if not surplus[start]:
                        break
                if surplus[start] and reached:
                    searches[start] = (back, reached)
                else:  # matched (a balanced component never runs dry)
                    del searches[start]

    def widen(self, back: dict[str, Edge | None], layer: list[str]) -> list[str]:
        """The next layer of a breadth-first search within the component."""
        reached = []
        for node in layer:
            for e in self.inner.get(node, ()):
                if e[1] not in back:
                    back[e[1]] = e
                    reached.append(e[1])
        return reached

    def pieces(self, tour: list[Edge], max_length: int | None) -> Iterator[list[Edge]]:
        """The tour as walks: each piece from an initial state."""
        step = max_length or len(tour)
        for at in range(0, len(tour), step):
            piece = tour[at : at + step]
            walk = self.prefix(piece[0][0]) + piece
            self.take(walk)
            yield walk

    # -- between components ----------------------------------------------------------------

    def crossings(self, max_length: int | None) -> Iterator[list[Edge]]:
        """Walks that take the untaken edges between components: the nearest
        first, then on, by the component each enters, to its nearest untaken
        way out."""
        for first in self.crossing:
            if first not in self.untaken:
                continue
            walk = self.prefix(first[0]) + [first]
            self.take(walk)
            while max_length is None or len(walk) < max_length:
                more = self.way_out(walk[-1][1])
                if more is None:
                    break
                walk.extend(more)
                self.take(more)
            yield walk

    def way_out(self, start: str) -> list[Edge] | None:
        """The shortest way within `start`'s component to an untaken edge out
        of it, and that edge; None if there is none."""
        if not self.exits_left.get(self.component[start]):
            return None
        back, layer = _search(start)
        while layer:
            for node in layer:
                exits = self.exits.get(node)
                while exits and exits[0] not in self.untaken:
                    exits.popleft()
                if exits:
                    return _walk_back(back, node) + [exits[0]]
            layer = self.widen(back, layer)
        return None

    def prefix(self, node: str) -> list[Edge]:
        """The breadth-first tree's path from an initial state to `node`."""
        walk: list[Edge] = []
        while node in self.parent:
            e = self.parent[node]
            walk.append(e)
            node = e[0]
        walk.reverse()
        return walk

    def take(self, edges: Iterable[Edge]) -> None:
        for e in edges:
            if e in self.untaken:
                self.untaken.remove(e)
                self.exits_left[self.component[e[0]]] -= 1


def _components(nodes: list[str], out: dict[str, list[Edge]]) -> dict[str, int]:
    """Each node's strongly connected component (Kosaraju's, without recursion)."""
    finished: list[str] = []
    seen: set[str] = set()
    for root in nodes:
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(out.get(root, ())))]
        while stack:
            node, edges = stack[-1]
            for e in edges:
                if e[1] not in seen:
                    seen.add(e[1])
                    stack.append((e[1], iter(out.get(e[1], ()))))
                    break
            else:
                finished.append(node)
                stack.pop()
    into: dict[str, list[str]] = {}
    for node in nodes:
        for e in out.get(node, ()):
            into.setdefault(e[1], []).append(node)
    component: dict[str, int] = {}
    for number, root in enumerate(r for r in reversed(finished) if r not in component):
        component[root] = number
        todo = [root]
        while todo:
            for source in into.get(todo.pop(), ()):
                if source not in component:
                    component[source] = number
                    todo.append(source)
    return component


def _search(start: str) -> tuple[dict[str, Edge | None], list[str]]:
    """A breadth-first search from `start`: each state's way in, the last layer."""
    return {start: None}, [start]


def _euler(start: str, edges: dict[str, list[Edge]]) -> list[Edge]:
    """Hierholzer's closed walk from `start` taking each edge once (every
    state has as many ways in as out, all reachable from `start`)."""
    next_edge = dict.fromkeys(edges, 0)
    stack: list[tuple[str, Edge | None]] = [(start, None)]
    circuit: list[Edge] = []
    while stack:
        node, via = stack[-1]
        at = next_edge[node]
        if at < len(edges[node]):
            next_edge[node] = at + 1
            e = edges[node][at]
            stack.append((e[1], e))
        else:
            stack.pop()
            if via is not None:
                circuit.append(via)
    circuit.reverse()
    return circuit


def _walk_back(back: dict[str, Edge | None], end: str) -> list[Edge]:
    """The edges that led to `end`, from the start, by each state's way in."""
    walk: list[Edge] = []
    node = end
    while (step := back[node]) is not None:
        walk.append(step)
        node = step[0]
    walk.reverse()
    return walk
