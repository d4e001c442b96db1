"""The Hypothesis state machine of the store, for anyone's tests.

`StoreMachine` steps the real implementation on shared memory with the
spec's actions (shmref.store.driver) and a pure model (shmref.store.model) beside it;
rules carry the spec's action names, and a read is three rules (get_begin,
get_copy, get_end) so that Hypothesis chooses how the writer interleaves
with reads in flight. Rules keep to the protocol's assumptions (A1: each
delivery is read once by each reader; A2: no clear while a read is in
flight, except the `clear_during_reads` rule, whose reads must end with
their own value or be refused).

Each level is judged by its own rule (`LEVELS`): the machine keeps every
model of `policies` (shmref.store.model) that agrees with what the store showed
so far, and fails on a step that none explains. seed-compatible: the seed's
policy, where each of refimpl's fixes is an allowed deviation (so the seed
and refimpl pass; a defect matches no policy), and the seed's hazards are
its behaviour. hardened: refimpl's policy alone. protocol-safe: any policy,
and the machine asserts the spec's safety and liveness itself
(`judge_safety`): no read returns another key's or a torn value, no put
reuses a live chunk's id, and once every delivery is read, everything can
be reclaimed and an object that fits can be put.

The machines judge through the API only (shmref.store.driver.observe): counts
are compared only when the store declares how to read them or the caller
claims the seed's layout (`observe_layout`), so a store with another layout
or serde is judged on its behaviour.

    from shmref.testing import machine_for
    TestMyStore = machine_for(my_module, policies=SAFETY).TestCase
"""

from __future__ import annotations

from contextlib import nullcontext
from types import ModuleType
from typing import Any

import hypothesis.strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from shmref.calls.drawing import Drawn
from shmref.core import vocabulary
from shmref.store.driver import Driver, Outcome
from shmref.store.model import (
    FIXED,
    POLICIES,
    IdCollision,
    Policy,
    StoreModel,
    put_breaks_a3,
    put_collides,
)

KEYS = ("a", "b", "c", "d", "e")
SAFETY = POLICIES  # every mix of the seed's and refimpl's refusal policies
# level parameter -> (policies, judge_safety)
LEVELS: dict[str, tuple[tuple[Policy, ...], bool]] = {
    "seed": (POLICIES, False),
    "fixed": ((FIXED,), True),
    "safety": (SAFETY, True),
}


def level_overrides(level: str) -> dict[str, Any]:
    """machine_for's overrides that judge `level` ("seed", "fixed", "safety")."""
    policies, judge_safety = LEVELS[level]
    return {"policies": policies, "judge_safety": judge_safety}


