"""Is a model's state graph closed under the permutations its SYMMETRY names?

TLC's symmetry reduction explores one state per orbit; it is sound for
invariants only if the spec is symmetric: every permutation of the model
values maps initial states to initial states and steps to steps (and the
invariants do not name a permuted value, which is a matter of their text).
This module checks the first part on the whole state graph of a small
instance: the model's cfg with its SYMMETRY, invariants and properties
removed and MaxIssues (and other bounds, if asked) lowered, dumped by TLC
(``-dump dot,actionlabels``), then every state and every labelled edge
mapped through each transposition of the permuted sets (transpositions
generate every permutation) must be in the graph again.

TLC prints a model value and a string alike (``k1``, ``"k1"``), so the
permuted names must not occur as strings in the spec: ``check_symmetry``
refuses a spec that writes one.
"""

from __future__ import annotations

import itertools
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shmref.tlc.graph import StateGraph, parse_dot
from shmref.tlc.runner import run_tlc
from shmref.tlc.tlavalues import FrozenDict, TlcError

# SYMMETRY definition (MCStorage.tla) -> the cfg constants whose values it permutes
PERMUTED: dict[str, tuple[str, ...]] = {
    "ReaderSymmetry": ("Readers",),
    "KeySymmetry": ("Keys",),
    "KeyReaderSymmetry": ("Keys", "Readers"),
}

_SYMMETRY = re.compile(r"^SYMMETRY\s+(\w+)\s*$", re.M)
_SECTION = re.compile(
    r"^(INVARIANTS?|PROPERTY|PROPERTIES|SYMMETRY)\b.*?(?=^[A-Z]+\b|\Z)", re.M | re.S
)
_MAX_ISSUES = re.compile(r"^(\s*MaxIssues\s*=\s*)(\d+)", re.M)


@dataclass(frozen=True)
class SymmetryReport:
    """What one closure check saw: the graph's size and the first break, if any."""

    model: str
    symmetry: str
    states: int
    edges: int
    transpositions: int
    broken: str | None

    @property
    def closed(self) -> bool:
        return self.broken is None


def symmetry_of(cfg_text: str) -> str | None:
    """The SYMMETRY definition a cfg names, or None."""
    m = _SYMMETRY.search(cfg_text)
    return m.group(1) if m else None


def constant_set(cfg_text: str, name: str) -> list[str]:
    """The model values of `name = {a, b, ...}` in a cfg."""
    m = re.search(rf"^\s*{name}\s*=\s*\{{([^}}]*)\}}", cfg_text, re.M)
    if m is None:
        raise TlcError(f"the cfg does not set {name} to a set of model values")
    return [v.strip() for v in m.group(1).split(",") if v.strip()]


def _setter(value: str) -> Callable[[re.Match[str]], str]:
    return lambda m: m.group(1) + value


def small_cfg(cfg_text: str, max_issues: int, bounds: Mapping[str, str] | None = None) -> str:
    """The cfg without symmetry, invariants and properties, MaxIssues at most
    `max_issues` and the constants in `bounds` set to the values given."""
    text = _SECTION.sub("", cfg_text)
    text = _MAX_ISSUES.sub(lambda m: m.group(1) + str(min(int(m.group(2)), max_issues)), text)
    for name, value in (bounds or {}).items():
        line = re.compile(rf"^(\s*{name}\s*=\s*).*$", re.M)
        text, n = line.subn(_setter(value), text)
        if n != 1:
            raise TlcError(f"the cfg does not set {name} once")
    return text


def permute(value: Any, mapping: Mapping[str, str]) -> Any:
    """`value` with every model value named in `mapping` replaced."""
    if isinstance(value, str):
        return mapping.get(value, value)
    if isinstance(value, FrozenDict):
        return FrozenDict({permute(k, mapping): permute(v, mapping) for k, v in value.items()})
    if isinstance(value, frozenset):
        return frozenset(permute(v, mapping) for v in value)
    if isinstance(value, tuple):
        return tuple(permute(v, mapping) for v in value)
    return value


def transpositions(values: list[str]) -> list[dict[str, str]]:
    """Every swap of two of `values` (they generate the whole permutation group)."""
    return [{a: b, b: a} for a, b in itertools.combinations(values, 2)]


def closure_break(graph: StateGraph, swaps: list[dict[str, str]]) -> str | None:
    """The first state or step whose image under a swap is not in `graph`, or None.

    Each distinct value (of any variable) is numbered and permuted once per
    swap; a state is the tuple of its variables' numbers, so the image of
    every state is looked up without permuting or hashing whole states."""
    names = sorted({name for state in graph.states.values() for name in state})
    number: dict[Any, int] = {}
    values: list[Any] = []

    def code(value: Any) -> int:
        found = number.get(value)
        if found is None:
            found = number[value] = len(values)
            values.append(value)
        return found

    keys = {
        node: tuple(code(state.get(name, _ABSENT)) for name in names)
        for node, state in graph.states.items()
    }
    node_of = {key: node for node, key in keys.items()}
    steps = set(graph.edges)
    for swap in swaps:
        name = "(" + " ".join(sorted(swap)) + ")"
        moved = [number.get(permute(value, swap), -1) for value in values]
        image: dict[str, str] = {}
        for node, key in keys.items():
            found = node_of.get(tuple(moved[c] for c in key))
            if found is None:
                state = graph.states[node]
                return f"state {node} under {name} is not reachable: {dict(state)}"
            if (node in graph.initial) != (found in graph.initial):
                return f"initial state {node} under {name} is not initial"
            image[node] = found
        for a, b, act in graph.edges:
            if (image[a], image[b], act) not in steps:
                return f"the step {act} from state {a} under {name} is not a step"
    return None


_ABSENT = object()  # a variable a state lacks (TLC prints every one: never in practice)


def check_symmetry(
    model: str,
    spec_dir: Path,
    tla: Path,
    cfg: Path,
    *,
    max_issues: int = 2,
    bounds: Mapping[str, str] | None = None,
) -> SymmetryReport:
    """Dump the small instance of `model` and check its graph's closure."""
    cfg_text = cfg.read_text()
    symmetry = symmetry_of(cfg_text)
    if symmetry is None or symmetry not in PERMUTED:
        raise TlcError(f"{model}: no SYMMETRY this check knows ({symmetry})")
    names = [v for const in PERMUTED[symmetry] for v in constant_set(cfg_text, const)]
    for src in spec_dir.glob("*.tla"):
        for v in names:
            if f'"{v}"' in src.read_text():
                raise TlcError(f'{src.name} writes the string "{v}", a permuted model value')
    swaps = [
        swap
        for const in PERMUTED[symmetry]
        for swap in transpositions(constant_set(cfg_text, const))
    ]
    with tempfile.TemporaryDirectory(prefix="shmref-sym-") as tmp:
        work = Path(tmp) / "spec"
        shutil.copytree(spec_dir, work)
        small = work / f"{model}-small.cfg"
        small.write_text(small_cfg(cfg_text, max_issues, bounds))
        dot = Path(tmp) / "graph.dot"
        run = run_tlc(
            work / tla.name, small, dump_dot=dot, extra_args=["-deadlock"], workers=1, short=True
        )
        if run.outcome != "ok":
            raise TlcError(f"{model}: the small instance did not check: {run.summary()}")
        graph = parse_dot(dot)
    broken = closure_break(graph, swaps)
    return SymmetryReport(model, symmetry, len(graph.states), len(graph.edges), len(swaps), broken)
