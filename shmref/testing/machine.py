"""The Hypothesis state machine of the store, for anyone's tests.

`StoreMachine` steps the real implementation on shared memory with the
spec's actions (shmref.driver) and a pure model (shmref.model) beside it;
rules carry the spec's action names, and a read is three rules (get_begin,
get_copy, get_end) so that Hypothesis chooses how the writer interleaves
with reads in flight. Rules keep to the protocol's assumptions (A1: each
delivery is read once by each reader; A2: no clear while a read is in
flight, except the `clear_during_reads` rule, whose reads must end with
their own value or be refused).

    from shmref.testing import machine_for
    TestMyStore = machine_for(my_module).TestCase
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

import hypothesis.strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from shmref import tlc, vocabulary
from shmref.corpus import simulation_corpus
from shmref.driver import Driver, Outcome
from shmref.model import StoreModel
from shmref.paths import SPEC_DIR
from shmref.replay import read_constants, step_call

KEYS = ("a", "b", "c", "d", "e")


class StoreMachine(RuleBasedStateMachine):
    """One writer, R readers, a ring of N units (1 unit = 16 bytes)."""

    impl: ModuleType
    N, R, ID_MAX, MAX_OBJ = 8, 2, 5, 3
    reader_processes = False

    def __init__(self) -> None:
        super().__init__()
        self.driver = Driver(
            self.impl,
            self.N,
            n_readers=self.R,
            id_max=self.ID_MAX,
            max_obj=self.MAX_OBJ,
            reader_processes=self.reader_processes,
        )
        self.model = StoreModel(self.N, self.R, self.ID_MAX, self.MAX_OBJ)

    def teardown(self) -> None:
        self.driver.close()

    def step(self, name: str, *args: Any) -> Outcome:
        """Action `name` (shmref.vocabulary) on the implementation and on the
        model, which must agree on its outcome (and result, when the model
        knows it)."""
        method = vocabulary.action(name).driver
        assert method is not None, f"{name} calls nothing"
        real: Outcome = getattr(self.driver, method)(*args)
        expected = getattr(self.model, name)(*args)
        same = real.status == expected.status and (
            expected.result is None or real.result == expected.result
        )
        assert same, f"{name}{args}: implementation gave {real}, model expects {expected}"
        return real

    # -- writer ------------------------------------------------------------------

    @rule(key=st.sampled_from(KEYS), size=st.integers(1, 4))
    def put(self, key: str, size: int) -> None:
        self.step("put", key, size)

    @precondition(lambda self: self.model.key_index)
    @rule(data=st.data())
    def get_cached(self, data: st.DataObject) -> None:
        self.step("get_cached", data.draw(st.sampled_from(sorted(self.model.key_index))))

    @rule(data=st.data())
    def touch(self, data: st.DataObject) -> None:
        """Mostly a cached key (the interesting case), sometimes any key."""
        cached = sorted(self.model.key_index)
        keys = st.sampled_from(cached) if cached else st.sampled_from(KEYS)
        self.step("touch", data.draw(keys | st.sampled_from(KEYS)))

    @rule()
    def release_touches(self) -> None:
        self.step("release_touches")

    @rule()
    def free_unused(self) -> None:
        self.step("free_unused")

    @precondition(lambda self: not self.model.in_flight())
    @rule(roll=st.integers(0, 3))
    def clear(self, roll: int) -> None:
        """Taken one time in four: a clear wipes what the other rules built."""
        if roll == 0:
            self.step("clear")

    @precondition(lambda self: self.model.in_flight())
    @rule(roll=st.integers(0, 3))
    def clear_during_reads(self, roll: int) -> None:
        """clear() while reads are in flight (outside assumption A2; one time
        in four): the reads must end with their own value or be refused."""
        if roll == 0:
            self.step("clear")

    # -- readers -----------------------------------------------------------------

    def idle_with_mail(self) -> list[int]:
        return [r for r in range(self.R) if self.model.reads[r] is None and +self.model.inbox[r]]

    @precondition(lambda self: self.idle_with_mail())
    @rule(data=st.data())
    def get_begin(self, data: st.DataObject) -> None:
        reader = data.draw(st.sampled_from(self.idle_with_mail()))
        handle = data.draw(st.sampled_from(sorted(+self.model.inbox[reader])))
        self.model.inbox[reader][handle] -= 1
        self.step("get_begin", reader, handle)

    @precondition(lambda self: self.idle_with_mail())
    @rule(data=st.data())
    def get(self, data: st.DataObject) -> None:
        """A whole read at once, as `storage.get` does it: begin, copy, end."""
        reader = data.draw(st.sampled_from(self.idle_with_mail()))
        handle = data.draw(st.sampled_from(sorted(+self.model.inbox[reader])))
        self.model.inbox[reader][handle] -= 1
        if self.step("get_begin", reader, handle).status == "ok":
            self.step("get_copy", reader)
            assert self.step("get_end", reader).result != "<foreign>"

    @precondition(lambda self: self.idle_with_mail())
    @rule()
    def drain(self) -> None:
        """Every idle reader reads all its mail, oldest handle first: the
        steady state in which the writer can reclaim everything."""
        for reader in self.idle_with_mail():
            inbox = self.model.inbox[reader]
            for handle in sorted(+inbox, key=lambda h: h[2]):
                for _ in range(inbox[handle]):
                    inbox[handle] -= 1
                    if self.step("get_begin", reader, handle).status == "ok":
                        self.step("get_copy", reader)
                        assert self.step("get_end", reader).result != "<foreign>"

    @precondition(lambda self: self.model.issued)
    @rule(data=st.data(), reader=st.integers(0, 1))
    def reader_touch(self, data: st.DataObject, reader: int) -> None:
        """A reader touches a handle it was sent (or an old one): validated,
        never counted (a touch that counts frees a chunk before its reads)."""
        handle = data.draw(st.sampled_from(sorted(self.model.issued)))
        self.step("reader_touch", reader, handle)

    @precondition(lambda self: self.model.issued)
    @rule(data=st.data())
    def writer_get(self, data: st.DataObject) -> None:
        """The writer reads one of its objects (no count, as in the seed)."""
        handle = data.draw(st.sampled_from(sorted(self.model.issued)))
        result = self.step("writer_get", handle)
        assert result.result != "<foreign>"

    @precondition(lambda self: self.model.issued and any(r is None for r in self.model.reads))
    @rule(data=st.data())
    def get_begin_foreign(self, data: st.DataObject) -> None:
        """A handle from another storage (signed with another secret): refused."""
        reader = data.draw(
            st.sampled_from([r for r in range(self.R) if self.model.reads[r] is None])
        )
        self.step(
            "get_begin_foreign", reader, data.draw(st.sampled_from(sorted(self.model.issued)))
        )

    @rule(
        reader=st.integers(0, 1),
        key=st.sampled_from(KEYS),
        address=st.integers(0, 12),
        monotonic_id=st.integers(0, 4),
        roll=st.integers(0, 3),
    )
    def get_begin_forged(
        self, reader: int, key: str, address: int, monotonic_id: int, roll: int
    ) -> None:
        """A handle the writer never issued (taken one time in four)."""
        handle = (key, address, monotonic_id)
        if roll == 0 and self.model.reads[reader] is None and handle not in self.model.issued:
            self.step("get_begin", reader, handle)

    @precondition(lambda self: any(r is not None and r.copied is None for r in self.model.reads))
    @rule(data=st.data())
    def get_copy(self, data: st.DataObject) -> None:
        ready = [i for i, r in enumerate(self.model.reads) if r is not None and r.copied is None]
        self.step("get_copy", data.draw(st.sampled_from(ready)))

    @precondition(
        lambda self: any(r is not None and r.copied is not None for r in self.model.reads)
    )
    @rule(data=st.data())
    def get_end(self, data: st.DataObject) -> None:
        done = [i for i, r in enumerate(self.model.reads) if r is not None and r.copied]
        result = self.step("get_end", data.draw(st.sampled_from(done)))
        assert result.result != "<foreign>"

    # -- invariants --------------------------------------------------------------

    @invariant()
    def implementation_state_matches_model(self) -> None:
        real = self.driver.observe()
        model = self.model
        expected = {
            "data_buffer_start": model.data_buffer_start,
            "data_buffer_end": model.data_buffer_end,
            "monotonic_id_start": model.monotonic_id_start,
            "monotonic_id_end": model.monotonic_id_end,
            "metadata": model.metadata,
            "counts": model.counts(),
            "key_index": model.key_index,
            "writer_flag": model.writer_flag,
            "touched": model.touched,
        }
        for name, value in expected.items():
            if name in real:  # an implementation may lack internals
                assert real[name] == value, f"{name}: implementation {real[name]}, model {value}"

    @invariant()
    def live_chunks_are_disjoint_fifo_and_in_range(self) -> None:
        real = self.driver.observe()
        if "data_buffer_start" not in real or "monotonic_id_start" not in real:
            return  # optional attributes (shmref.contract)
        start, end, n = real["data_buffer_start"], real["data_buffer_end"], self.N
        assert 0 <= start <= end and end - start <= n and start < n or start == end == 0
        chunks = list(real["metadata"].items())
        sizes = self.model.header
        previous_end = start
        for i, (chunk_id, address) in enumerate(chunks):
            expected_id = (real["monotonic_id_start"] + i) % self.ID_MAX
            assert chunk_id == expected_id, "live ids are not consecutive from monotonic_id_start"
            size = sizes[address % n][1]
            # as the spec's FifoOrder: addresses count from start, modulo N (a
            # lap correction moves start and end back by N, not the addresses)
            address = start + (address - start) % n
            assert address >= previous_end, "live chunks overlap or are out of FIFO order"
            assert address % n + size <= n, "a chunk straddles the end of the buffer"
            previous_end = address + size
        assert previous_end <= max(end, start)


class TraceSeededMachine(StoreMachine):
    """Starts from a prefix of a TLC simulation of spec/MCStorage (same
    constants), then goes on with invented steps: Hypothesis picks the trace
    and the prefix length, and shrinks both like any other choice."""

    _c = read_constants(SPEC_DIR / "MCStorage.cfg")  # the traces' constants
    N, R, ID_MAX, MAX_OBJ = _c["N"], len(_c["Readers"]), _c["ID_MAX"], _c["MAX_OBJ"]

    @initialize(data=st.data())
    def replay_tlc_prefix(self, data: st.DataObject) -> None:
        traces = storage_traces()
        trace = traces[data.draw(st.integers(0, len(traces) - 1), label="TLC trace")]
        length = data.draw(st.integers(0, len(trace.states) - 1), label="prefix length")
        readers = sorted(self._c["Readers"])
        for state in trace.states[1 : 1 + length]:
            call = step_call(state.vars["last_action"], readers)
            if call is None:
                continue
            _method, args, _kwargs = call  # MCStorage has no failing copies
            name = state.vars["last_action"]["name"]
            if name == "get_begin":
                reader, handle = args
                self.model.inbox[reader][handle] -= 1  # the trace reads a delivery
            self.step(name, *args)


@functools.cache
def storage_traces() -> list[tlc.Trace]:
    return simulation_corpus("MCStorage", 60, 30, 7)


def machine_for(
    impl: ModuleType, base: type[StoreMachine] = StoreMachine, **overrides: Any
) -> type[StoreMachine]:
    """`base` bound to `impl` (and class attributes such as N, R, ID_MAX,
    MAX_OBJ overridden); its `.TestCase` is a unittest/pytest test case."""
    machine: type[StoreMachine] = type("Machine", (base,), {"impl": impl, **overrides})
    return machine
