"""Replay a TLC trace on a real implementation, step by step.

Every state of a trace carries `last_action` (DESIGN.md): the action's name,
its arguments and its outcome. The replayer calls the same-named `Driver`
method with those arguments, on real shared memory sized by the model's
constants, and after every step compares the implementation with the TLC
state: ring start/end, id range, live chunks (id -> address), the writer's
index (`is_cached`), what each read returned, and the read counts only when
the store declares how to read them or the seed's layout is claimed
(`layout=True`): behaviour is judged through the API (shmref.store.driver).
At the first divergence it stops and reports a step-by-step table with the
ring drawn as the seed's docstring draws it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from shmref.core import tables, vocabulary
from shmref.render.build import Builder
from shmref.render.traceformat import Trace as Timeline
from shmref.store.driver import Driver, Outcome
from shmref.store.values import UNIT
from shmref.tlc.tlavalues import parse_value
from shmref.tlc.toolout import Trace
from shmref.traces.sendahead import SendAhead

RING_VARS = ("data_buffer_start", "data_buffer_end", "monotonic_id_start", "monotonic_id_end")


def read_constants(cfg: Path) -> dict[str, Any]:
    """`NAME = value` lines of a TLC model file (model values map to their names)."""
    constants: dict[str, Any] = {}
    for line in cfg.read_text().splitlines():
        match = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.+?)\s*$", line)
        if match and not line.lstrip().startswith("\\*"):
            constants[match.group(1)] = parse_value(match.group(2))
    return constants


def as_dict(value: Any) -> dict[Any, Any]:
    """A TLA+ function as a dict (TLC prints the empty function as <<>>)."""
    if isinstance(value, Mapping):
        return dict(value)
    if value == () or value is None:
        return {}
    if isinstance(value, tuple):  # a function on 1..n prints as a sequence
        return {i + 1: v for i, v in enumerate(value)}
    raise ValueError(f"not a function: {value!r}")


@dataclass
class Step:
    index: int
    action: str
    expected: str  # outcome in the spec
    got: str  # outcome of the implementation
    problems: list[str]
    drawing: str


@dataclass
class Replayed:
    """One replayed step as it happened, kept undrawn: most replays pass, and
    drawing every step cost more than replaying it (the state graph's 245k)."""

    index: int
    spec: Mapping[str, Any]  # the TLC state after the step
    action: Mapping[str, Any]  # its last_action
    outcome: Outcome
    observed: Mapping[str, Any]  # the implementation's state after it (Driver.observe)
    problems: list[str]
    unit: int  # the driver's bytes per unit


@dataclass
class ReplayReport:
    """What a replay saw: `ok`, the step table and the drawn timeline (both
    drawn when first asked for)."""

    name: str
    constants: Mapping[str, Any] = field(default_factory=dict)
    readers: list[str] = field(default_factory=list)
    replayed: list[Replayed] = field(default_factory=list)

    @property
    def diverged_at(self) -> int | None:
        for step in self.replayed:
            if step.problems:
                return step.index
        return None

    @property
    def ok(self) -> bool:
        return self.diverged_at is None

    @functools.cached_property
    def steps(self) -> list[Step]:
        """Each step with the ring drawn as the seed's docstring draws it."""
        n = self.constants["N"]
        drawn = []
        for r in self.replayed:
            got = r.outcome.status
            if got == "ok" and vocabulary.action(r.action["name"]).places:
                got = f"ok {tuple(r.outcome.result)}"  # the implementation's own numbers
            sizes = {a % n: size for a, size in _sizes(r.spec, n).items()}
            drawing = draw_ring(r.observed, n, sizes, r.unit)
            expected = r.action.get("outcome", "ok")
            drawn.append(Step(r.index, describe(r.action), expected, got, r.problems, drawing))
        return drawn

    @functools.cached_property
    def timeline(self) -> Timeline:
        """The same steps for the report's picture (shmref.render)."""
        drawn = Builder("replay", f"replay of {self.name}", self.constants, self.readers)
        for r in self.replayed:
            drawn.add(
                r.index,
                r.action,
                r.outcome.status,
                r.outcome.result,
                r.observed,
                expected=r.action.get("outcome", "ok"),
                note="DIVERGED: " + "; ".join(r.problems) if r.problems else "",
                diverged=bool(r.problems),
                spec_state=r.spec,
            )
            if r.problems and drawn.trace.verdict == "":
                drawn.trace.verdict = f"diverged at state {r.index}: {r.problems[0]}"
        return drawn.trace

    def table(self) -> str:
        head = f"replay of {self.name}: " + (
            "all steps match" if self.ok else f"diverged at state {self.diverged_at}"
        )
        rows = [
            (
                step.index,
                step.action,
                step.expected,
                step.got,
                "ok" if not step.problems else "DIVERGED: " + "; ".join(step.problems),
            )
            for step in self.steps
        ]
        drawings = [f"the ring at state {s.index}:\n{s.drawing}" for s in self.steps if s.problems]
        table = tables.text(("#", "action", "spec", "impl", "result"), rows)
        return "\n".join([head, table, *drawings])


def describe(action: Mapping[str, Any]) -> str:
    args = ", ".join(
        f"{k}={_show(v)}"
        for k, v in action.items()
        if k not in ("name", "outcome", "value", "freed")
    )
    return f"{action['name']}({args})"


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return "<<" + ", ".join(_show(v) for v in value) + ">>"
    return str(value)


def draw_ring(
    observed: Mapping[str, Any], n_units: int, sizes: Mapping[int, int], unit: int = UNIT
) -> str:
    """The ring as the seed's docstring draws it, in bytes, with ^start/^end."""
    metadata = observed.get("metadata", {})
    by_cell = {address % n_units: (i, address) for i, address in metadata.items()}
    cells: list[str] = []
    cell = 0
    while cell < n_units:
        if cell in by_cell:
            chunk_id, _address = by_cell[cell]
            size = max(sizes.get(cell, 1), 1)
            text = f"[id:{chunk_id}|size:{unit * size}|data"
            cells.append(text.ljust(12 * size - 1, ".") + "]")
            cell += size
        else:
            cells.append("[" + "." * 10 + "]")
            cell += 1
    line = "".join(cells)
    marks = []
    for name in ("data_buffer_start", "data_buffer_end"):
        if name in observed:
            marks.append(f"^{name.split('_')[-1]}({unit * observed[name]})")
    return "      " + line + "\n      " + "  ".join(marks)


class Replayer:
    """Replays traces of one model (its .cfg gives the constants) on `impl`."""

    def __init__(
        self,
        impl: ModuleType,
        cfg: Path,
        *,
        reader_processes: bool = False,
        serde_class: type | None = None,
        layout: bool = False,
    ) -> None:
        """`serde_class` and `layout` as for Driver: another serde scales the
        unit; `layout` claims the seed's bytes (counts are then compared)."""
        self.impl = impl
        self.serde_class = serde_class
        self.layout = layout
        self.constants = read_constants(cfg)
        self.reader_processes = reader_processes
        c = self.constants
        self.ring_only = "MAX_OBJ" not in c
        self.readers = sorted(c.get("Readers", ()))
        # What a step calls and what its state expects, worked out once per
        # action and state object: a state graph's walks pass the same states
        # again and again (MCRing's 245k steps visit 13k states). Each entry
        # keeps its key object, so an id is never taken for a new object's.
        self._calls: dict[int, tuple[Mapping[str, Any], Any]] = {}
        self._wanted: dict[int, tuple[Mapping[str, Any], dict[str, Any]]] = {}

    def driver(self) -> Driver:
        c = self.constants
        driver = Driver(
            self.impl,
            c["N"],
            n_readers=len(self.readers),
            id_max=c["ID_MAX"],
            max_obj=c.get("MAX_OBJ"),
            storage=not self.ring_only,
            reader_processes=self.reader_processes,
            serde_class=self.serde_class,
            layout=self.layout,
        )
        if c.get("FIXED") is False and hasattr(driver.writer, "RECLAIM_EXTRA"):
            driver.writer.RECLAIM_EXTRA = 0  # a model of the seed: its reclaim target
        return driver

    def replay(
        self, trace: Trace, name: str = "trace", stop_at_divergence: bool = True
    ) -> ReplayReport:
        report = ReplayReport(name, self.constants, [str(r) for r in self.readers])
        states = trace.states[1:]
        with self.driver() as driver:
            ahead = SendAhead(driver, trace.states, self.readers, self.call, stop_at_divergence)
            try:
                for at, state in enumerate(states):
                    ahead.before(at)  # a store program: the next calls sent together
                    action = state.vars["last_action"]
                    outcome = self.perform(driver, action, observed_next=True)
                    observed = driver.observe()
                    problems = self.compare(state.vars, observed, action, outcome)
                    report.replayed.append(
                        Replayed(
                            state.index,
                            state.vars,
                            action,
                            outcome,
                            observed,
                            problems,
                            driver.unit,
                        )
                    )
                    if problems and stop_at_divergence:
                        break
            finally:
                ahead.drop()
        return report

    # -- one step ------------------------------------------------------------------

    def reader(self, name: Any) -> int:
        return self.readers.index(name)

    def call(
        self, action: Mapping[str, Any], readers: Sequence[Any] = ()
    ) -> tuple[str, tuple[Any, ...], dict[str, Any]] | None:
        """step_call for this model's readers, once per action object."""
        known = self._calls.get(id(action))
        if known is None or known[0] is not action:
            known = self._calls[id(action)] = (action, step_call(action, self.readers))
        call: tuple[str, tuple[Any, ...], dict[str, Any]] | None = known[1]
        return call

    def perform(
        self, driver: Driver, action: Mapping[str, Any], observed_next: bool = False
    ) -> Outcome:
        """The step's call; `observed_next`: `driver.observe()` is the caller's
        next call of the store (Driver.observed_after)."""
        call = self.call(action)
        if call is None:  # an environment step: nothing to call
            return Outcome("ok")
        name, args, kwargs = call
        with driver.observed_after(name) if observed_next else nullcontext():
            outcome: Outcome = getattr(driver, name)(*args, **kwargs)
        return outcome

    def wanted(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """A TLC state's variables as the driver observes them (once per state object)."""
        known = self._wanted.get(id(spec))
        if known is None or known[0] is not spec:
            wanted = {var: spec[var] for var in RING_VARS if var in spec}
            wanted["metadata"] = as_dict(spec.get("metadata"))
            if not self.ring_only:
                key_index = as_dict(spec.get("key_index"))
                wanted["key_index"] = {k: tuple(v) for k, v in key_index.items()}
                wanted["writer_flag"] = as_dict(spec.get("writer_flag"))
                wanted["touched"] = set(spec.get("touched", ()))
            known = self._wanted[id(spec)] = (spec, wanted)
        return known[1]

    def compare(
        self,
        spec: Mapping[str, Any],
        observed: Mapping[str, Any],
        action: Mapping[str, Any],
        outcome: Outcome,
    ) -> list[str]:
        problems = []
        expected_outcome = action.get("outcome", "ok")
        if outcome.status != expected_outcome and not (
            action["name"] == "get_copy" and expected_outcome == "DeserializeError"
        ):
            problems.append(f"outcome {outcome.status} ({outcome.result}), spec {expected_outcome}")
        if action["name"] == "get_end" and expected_outcome == "ok" and outcome.status == "ok":
            cells = set(action.get("value", ()))
            want = next(iter(cells)) if len(cells) == 1 else "<foreign>"
            if outcome.result != want and not (
                want == "<foreign>" and outcome.result != action["handle"][0]
            ):
                problems.append(f"read returned {outcome.result}, spec {want}")
        if action["name"] == "free_buf" and outcome.status == "ok":
            if list(outcome.result) != list(action.get("freed", ())):
                problems.append(f"freed ids {outcome.result}, spec {list(action['freed'])}")
        wanted = self.wanted(spec)
        for var in RING_VARS:
            if var in observed and observed[var] != wanted.get(var):
                problems.append(f"{var} {observed[var]}, spec {wanted.get(var)}")
        if "metadata" in observed and observed["metadata"] != wanted["metadata"]:
            problems.append(f"metadata {observed['metadata']}, spec {wanted['metadata']}")
        if self.ring_only:
            return problems
        for var in ("key_index", "writer_flag", "touched"):
            if var in observed and observed[var] != wanted[var]:
                problems.append(f"{var} {observed[var]}, spec {wanted[var]}")
        if "counts" in observed:
            if "counts" not in wanted:
                count = as_dict(spec["count"])
                n = self.constants["N"]
                wanted["counts"] = {
                    i: count[(a % n) + 1 if 0 not in count else a % n]
                    for i, a in wanted["metadata"].items()
                }
            if observed["counts"] != wanted["counts"]:
                problems.append(f"counts {observed['counts']}, spec {wanted['counts']}")
        return problems


def step_call(
    action: Mapping[str, Any], readers: Sequence[Any]
) -> tuple[str, tuple[Any, ...], dict[str, Any]] | None:
    """The Driver method, positional and keyword arguments for a trace step
    (`last_action`), looked up in shmref.core.vocabulary, or None when the step
    calls nothing (a step of the environment, or get_check: the spec's
    SPLIT_END cuts get_end in two, one call cannot be stopped inside, so
    that window is not replayable). Readers are named in traces (`r1`) and
    numbered in the driver (their index in `readers`)."""
    try:
        spec = vocabulary.action(action["name"])
    except vocabulary.UnknownAction:
        raise ValueError(f"trace step {action['name']!r} has no implementation action") from None
    if spec.driver is None:
        return None
    args = tuple(
        readers.index(action[a])
        if a == "reader"
        else tuple(action[a])
        if a == "handle"
        else action[a]
        for a in spec.arguments
    )
    outcome = action.get("outcome")
    kwargs = {keyword: True for caused, keyword in spec.inject if caused == outcome}
    return spec.driver, args, kwargs


def _sizes(spec: Mapping[str, Any], n: int) -> dict[int, int]:
    """Chunk sizes by physical cell, from the spec's header size fields."""
    sizes = as_dict(spec.get("hdr_size", ()))
    if sizes and 0 not in sizes:  # printed as a sequence: cells are 1-based
        return {cell - 1: size for cell, size in sizes.items()}
    return sizes
