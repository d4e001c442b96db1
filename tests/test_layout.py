"""The implementation under test side by side with refimpl.

- API compatibility (differential): one Hypothesis-chosen sequence of calls
  runs on refimpl and on the implementation, each on its own segment; every
  call must give the same value, or raise the same kind of exception
  (ValueError, MemoryError, KeyError; anything else by class name). Handles
  are compared only by what they do: the numbers in them are layout.
- Layout compatibility: the same sequence must give the same addresses and
  ids, and byte-for-byte the same segment (everything after the random
  32-byte secret); and a writer of one with readers of the other on ONE
  segment must work: handles and signatures verify across, reads count
  where the writer looks, stale and forged handles are refused.

The writer is built as vLLM builds it (no reader_lock); readers get the lock.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
from contextlib import ExitStack
from types import ModuleType
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import refimpl

BUFFER = 1024
MAX_OBJECT = 256
N_READERS = 2
KEYS = ("a", "b", "c", "d")
DOCUMENTED = (ValueError, MemoryError, KeyError)

VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False), st.text(max_size=120), st.binary(max_size=300),
    st.lists(st.integers(0, 2**16), max_size=40),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=6),
)


def kind(exc: BaseException) -> str:
    """What a caller can catch: the documented class it is, else its name."""
    for cls in DOCUMENTED:
        if isinstance(exc, cls):
            return cls.__name__
    return type(exc).__name__


def call(fn, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args)
    except Exception as exc:  # compared between the two sides
        return kind(exc), str(exc)


def reader_handle(impl: ModuleType, handle: Any, lock: Any) -> Any:
    """`handle` (any implementation's) as `impl`'s handle class, with `impl`'s
    serde and the readers' lock: what a reader process of `impl` receives."""
    fields = {f.name: getattr(handle, f.name) for f in dataclasses.fields(handle)}
    fields["reader_lock"] = lock
    fields["serde_class"] = getattr(impl, "MsgpackSerde", fields["serde_class"])
    cls = getattr(impl, "ShmObjectStorageHandle", type(handle))
    return cls(**fields)


class Side:
    """One implementation's writer and readers on its own segment."""

    def __init__(self, impl: ModuleType, resources: ExitStack) -> None:
        self.impl = impl
        self.ring = impl.SingleWriterShmRingBuffer(BUFFER, create=True)
        resources.callback(self.ring.close)
        self.writer = impl.SingleWriterShmObjectStorage(MAX_OBJECT, N_READERS, self.ring)
        lock = mp.get_context("spawn").Lock()
        self.readers = []
        for _ in range(N_READERS):
            reader = impl.SingleWriterShmObjectStorage.create_from_handle(
                reader_handle(impl, self.writer.handle(), lock))
            resources.callback(reader.close)
            self.readers.append(reader)
        self.issued: list[tuple] = []  # (address, id, signature, key), in issue order

    def issue(self, key: str, result: tuple[str, Any]) -> None:
        if result[0] == "ok":
            address, monotonic_id = result[1]
            self.issued.append((address, monotonic_id, self.writer.get_signature(key), key))

    def segment(self) -> bytes:
        offset = refimpl.SingleWriterShmRingBuffer.DATA_OFFSET
        return bytes(self.ring.shared_memory.buf[offset : offset + BUFFER])


class SideBySide(RuleBasedStateMachine):
    """refimpl and `impl` driven by the same calls."""

    impl: ModuleType
    layout = False  # also compare addresses, ids and segment bytes

    def __init__(self) -> None:
        super().__init__()
        self.resources = ExitStack()
        try:
            self.ref = Side(refimpl, self.resources)
            self.imp = Side(self.impl, self.resources)
        except BaseException:
            self.resources.close()
            raise
        self.inbox: list[list[int]] = [[] for _ in range(N_READERS)]  # issue numbers

    def teardown(self) -> None:
        self.resources.close()

    def both(self, what: str, fn, *args: Any) -> tuple[tuple[str, Any], tuple[str, Any]]:
        """Run fn(side, *args) on both sides; the outcomes must agree (values
        too, except handles, whose numbers are the layout's business)."""
        ref, imp = call(fn, self.ref, *args), call(fn, self.imp, *args)
        if self.layout or what not in ("put", "get_cached"):
            same = ref[0] == imp[0] and (ref[0] != "ok" or ref[1] == imp[1])
        else:
            same = ref[0] == imp[0]
        assert same, (f"{what}{args!r}: refimpl gave {_show(ref)}, "
                      f"{self.impl.__name__} gave {_show(imp)}")
        return ref, imp

    # -- writer ------------------------------------------------------------------

    @rule(key=st.sampled_from(KEYS), value=VALUES)
    def put(self, key, value):
        ref, imp = self.both("put", lambda s: s.writer.put(key, value), )
        self._issued(key, ref, imp)

    @rule(key=st.sampled_from(KEYS))
    def get_cached(self, key):
        ref, imp = self.both("is_cached", lambda s: s.writer.is_cached(key))
        if ref[1]:  # vLLM looks up only what is_cached says is there
            ref, imp = self.both("get_cached", lambda s: s.writer.get_cached(key))
            self._issued(key, ref, imp)

    def _issued(self, key: str, ref: tuple, imp: tuple) -> None:
        self.ref.issue(key, ref)
        self.imp.issue(key, imp)
        if ref[0] == "ok":
            for box in self.inbox:
                box.append(len(self.ref.issued) - 1)

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
        self.both("get", lambda s: s.readers[reader].get(*s.issued[number]), )

    @precondition(lambda self: self.ref.issued)
    @rule(data=st.data(), reader=st.integers(0, N_READERS - 1))
    def get_again(self, data, reader):
        """A reader reads an old handle again (stale, or counted twice)."""
        number = data.draw(st.integers(0, len(self.ref.issued) - 1))
        self.both("get", lambda s: s.readers[reader].get(*s.issued[number]))

    @precondition(lambda self: self.ref.issued and not self.layout)  # valid calls only
    @rule(data=st.data(), reader=st.integers(0, N_READERS - 1),
          how=st.sampled_from(["signature", "key", "address", "id"]))
    def get_forged(self, data, reader, how):
        number = data.draw(st.integers(0, len(self.ref.issued) - 1))

        def forged(side: Side) -> Any:
            address, monotonic_id, signature, key = side.issued[number]
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
    @rule(reader=st.integers(0, N_READERS - 1),
          args=st.sampled_from([(-1, 0), (0, -1), (None, 0), (0, None), (1.5, 0), (0, "0"),
                                (2**64, 0), (0, 2**32), (True, 0)]))
    def get_malformed(self, reader, args):
        self.both("malformed get", lambda s: s.readers[reader].get(*args, [0] * 32, "a"))

    @precondition(lambda self: not self.layout)  # valid calls only for layout
    @rule(key=st.sampled_from([None, 1, b"a"]))
    def put_bad_key(self, key):
        self.both("put", lambda s: s.writer.put(key, 1))

    # -- layout ------------------------------------------------------------------

    @invariant()
    def same_segment_bytes(self):
        if not self.layout:
            return
        ref, imp = self.ref.segment(), self.imp.segment()
        if ref != imp:
            at = next(i for i, (a, b) in enumerate(zip(ref, imp, strict=True)) if a != b)
            pytest.fail(f"segments differ first at data byte {at} (unit {at // 16}): "
                        f"refimpl {ref[at:at + 16].hex()} vs "
                        f"{self.impl.__name__} {imp[at:at + 16].hex()}")


def _show(outcome: tuple[str, Any]) -> str:
    status, value = outcome
    return repr(value) if status == "ok" else f"{status}({value!r})"


def machine(impl: ModuleType, layout: bool) -> type[SideBySide]:
    cls = type("SideBySide", (SideBySide,), {"impl": impl, "layout": layout})
    cls.TestCase.settings = settings(cls.TestCase.settings, stateful_step_count=40)
    return cls


def test_same_results_as_refimpl(impl):
    """API: same values and exception kinds as refimpl, call by call."""
    machine(impl, layout=False).TestCase().runTest()


def test_same_segment_bytes_as_refimpl(impl):
    """Layout: same addresses, ids and segment bytes as refimpl, call by call."""
    machine(impl, layout=True).TestCase().runTest()


# -- one segment, writer of one implementation, readers of the other ------------------


def share_one_segment(writer_impl: ModuleType, reader_impls: list[ModuleType]) -> None:
    """Objects put by `writer_impl` are read by readers of `reader_impls`,
    which count where the writer looks, and refuse stale and forged handles."""
    lock = mp.get_context("spawn").Lock()
    with ExitStack() as resources:
        ring = writer_impl.SingleWriterShmRingBuffer(BUFFER, create=True)
        resources.callback(ring.close)
        writer = writer_impl.SingleWriterShmObjectStorage(MAX_OBJECT, len(reader_impls), ring)
        readers = []
        for impl in reader_impls:
            reader = impl.SingleWriterShmObjectStorage.create_from_handle(
                reader_handle(impl, writer.handle(), lock))
            resources.callback(reader.close)
            readers.append(reader)
        values = {"int": 7, "str": "héllo" * 9, "bytes": bytes(range(200)),
                  "list": [1, [2, 3], None], "dict": {"a": 1, "b": [True, 1.5]}}
        handles = {}
        for key, value in values.items():
            address, monotonic_id = writer.put(key, value)
            handles[key] = (address, monotonic_id, writer.get_signature(key), key)
        for key, value in values.items():
            for reader in readers:
                assert reader.get(*handles[key]) == value, f"{key}: read back another value"
        address, monotonic_id, signature, key = handles["int"]
        for reader in readers:
            with pytest.raises(ValueError):
                reader.get(address, monotonic_id, [(signature[0] + 1) % 256, *signature[1:]], key)
            with pytest.raises(ValueError):
                reader.get(address, monotonic_id, signature, "str")
        # every reader read every object once: all reclaimable by the writer
        writer.free_unused()
        assert not any(writer.is_cached(k) for k in values), \
            "the writer did not see the readers' counts (counted elsewhere?)"
        # reuse the space: the old handle at that address is stale, the new one reads
        fresh = writer.put("fresh", "x" * 150)
        assert fresh[0] == handles["int"][0], "the emptied ring did not start again at 0"
        fresh_handle = (*fresh, writer.get_signature("fresh"), "fresh")
        for reader in readers:
            with pytest.raises(ValueError):
                reader.get(*handles["int"])
            assert reader.get(*fresh_handle) == "x" * 150


def test_refimpl_writer_impl_readers(impl):
    share_one_segment(refimpl, [impl, impl])


def test_impl_writer_refimpl_readers(impl):
    share_one_segment(impl, [refimpl, refimpl])


def test_mixed_readers_on_one_segment(impl):
    share_one_segment(refimpl, [impl, refimpl])
    share_one_segment(impl, [refimpl, impl])
