"""The state machines judge each level by its own rule and run on any serde.

Seed mutants (subclasses of the seed's classes, each with one defect) are
killed by the [seed] machine, which passes on the seed itself (the suite run
`--shmref-impl seed`); a pickle-based serde with more framing than one
16-byte unit runs the machines on refimpl (scaled unit) and passes them.
"""

from __future__ import annotations

import pickle
import types
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, settings

from shmref.seed.build import SeedError, build_seed_module
from shmref.store.driver import Driver
from shmref.store.model import FIXED, SEED, StoreModel
from shmref.store.values import unit_for
from shmref.testing.machine import level_overrides, machine_for


class PickleSerde:
    """A serde of its own: pickle, with a 2-byte metadata tag (more framing
    than a 16-byte unit holds for a 1-unit chunk)."""

    def serialize(self, value: Any) -> tuple[Any, int, bytes, int]:
        data = pickle.dumps(value, protocol=4)
        return data, len(data), b"PK", 2

    def deserialize(self, data: memoryview) -> Any:
        return pickle.loads(bytes(data[2:]))


def test_unit_scales_to_the_serde() -> None:
    from refimpl.serde import MsgpackOnlySerde, MsgpackSerde

    assert unit_for(MsgpackOnlySerde) == 16
    assert unit_for(MsgpackSerde) == 64  # the releases' pickled metadata is some 25 bytes
    assert unit_for(PickleSerde) > 16 and unit_for(PickleSerde) % 16 == 0


def fast(machine: Any, examples: int = 60) -> Any:
    machine.TestCase.settings = settings(
        machine.TestCase.settings,
        max_examples=examples,
        phases=[Phase.explicit, Phase.generate],
        deadline=None,
    )
    return machine


@pytest.mark.parametrize("level", ["seed", "fixed", "safety"])
def test_machines_run_on_another_serde(level: str) -> None:
    """refimpl with PickleSerde: the machines run (not skip) and pass."""
    import refimpl

    with Driver(refimpl, 4, n_readers=1, max_obj=2, serde_class=PickleSerde) as driver:
        assert driver.unit == unit_for(PickleSerde)
        assert driver.put("a", 1).status == "ok"
    machine = machine_for(refimpl, serde_class=PickleSerde, **level_overrides(level))
    fast(machine, 40).TestCase().runTest()


def test_model_policies_differ_where_the_fixes_do() -> None:
    """A handle held back across clears while the ids wrap back to its id at its
    address: it names the new object in the seed's policy (no F4); refimpl's
    rotated the secret before issuing that id again (F4's fence)."""
    outcomes = {}
    for policy in (SEED, FIXED):
        model = StoreModel(8, 1, 2, 3, policy)
        for key in ("a", "b", "c"):  # ids 0, 1, 0, each at address 0
            model.put(key, 1)
            model.clear()
        outcomes[policy.name] = model.get_begin(0, ("a", 0, 0)).status
    assert outcomes == {"seed": "ok", "fixed": "rejected"}


# -- seed mutants ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def seed_module(tmp_path_factory: pytest.TempPathFactory) -> types.ModuleType:
    try:
        return build_seed_module(Path(tmp_path_factory.mktemp("seed")))
    except SeedError as exc:
        pytest.skip(f"missing seed: {exc}")


def variant(seed: types.ModuleType, name: str, **methods: Any) -> types.ModuleType:
    """The seed with storage methods replaced (readers built from the handle
    get them too)."""
    base = seed.SingleWriterShmObjectStorage

    def create_from_handle(handle: Any) -> Any:
        ring = seed.SingleWriterShmRingBuffer(*handle.ring_buffer_handle)
        return cls(
            handle.max_object_size,
            handle.n_readers,
            ring,
            handle.serde_class,
            handle.reader_lock,
        )

    cls = type("SingleWriterShmObjectStorage", (base,), {**methods})
    cls.create_from_handle = staticmethod(create_from_handle)  # type: ignore[attr-defined]
    module = types.ModuleType(f"seed_{name}")
    module.__dict__.update(vars(seed))
    module.SingleWriterShmObjectStorage = cls  # type: ignore[attr-defined]
    return module


def _free_without_readers(self: Any, id: int, buf: memoryview) -> bool:
    if id in self._touched:
        return False
    return int.from_bytes(buf[0:4], "little", signed=True) >= self.writer_flag[id]


def _no_count(self: Any, data_view: memoryview) -> None:
    """increment_reader_flag that counts nothing."""


def _clear_keeps_keys(self: Any) -> None:
    kept = dict(self.key_index)
    type(self).__mro__[1].clear(self)
    self.key_index.update(kept)


def _get_cached_no_flag(self: Any, key: str) -> Any:
    result = type(self).__mro__[1].get_cached(self, key)
    self.writer_flag[result[1]] -= 1  # the hand-out is not counted
    return result


SEED_MUTANTS = {
    "free_without_n_readers": {"default_is_free_check": _free_without_readers},
    "count_not_incremented": {"increment_reader_flag": _no_count},
    "clear_keeps_key_index": {"clear": _clear_keeps_keys},
    "get_cached_not_counted": {"get_cached": _get_cached_no_flag},
}


@pytest.mark.parametrize("mutant", sorted(SEED_MUTANTS))
def test_seed_machine_kills_seed_mutants(seed_module: types.ModuleType, mutant: str) -> None:
    """Each defect fails the [seed] machine on a model comparison."""
    impl = variant(seed_module, mutant, **SEED_MUTANTS[mutant])
    machine = fast(machine_for(impl, **level_overrides("seed")), 300)
    try:
        machine.TestCase().runTest()
    except AssertionError:
        return
    except ExceptionGroup as group:
        assert all(isinstance(e, AssertionError) for e in group.exceptions), group.exceptions
        return
    pytest.fail(f"the [seed] machine did not catch seed mutant {mutant}")


def test_the_invariants_observe_once_per_step() -> None:
    """Both invariants read one observation per step: an observation asks
    `is_cached` of every key placed, and on a store program (docs/protocol.md)
    each of those is a round trip."""
    import refimpl

    machine = machine_for(refimpl, **level_overrides("fixed"))()
    observe, calls = machine.driver.observe, []

    def counted() -> dict[str, Any]:
        calls.append(1)
        return observe()

    machine.driver.observe = counted
    try:
        for expected, step in ((1, None), (2, ("put", "a", 1)), (3, ("put", "b", 2))):
            if step is not None:
                machine.step(*step)
            machine.implementation_state_matches_model()
            machine.live_chunks_are_disjoint_fifo_and_in_range()
            assert len(calls) == expected
    finally:
        machine.teardown()
