"""The side-by-side machine of test_layout.py: one Hypothesis-chosen sequence of
calls on the seed, on refimpl and on the implementation, each on its own segment,
compared call by call (results, exception kinds and, for the layout level,
addresses, ids and segment bytes)."""

from __future__ import annotations

import copy
import multiprocessing as mp
from contextlib import ExitStack
from types import ModuleType
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import refimpl
from shmref.contract import carries_bytes_values
from shmref.core.vocabulary import ACTIONS, documented_kind
from shmref.seed.aliases import SEED_ALIAS
from shmref.seed.impl import load_impl
from shmref.store.observe import Segment, first_difference
from shmref.store.readers import close_despite_cycles

BUFFER = 1024


MAX_OBJECT = 256


N_READERS = 2


KEYS = ("a", "b", "c", "d")


PLACING = {a.name for a in ACTIONS if a.places}  # calls that return (address, id)


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=120),
    st.binary(max_size=300),
    st.lists(st.integers(0, 2**16), max_size=40),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=6),
)


def call(fn, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args)
    except Exception as exc:  # compared between the two sides
        return documented_kind(exc), str(exc)


def reader_handle(handle: Any, lock: Any) -> Any:
    """The writer's handle (any implementation's: only its five documented
    fields are read) with the readers' lock: what a reader process receives."""
    handle = copy.copy(handle)
    handle.reader_lock = lock
    return handle


class Side:
    """One implementation's writer and readers on its own segment."""

    def __init__(
        self, impl: ModuleType, resources: ExitStack, serde: type | None, layout: bool
    ) -> None:
        """`serde`: the serde class to build the writer with (None: the
        implementation's default); `layout`: read the segment's bytes."""
        self.impl = impl
        self.ring = impl.SingleWriterShmRingBuffer(BUFFER, create=True)
        resources.callback(close_despite_cycles, self.ring.close)
        self.view = Segment(self.ring.handle()) if layout else None
        if self.view is not None:
            resources.callback(self.view.close)
        extra = {} if serde is None else {"serde_class": serde}
        self.writer = impl.SingleWriterShmObjectStorage(MAX_OBJECT, N_READERS, self.ring, **extra)
        lock = mp.get_context("spawn").Lock()
        self.readers = []
        for _ in range(N_READERS):
            reader = impl.SingleWriterShmObjectStorage.create_from_handle(
                reader_handle(self.writer.handle(), lock)
            )
            resources.callback(close_despite_cycles, reader.close)
            self.readers.append(reader)
        # (address, id, signature, key), in issue order
        self.issued: list[tuple[Any, ...] | None] = []

    def issue(self, key: str, result: tuple[str, Any]) -> None:
        if result[0] != "ok":
            self.issued.append(None)
            return
        address, monotonic_id = result[1]
        self.issued.append((address, monotonic_id, self.writer.get_signature(key), key))

    def segment(self) -> bytes:
        assert self.view is not None, "a side-by-side run without layout reads no bytes"
        return self.view.data()