class StoreMachine(RuleBasedStateMachine):
    """One writer, R readers, a ring of N units (16 bytes, or more for a
    serde whose framing needs more: shmref.store.values.unit_for)."""

    impl: ModuleType
    N, R, ID_MAX, MAX_OBJ = 8, 2, 5, 3
    reader_processes = False
    policies: tuple[Policy, ...] = (FIXED,)
    judge_safety = True  # assert safety itself (False: the seed's hazards are behaviour)
    serde_class: type | None = None  # the storage's own when None
    observe_layout = False  # the caller claims the seed's layout: counts from bytes

    def __init__(self) -> None:
        super().__init__()
        self.driver = Driver(
            self.impl,
            self.N,
            n_readers=self.R,
            id_max=self.ID_MAX,
            max_obj=self.MAX_OBJ,
            reader_processes=self.reader_processes,
            serde_class=self.serde_class,
            layout=self.observe_layout,
        )
        self.seen: dict[str, Any] | None = None  # what observe() showed since the last step
        self.models = [
            StoreModel(self.N, self.R, self.ID_MAX, self.MAX_OBJ, p, self.driver.unit)
            for p in self.policies
        ]
        constants = {"N": self.N, "ID_MAX": self.ID_MAX, "MAX_OBJ": self.MAX_OBJ}
        self.drawn = Drawn(
            f"{type(self).__name__} of {self.impl.__name__}", self.driver, constants, self.R
        )  # the falsifying example, for the report

    @property
    def model(self) -> StoreModel:
        """The first model still in agreement (they share inboxes and reads)."""
        return self.models[0]

    @property
    def safety(self) -> bool:
        """Judge safety itself (a foreign read fails even if a model predicts it)."""
        return self.judge_safety

    def teardown(self) -> None:
        """Hypothesis's end of each run: draw a failing run for the report, close every segment."""
        try:
            self.drawn.teardown()
        finally:
            self.driver.close()

    def take(self, reader: int, handle: Any) -> None:
        """The reader takes one delivery of `handle` from its inbox."""
        for model in self.models:
            model.inbox[reader][handle] -= 1

    def step(self, name: str, *args: Any, last: bool = False) -> Outcome:
        """Action `name` (shmref.core.vocabulary) on the implementation and on the
        models; those whose outcome (and result, when known) differs are
        dropped, and none left is a failure. `last`: the rule's last call of
        the store, one request, which the invariants' observation follows
        (Driver.observed_after)."""
        method = vocabulary.action(name).driver
        assert method is not None, f"{name} calls nothing"
        self.seen = None
        with self.driver.observed_after(method) if last else nullcontext():
            real: Outcome = getattr(self.driver, method)(*args)
        kept, seen = [], []
        for model in self.models:
            try:
                expected = getattr(model, name)(*args)
            except IdCollision as exc:
                seen.append(f"{model.policy.name}: {exc}")
                continue
            if expected.status == "torn" and real.status != "ok":
                model.reads[args[0]] = None  # the copy raised: the read is over, uncounted
                kept.append(model)
            elif real.status in (expected.status, "ok" if expected.status == "torn" else "") and (
                expected.result is None or real.result == expected.result
            ):
                kept.append(model)
            seen.append(f"{model.policy.name} expects {expected}")
        self.drawn.step(name, args, real)
        assert kept, f"{name}{args}: implementation gave {real}, model " + "; ".join(seen)
        self.models = kept
        if name == "get_copy" and real.status != "ok":
            self.driver.readers[args[0]].abandon()
        self.seen = None
        return real

    def observed(self) -> dict[str, Any]:
        """The implementation's state (Driver.observe), asked once after each
        step however many invariants read it: every call of a store program
        is a round trip (docs/protocol.md), and observing asks `is_cached`
        of every key placed."""
        if self.seen is None:
            self.seen = self.driver.observe()
        return self.seen

    def read(self, reader: int, handle: Any) -> None:
        """A whole read of a delivery taken from the inbox: begin, copy, end
        (no end if the copy of a torn object raised)."""
        self.take(reader, handle)
        if self.step("get_begin", reader, handle).status == "ok":
            self.step("get_copy", reader)
            if self.model.reads[reader] is not None:
                self.check_read(handle, self.step("get_end", reader))

    def collides(self, key: str, size: int) -> bool:
        """Would this put give a live chunk's id again in a seed model (FINDINGS #4)?"""
        return put_collides(self.models, key, size)

    def breaks_a3(self, key: str, size: int) -> bool:
        """Would this put reissue an outstanding handle's id (the spec's assumption A3)?"""
        return put_breaks_a3(self.models, key, size)

    # -- writer ------------------------------------------------------------------

    @rule(key=st.sampled_from(KEYS), size=st.integers(1, 4))
    def put(self, key: str, size: int) -> None:
        """Unless safety is judged, a put that would collide ids in a seed
        model is not taken; when it is judged, a store that collides fails,
        and a put that would break A3 is not taken."""
        if self.safety and self.breaks_a3(key, size):
            return
        if not self.safety and self.collides(key, size):
            return
        self.step("put", key, size, last=True)

    @precondition(lambda self: self.model.key_index)
    @rule(data=st.data())
    def get_cached(self, data: st.DataObject) -> None:
        """Hand out a cached key again: each reader gets one more delivery."""
        self.step("get_cached", data.draw(st.sampled_from(sorted(self.model.key_index))), last=True)

    @rule(data=st.data())
    def touch(self, data: st.DataObject) -> None:
        """Mostly a cached key (the interesting case), sometimes any key."""
        cached = sorted(self.model.key_index)
        keys = st.sampled_from(cached) if cached else st.sampled_from(KEYS)
        self.step("touch", data.draw(keys | st.sampled_from(KEYS)), last=True)

    @rule()
    def release_touches(self) -> None:
        """The writer drops every touch not yet followed by `get_cached`."""
        self.step("release_touches", last=True)

    @rule()
    def free_unused(self) -> None:
        """The writer reclaims what every reader has read, oldest first."""
        self.step("free_unused", last=True)

    @precondition(lambda self: not self.model.in_flight())
    @rule(roll=st.integers(0, 3))
    def clear(self, roll: int) -> None:
        """Taken one time in four: a clear wipes what the other rules built."""
        if roll == 0:
            self.step("clear", last=True)

    @precondition(lambda self: self.model.in_flight())
    @rule(roll=st.integers(0, 3))
    def clear_during_reads(self, roll: int) -> None:
        """clear() while reads are in flight (outside assumption A2; one time
        in four): the reads must end with their own value or be refused."""
        if roll == 0:
            self.step("clear", last=True)

    # -- readers -----------------------------------------------------------------

    def idle_with_mail(self) -> list[int]:
        """Readers with no read in flight and at least one delivery waiting."""
        return [r for r in range(self.R) if self.model.reads[r] is None and +self.model.inbox[r]]

    @precondition(lambda self: self.idle_with_mail())
    @rule(data=st.data())
    def get_begin(self, data: st.DataObject) -> None:
        """An idle reader starts reading a delivery; copy and end are rules of their own."""
        reader = data.draw(st.sampled_from(self.idle_with_mail()))
        handle = data.draw(st.sampled_from(sorted(+self.model.inbox[reader])))
        self.take(reader, handle)
        self.step("get_begin", reader, handle, last=True)

    @precondition(lambda self: self.idle_with_mail())
    @rule(data=st.data())
    def get(self, data: st.DataObject) -> None:
        """A whole read at once, as `storage.get` does it: begin, copy, end."""
        reader = data.draw(st.sampled_from(self.idle_with_mail()))
        self.read(reader, data.draw(st.sampled_from(sorted(+self.model.inbox[reader]))))

    @precondition(lambda self: self.idle_with_mail())
    @rule()
    def drain(self) -> None:
        """Every idle reader reads all its mail, oldest handle first: the
        steady state in which the writer can reclaim everything."""
        for reader in self.idle_with_mail():
            inbox = self.model.inbox[reader]
            for handle in sorted(+inbox, key=lambda h: h[2]):
                for _ in range(self.model.inbox[reader][handle]):
                    self.read(reader, handle)

    def check_read(self, handle: Any, outcome: Outcome) -> None:
        """Safety: a read that succeeds returns the handle's key's value."""
        if self.safety and outcome.status == "ok":
            assert outcome.result == handle[0], (
                f"read of {handle} returned {outcome.result}'s value (a wrong or torn read)"
            )

    @precondition(lambda self: not self.model.in_flight() and not any(+i for i in self.model.inbox))
    @rule(roll=st.integers(0, 3))
    def reclaim_all(self, roll: int) -> None:
        """Liveness (one time in four): with every delivery read and no read
        in flight, touches released and free_unused called often enough,
        nothing stays cached, and an object of the largest size can be put."""
        if roll:
            return
        self.step("release_touches")
        for _ in range(self.N):
            self.step("free_unused")
        pinned = sorted(k for k in self.driver.placed if self.driver.writer.is_cached(k))
        assert not pinned, f"space never reclaimed: {pinned} cached after every read ended"
        if self.safety:
            key = KEYS[0]
            if not self.collides(key, self.MAX_OBJ) and not self.breaks_a3(key, self.MAX_OBJ):
                outcome = self.step("put", key, self.MAX_OBJ)
                assert outcome.status == "ok", f"put into an empty store: {outcome}"

    @precondition(lambda self: self.model.issued)
    @rule(data=st.data(), reader=st.integers(0, 1))
    def reader_touch(self, data: st.DataObject, reader: int) -> None:
        """A reader touches a handle it was sent (or an old one): validated,
        never counted (a touch that counts frees a chunk before its reads)."""
        handle = data.draw(st.sampled_from(sorted(self.model.issued)))
        self.step("reader_touch", reader, handle, last=True)

    @precondition(lambda self: self.model.issued)
    @rule(data=st.data())
    def writer_get(self, data: st.DataObject) -> None:
        """The writer reads one of its objects (no count, as in the seed)."""
        handle = data.draw(st.sampled_from(sorted(self.model.issued)))
        result = self.step("writer_get", handle, last=True)
        if self.safety and result.status == "ok":
            assert result.result == handle[0], f"writer_get{handle} gave {result.result}'s value"

    @precondition(lambda self: self.model.issued and any(r is None for r in self.model.reads))
    @rule(data=st.data())
    def get_begin_foreign(self, data: st.DataObject) -> None:
        """A handle from another storage (signed with another secret): refused."""
        reader = data.draw(
            st.sampled_from([r for r in range(self.R) if self.model.reads[r] is None])
        )
        self.step(
            "get_begin_foreign",
            reader,
            data.draw(st.sampled_from(sorted(self.model.issued))),
            last=True,
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
            self.step("get_begin", reader, handle, last=True)

    @precondition(lambda self: any(r is not None and r.copied is None for r in self.model.reads))
    @rule(data=st.data())
    def get_copy(self, data: st.DataObject) -> None:
        """A reader whose read has begun copies the object out of the segment."""
        ready = [i for i, r in enumerate(self.model.reads) if r is not None and r.copied is None]
        self.step("get_copy", data.draw(st.sampled_from(ready)), last=True)

    @precondition(
        lambda self: any(r is not None and r.copied is not None for r in self.model.reads)
    )
    @rule(data=st.data())
    def get_end(self, data: st.DataObject) -> None:
        """A reader that copied ends its read; judging safety, it must give the handle's value."""
        done = [i for i, r in enumerate(self.model.reads) if r is not None and r.copied]
        reader = data.draw(st.sampled_from(done))
        read = self.model.reads[reader]
        assert read is not None
        self.check_read(read.handle, self.step("get_end", reader, last=True))

    # -- invariants --------------------------------------------------------------

    @invariant()
    def implementation_state_matches_model(self) -> None:
        """What the API shows (shmref.store.driver.observe) equals some model's state."""
        real = self.observed()
        kept, problems = [], []
        for model in self.models:
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
            wrong = [
                f"{name}: implementation {real[name]}, model {value}"
                for name, value in expected.items()
                if name in real and real[name] != value  # an implementation may lack internals
            ]
            if wrong:
                problems.append(f"{model.policy.name}: " + "; ".join(wrong))
            else:
                kept.append(model)
        assert kept, " | ".join(problems)
        self.models = kept

    @invariant()
    def live_chunks_are_disjoint_fifo_and_in_range(self) -> None:
        """The ring's shape (the spec's FifoOrder), where the store shows its positions."""
        real = self.observed()
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


def machine_for(
    impl: ModuleType, base: type[StoreMachine] = StoreMachine, **overrides: Any
) -> type[StoreMachine]:
    """`base` bound to `impl` (and class attributes such as N, R, ID_MAX,
    MAX_OBJ, policies, serde_class, observe_layout overridden); its
    `.TestCase` is a unittest/pytest test case."""
    machine: type[StoreMachine] = type("Machine", (base,), {"impl": impl, **overrides})
    return machine
