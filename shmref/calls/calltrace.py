"""Every failing property drawn: the calls a suite test made on the store.

When a report asks for traces (the run's `trace_dir`), the implementation's two
classes are instrumented once: each public method and the constructors go
through a thin wrapper that remembers the test's outermost calls (method,
arguments as short text, outcome, result) and the ring they placed. It
changes no argument, result or exception and keeps only text, so a verdict
is the same with or without it. Not recorded: the store's calls to itself,
shmref's own checkers (machines, replays, hazards draw their own), and
Hypothesis's search (only its final run; the search is only streamed, for
a crash: shmref.calls.drawing). `save_failure` turns a failing test's
calls into a trace (source `calls`, or `hypothesis`) unless it left its own.

For tests outside the suite (FINDINGS' regression tests), this module is
also a pytest plugin: `pytest -p shmref.calls.calltrace --shmref-run FILE`
with a run configuration (shmref.core.runconfig) that has a `trace_dir`
instruments every store module a fixture returns and leaves each failing
test's calls as a trace; with `trace_passed`, a passing test's too (a
finding's demonstration passes on the seed: its calls are the picture).

One idea, catching the test's own calls as they are made: which calls are
the test's, the wrappers, the lanes and rings of the objects, the steps
kept, and the hooks that run all of it for a test. What a step shows (its
text, its ring, its line in the crash stream) is shmref.calls.drawing's,
which needs no wrapper.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from shmref.calls import drawing
from shmref.core.runconfig import current_run
from shmref.render import sink
from shmref.render.traceformat import Step, Trace

CLASSES = ("SingleWriterShmRingBuffer", "SingleWriterShmObjectStorage")
KEPT_HEAD, KEPT_TAIL = 12, 47  # a long test keeps its first and last calls
UNRECORDED = ("__del__",)  # the collector's close is not the test's call
# Calls shmref's own checkers make (the Driver under replays, machines,
# hazards and recordings) are drawn by those checks: not recorded (their
# thousands of calls would cost a fifth of a run). The suite's tests are.
SUITE = "shmref.suite"
_MARK = "__shmref_calltrace__"


@dataclass
class Seen:
    """An object of the implementation the test called: its lane and its ring."""

    lane: str
    ring: drawing.RingView | None = None


class Recorder:
    """The calls of the running test (see the module's docstring)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.local = threading.local()
        self.stream = drawing.Stream()  # for the oracle, should the process die in a call
        self.case = ""
        self.reset()

    def reset(self, case: str | None = None) -> None:
        """Start the record of a test (`case`: its name; None: the same test again)."""
        with self.lock:
            if case is not None:
                self.case = case
            if self.case:
                self.stream.case(self.case)
            self.head: list[Step] = []
            self.tail: deque[Step] = deque(maxlen=KEPT_TAIL)
            self.calls = 0
            self.objects: dict[int, tuple[Any, Seen]] = {}  # id -> (weak ref or None, seen)
            self.readers = 0
            self.last_ring: drawing.RingView | None = None
            self.hypothesis = False
            self.context: int | None = None
            self.example: int | None = None
            self.done = ""  # the outcome of the search's last streamed call
            self.broken = ""

    # -- whether this call is recorded ---------------------------------------------------------

    def recording(self) -> str:
        """ "full" outside Hypothesis and in its final run (which starts the
        record afresh); "light" in its search when the calls are streamed (a
        crash's example: the calls and outcomes, no ring); else ""."""
        try:
            from hypothesis.control import current_build_context

            context = current_build_context()
        except Exception:  # no Hypothesis test is running
            return "full"
        if not context.is_final:
            if not drawing.streamed_to():
                return ""
            if self.example != id(context):  # a new example: the stream starts again
                with self.lock:
                    self.example = id(context)
                    self.objects, self.readers, self.last_ring = {}, 0, None
                    self.done = ""
                self.stream.case(self.case)
            return "light"
        if self.context != id(context):
            self.reset(None)
            self.context, self.hypothesis = id(context), True
        return "full"

    # -- the objects -----------------------------------------------------------------------------

    def seen(self, obj: Any) -> Seen | None:
        """What the record knows of `obj` (None if new, or if only a dead object had its id)."""
        entry = self.objects.get(id(obj))
        if entry is None:
            return None
        ref, seen = entry
        if ref is not None and ref() is not obj:  # the id of an object that is gone
            del self.objects[id(obj)]
            return None
        return seen

    def meet(self, obj: Any, reader: bool, ring: drawing.RingView | None, lane: str = "") -> Seen:
        """Know `obj` from now on: a reader gets the next lane r1, r2, ..., else the writer's."""
        seen = self.seen(obj)
        if seen is not None:
            return seen
        if reader and not lane:
            self.readers += 1
            lane = f"r{self.readers}"
        seen = Seen(lane or "writer", ring)
        try:
            ref: Any = weakref.ref(obj)
        except TypeError:  # no weak references: known by id for this test
            ref = None
        self.objects[id(obj)] = (ref, seen)
        return seen

    def ring_of(self, obj: Any, bound: dict[str, Any], reader: bool) -> drawing.RingView | None:
        """A new object's ring: a writer ring's own (its size), a storage's
        (the ring it was given), else (a reader's) the last one the test made."""
        size = bound.get("data_buffer_size", drawing.attributes_of(obj).get("data_buffer_size"))
        ring = type(obj).__name__ == CLASSES[0]
        if ring and not reader and isinstance(size, int) and size > 0:
            view = drawing.RingView(size)
            try:
                view.source = weakref.ref(obj)
            except TypeError:  # no weak references: its positions are not shown
                pass
            return view
        for value in bound.values():
            if (known := self.seen(value)) is not None and known.ring is not None:
                return known.ring
        return self.last_ring

    # -- one call ------------------------------------------------------------------------------

    def call(
        self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kw: dict[str, Any]
    ) -> Any:
        """Make the call through `fn`; record it if it is the test's own (see the module)."""
        try:
            record = ""
            if not getattr(self.local, "depth", 0) and name not in UNRECORDED:
                caller = _caller_module()
                own = caller == getattr(fn, "__module__", None)  # the store calls itself
                if not own and not _drawn_elsewhere(caller):
                    record = self.recording()
            bound = drawing.bind(fn, args, kw) if record else {}
        except Exception:  # never in the way of the call
            record = ""
        if record == "light":
            return self.streamed(name, fn, args, kw, bound)
        if not record:
            return self.nested(fn, args, kw)
        self.local.depth = 1
        target = args[0] if args and name != "create_from_handle" else None
        self.begin(name, target, bound)
        try:
            result = fn(*args, **kw)
        except BaseException as exc:
            self.add(name, target, bound, exc.__class__.__name__, drawing.first_line(exc), None)
            raise
        finally:
            self.local.depth = 0
        self.add(name, target, bound, "ok", "", result)
        return result

    def begin(self, name: str, target: Any, bound: dict[str, Any], done: str = "") -> None:
        """The call about to be made, for the stream (before it can crash)."""
        if not drawing.streamed_to() or self.broken:
            return
        try:
            known = self.seen(target) if target is not None else None
            actor = known.lane if known is not None else "writer"
            action = type(target).__name__ if name == "__init__" else name
            self.stream.call(action, actor, drawing.shown_args(bound), done)
        except Exception:  # pragma: no cover - never in the way of the call
            pass

    def streamed(
        self,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kw: dict[str, Any],
        bound: dict[str, Any],
    ) -> Any:
        """A call of Hypothesis's search: only streamed, should it crash."""
        target = args[0] if args and name != "create_from_handle" else None
        self.begin(name, target, bound, self.done)
        try:
            result = self.nested(fn, args, kw)
        except BaseException as exc:
            self.done = exc.__class__.__name__  # said with the next call, or never needed
            raise
        self.done = "ok"
        if name in ("__init__", "create_from_handle"):  # the lanes of what follows
            with contextlib.suppress(Exception), self.lock:
                self.identify(name, target, bound, result, "ok")
        return result

    def nested(self, fn: Callable[..., Any], args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        """Make a call that is not recorded, nor any call it makes."""
        self.local.depth = getattr(self.local, "depth", 0) + 1
        try:
            return fn(*args, **kw)
        finally:
            self.local.depth -= 1

    def add(
        self, name: str, target: Any, bound: dict[str, Any], outcome: str, text: str, result: Any
    ) -> None:
        """Remember one call; a picture is never worth changing a call, so a
        problem here only stops the record of this test."""
        try:
            shown = text or ("" if result is None else drawing.short(result))
            self._add(name, target, bound, outcome, shown, result)
        except Exception as exc:  # pragma: no cover - a bug of ours, said in the picture
            self.broken = f"the calls were not recorded after call {self.calls}: {exc!r}"

    def _add(
        self, name: str, target: Any, bound: dict[str, Any], outcome: str, text: str, result: Any
    ) -> None:
        if self.broken:
            return
        with self.lock:
            seen = self.identify(name, target, bound, result, outcome)
            if name == "create_from_handle" and outcome == "ok":
                text = f"reader {seen.lane}"
            name = type(target).__name__ if name == "__init__" else name
            if seen.ring is not None and seen.lane == "writer":
                self.last_ring = seen.ring
            ring = seen.ring or self.last_ring
            if ring is not None and outcome == "ok":
                drawing.follow(ring, name, bound, result, seen.lane)
            if ring is not None and seen.lane == "writer":
                ring.positions = drawing.positions(ring) or ring.positions
            where = ring.positions if ring is not None else None
            self.calls += 1
            step = Step(
                self.calls,
                seen.lane,
                name,
                drawing.shown_args(bound),
                outcome,
                text,
                ring=ring.tracker.ring(where) if ring is not None else None,
            )
            (self.head if len(self.head) < KEPT_HEAD else self.tail).append(step)
            if drawing.streamed_to():
                self.stream.step(step, self.constants())

    def identify(
        self, name: str, target: Any, bound: dict[str, Any], result: Any, outcome: str
    ) -> Seen:
        """The object a call was made on (or made): its lane and its ring."""
        if name == "__init__":
            if type(target).__name__ == CLASSES[0]:
                reader = not ("create" in bound and bool(bound.get("create")))
            else:  # a storage is a reader's when its ring is, and shares its lane
                rings = [seen for v in bound.values() if (seen := self.seen(v)) is not None]
                lanes = [seen.lane for seen in rings if seen.lane != "writer"]
                if lanes:
                    return self.meet(target, True, self.last_ring, lanes[0])
                reader = False
            return self.meet(target, reader, self.ring_of(target, bound, reader))
        if name == "create_from_handle":
            return self.meet(result, True, self.last_ring) if outcome == "ok" else Seen("r?")
        return self.seen(target) or self.meet(
            target, drawing.attributes_of(target).get("is_writer") is False, self.last_ring
        )

    def constants(self) -> dict[str, int]:
        """The picture's constants: readers seen, and the last ring's cells and unit."""
        ring = self.last_ring
        drawn = {"N": ring.cells, "UNIT": ring.unit} if ring is not None else {}
        return {"R": self.readers, **drawn}

    # -- the trace -----------------------------------------------------------------------------

    def trace(self, case: str, failure: str) -> Trace | None:
        """The test's recorded calls as a trace ending in `failure`; None if it made none."""
        with self.lock:
            steps = [*self.head, *self.tail]
            if not steps:
                return None
            omitted = self.calls - len(steps)
            source = "hypothesis" if self.hypothesis else "calls"
            title = (
                f"Hypothesis falsifying example ({case})"
                if self.hypothesis
                else f"the calls of {case}"
            )
            constants = self.constants()
            trace = Trace(
                source,
                title,
                case=case,
                verdict=failure + (f" ({self.broken})" if self.broken else ""),
                constants=constants,
                readers=[f"r{k + 1}" for k in range(self.readers)],
                steps=steps,
                omitted=omitted,
                omitted_after=len(self.head) if omitted else None,
            )
            last = trace.steps[-1]
            last.diverged = True
            last.note = f"the test failed after this call: {failure}"
            return trace


def _drawn_elsewhere(module: str) -> bool:
    return module.startswith("shmref.") and not module.startswith(SUITE)


def _caller_module() -> str:
    """The module that made the call: the implementation's own (a context
    manager's body runs after its call returned) is not the test's call."""
    caller = sys._getframe(3)  # _caller_module <- call <- recorded <- the caller
    return str(caller.f_globals.get("__name__", ""))


# -- instrumenting the implementation ---------------------------------------------------------

RECORDER = Recorder()


def _wrapped(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def recorded(*args: Any, **kw: Any) -> Any:
        return RECORDER.call(name, fn, args, kw)

    return recorded


def _instrument_class(cls: type) -> None:
    if vars(cls).get(_MARK):
        return
    for name in dir(cls):
        if name.startswith("_") and name not in ("__init__", *UNRECORDED):
            continue
        member = inspect.getattr_static(cls, name)
        try:
            if isinstance(member, classmethod):
                setattr(cls, name, classmethod(_wrapped(name, member.__func__)))
            elif isinstance(member, staticmethod):
                setattr(cls, name, staticmethod(_wrapped(name, member.__func__)))
            elif inspect.isfunction(member):
                setattr(cls, name, _wrapped(name, member))
        except (AttributeError, TypeError):  # a class that cannot be changed: not drawn
            return
    try:
        setattr(cls, _MARK, True)
    except (AttributeError, TypeError):
        pass


def instrument(module: ModuleType) -> bool:
    """Record the calls on `module`'s classes (and, for writer and readers
    from two sides, the readers' classes too) when a report asks for traces.
    True if it did."""
    if not sink.trace_dir():
        return False
    sides = [module, getattr(module, "READERS", None), getattr(module, "WRITER", None)]
    for side in sides:
        for name in CLASSES:
            cls = getattr(side, name, None)
            if isinstance(cls, type):
                _instrument_class(cls)
    return True


def save_failure(case: str, failure: str) -> None:
    """Leave the failing test's calls as its trace, unless it left its own."""
    folder = sink.trace_dir()
    if not folder or (Path(folder) / sink.file_name(case)).exists():
        return
    trace = RECORDER.trace(case, failure)
    if trace is not None:
        sink.save(trace, case)


# -- the pytest plugin, for any test ------------------------------------------------------


def passed_kept() -> bool:
    """The run keeps a passing test's calls too (`trace_passed`)."""
    run = current_run()
    return run is not None and run.trace_passed


def case_name(item: pytest.Item) -> str:
    """A test as reports name it: `test_x.py::test_y[p]`."""
    return sink.case_of(item.nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup() -> Generator[None, Any, Any]:
    """Instrument a store module a fixture returns (when a report asks for traces).
    (pluggy passes a hook only the arguments it names: this one needs none.)"""
    value = yield
    if isinstance(value, ModuleType) and all(hasattr(value, c) for c in CLASSES):
        instrument(value)
    return value


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Each test starts its own record of calls."""
    RECORDER.reset(case_name(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Save a failed test's calls as its trace (a passed one's too if the run asks)."""
    report = yield
    if report.when == "call" and report.failed and call.excinfo is not None:
        save_failure(case_name(item), call.excinfo.exconly().splitlines()[0])
    elif report.when == "call" and report.passed and passed_kept():
        save_failure(case_name(item), "")
    return report