class SideBySide(RuleBasedStateMachine):
    """The seed, refimpl and `impl` driven by the same calls."""

    impl: ModuleType
    layout = False  # also compare addresses, ids and segment bytes
    hardened = False  # refimpl's results only (not the seed's)

    def __init__(self) -> None:
        super().__init__()
        self.resources = ExitStack()
        try:
            # the implementation with its default serde; the seed and refimpl
            # with that serde class too (a store is judged, not its serde)
            self.imp = Side(self.impl, self.resources, None, self.layout)
            serde = self.imp.writer.handle().serde_class
            self.seed = Side(load_impl(SEED_ALIAS), self.resources, serde, self.layout)
            self.ref = Side(refimpl, self.resources, serde, self.layout)
        except BaseException:
            self.resources.close()
            raise
        self.inbox: list[list[int]] = [[] for _ in range(N_READERS)]  # issue numbers

    def teardown(self) -> None:
        self.resources.close()

    def same(self, what: str, want: tuple[str, Any], got: tuple[str, Any]) -> bool:
        if self.layout or what not in PLACING:
            return want[0] == got[0] and (want[0] != "ok" or want[1] == got[1])
        return want[0] == got[0]

    def both(self, what: str, fn, *args: Any) -> tuple[tuple[str, Any], ...]:
        """Run fn(side, *args) on every side; the implementation's outcome must
        be the seed's or, where refimpl's differs (a documented fix), refimpl's
        (hardened: refimpl's only). Values too, except handles, whose numbers
        are the layout's business. Returns the outcomes (seed, refimpl, impl)."""
        seed, ref, imp = (
            call(fn, self.seed, *args),
            call(fn, self.ref, *args),
            call(fn, self.imp, *args),
        )
        accepted = [ref] if self.hardened else [seed, ref]
        assert any(self.same(what, want, imp) for want in accepted), (
            f"{what}{args!r}: {self.impl.__name__} gave {_show(imp)}; the seed gave "
            f"{_show(seed)}, refimpl {_show(ref)}"
            + (" (hardened: refimpl's result is required)" if self.hardened else "")
        )
        return seed, ref, imp

    # -- writer ------------------------------------------------------------------

    @rule(key=st.sampled_from(KEYS), value=VALUES)
    def put(self, key, value):
        self._issued(key, self.both("put", lambda s: s.writer.put(key, value)))

    @rule(key=st.sampled_from(KEYS))
    def get_cached(self, key):
        cached = self.both("is_cached", lambda s: s.writer.is_cached(key))
        if all(c == ("ok", True) for c in cached):  # vLLM looks up only what is cached
            self._issued(key, self.both("get_cached", lambda s: s.writer.get_cached(key)))

    def _issued(self, key: str, outcomes: tuple[tuple[str, Any], ...]) -> None:
        """Each side records its own handle (None where its call failed), so
        that handle number n names the same object on every side; only
        handles every side issued are delivered to the readers."""
        for side, outcome in zip(self.sides, outcomes, strict=True):
            side.issue(key, outcome)
        if all(o[0] == "ok" for o in outcomes):
            for box in self.inbox:
                box.append(len(self.ref.issued) - 1)

    @property
    def sides(self) -> tuple[Side, Side, Side]:
        return self.seed, self.ref, self.imp

    def common(self) -> list[int]:
        return [
            n
            for n in range(len(self.ref.issued))
            if all(side.issued[n] is not None for side in self.sides)
        ]

    @rule(key=st.sampled_from(KEYS))
    def touch(self, key):
        self.both("touch", lambda s: s.writer.touch(key))

    @rule()
    def release_touches(self):
        self.both("release_touches", lambda s: s.writer.release_touches())

    @rule()
    def free_unused(self):
        self.both("free_unused", lambda s: s.writer.free_unused())

    @rule(roll=st.integers(0, 3))
    def clear(self, roll):
        if roll == 0:
            self.both("clear", lambda s: s.writer.clear())

    # -- readers -----------------------------------------------------------------

    @precondition(lambda self: any(self.inbox))
    @rule(data=st.data())
    def get(self, data):
        """A reader reads a handle delivered to it (each delivery once)."""
        reader = data.draw(st.sampled_from([r for r in range(N_READERS) if self.inbox[r]]))
        number = self.inbox[reader].pop(data.draw(st.integers(0, len(self.inbox[reader]) - 1)))
        self.both(
            "get",
            lambda s: s.readers[reader].get(*s.issued[number]),
        )

    @precondition(lambda self: self.common())
    @rule(data=st.data(), reader=st.integers(0, N_READERS - 1))
    def get_again(self, data, reader):
        """A reader reads an old handle again (stale, or counted twice)."""
        number = data.draw(st.sampled_from(self.common()))
        self.both("get", lambda s: s.readers[reader].get(*s.issued[number]))

    @precondition(lambda self: self.common())
    @rule(data=st.data(), reader=st.integers(0, N_READERS - 1))
    def reader_touch(self, data, reader):
        """A reader touches a handle (the receiver cache's touch): it must
        only validate it, not count a read."""
        number = data.draw(st.sampled_from(self.common()))

        def touch(side: Side) -> Any:
            address, monotonic_id, signature, key = side.issued[number]
            return side.readers[reader].touch(key, address, monotonic_id, signature)

        self.both("reader touch", touch)

    @precondition(lambda self: self.common())
    @rule(data=st.data())
    def get_on_writer(self, data):
        """The writer reads one of its own objects (no signature needed)."""
        number = data.draw(st.sampled_from(self.common()))
        self.both("writer get", lambda s: s.writer.get(*s.issued[number][:2]))

    @precondition(lambda self: self.common())
    @rule(data=st.data(), reader=st.integers(0, N_READERS - 1))
    def get_foreign_handle(self, data, reader):
        """A handle issued by another storage (another segment's secret): refused."""
        number = data.draw(st.sampled_from(self.common()))
        sides = self.sides
        other = {id(side): sides[(k + 1) % len(sides)] for k, side in enumerate(sides)}
        self.both(
            "get with another storage's handle",
            lambda s: s.readers[reader].get(*other[id(s)].issued[number]),
        )

    @precondition(lambda self: self.common() and not self.layout)  # valid calls only
    @rule(
        data=st.data(),
        reader=st.integers(0, N_READERS - 1),
        how=st.sampled_from(["signature", "key", "address", "id"]),
    )
    def get_forged(self, data, reader, how):
        number = data.draw(st.sampled_from(self.common()))

        def forged(side: Side) -> Any:
            issued = side.issued[number]
            assert issued is not None
            address, monotonic_id, signature, key = issued
            if how == "signature":
                signature = [(signature[0] + 1) % 256, *signature[1:]]
            elif how == "key":
                key = key + "x"
            elif how == "address":
                address += 16
            else:
                monotonic_id += 1
            return side.readers[reader].get(address, monotonic_id, signature, key)

        self.both("forged get", forged)

    @precondition(lambda self: not self.layout)  # valid calls only for layout
    @rule(
        reader=st.integers(0, N_READERS - 1),
        args=st.sampled_from(
            [
                (-1, 0),
                (0, -1),
                (None, 0),
                (0, None),
                (1.5, 0),
                (0, "0"),
                (2**64, 0),
                (0, 2**32),
                (True, 0),
            ]
        ),
    )
    def get_malformed(self, reader, args):
        self.both("malformed get", lambda s: s.readers[reader].get(*args, [0] * 32, "a"))

    @precondition(lambda self: not self.layout)  # valid calls only for layout
    @rule(key=st.sampled_from([None, 1, b"a"]))
    def put_bad_key(self, key):
        if isinstance(key, bytes) and not carries_bytes_values(self.imp.writer):
            return  # protocol version 1 sends no bytes value: b"a" twice is not one key there
        self.both("put", lambda s: s.writer.put(key, 1))

    # -- layout ------------------------------------------------------------------

    @invariant()
    def same_segment_bytes(self):
        """The seed's bytes (or, where refimpl's differ, refimpl's; hardened:
        refimpl's), read from each segment; a mismatch names the field."""
        if not self.layout:
            return
        imp = self.imp.segment()
        wanted = [self.ref] if self.hardened else [self.seed, self.ref]
        if any(side.segment() == imp for side in wanted):
            return
        reference = wanted[0]
        starts = [h[0] % BUFFER for h in reference.issued if h is not None]
        where = first_difference(reference.segment(), imp, starts)
        pytest.fail(
            f"segment of {self.impl.__name__} differs from {reference.impl.__name__}'s at {where}"
        )


def _show(outcome: tuple[str, Any]) -> str:
    status, value = outcome
    return repr(value) if status == "ok" else f"{status}({value!r})"


def machine(impl: ModuleType, layout: bool, hardened: bool = False) -> type[SideBySide]:
    cls: type[SideBySide] = type(
        "SideBySide", (SideBySide,), {"impl": impl, "layout": layout, "hardened": hardened}
    )
    cls.TestCase.settings = settings(cls.TestCase.settings, stateful_step_count=40)
    return cls
