"""The Hypothesis state machine (shmref.testing.machine) on the implementation
under test, one per level, and proof that it catches injected bugs. What
happens outside the protocol's assumptions is TLC's job (spec/) and the
replay tests'.

[seed] judges against the seed's policy with refimpl's fixes as allowed
deviations (seed-compatible), [fixed] against refimpl's policy (hardened),
[safety] against the spec's safety and liveness with either refusal policy
accepted (protocol-safe); see shmref.testing.machine."""

from __future__ import annotations

from types import ModuleType

import pytest
from hypothesis import Phase, settings

from shmref.seed.mutants import MUTATIONS, build_mutant
from shmref.testing.from_trace import TraceSeededMachine
from shmref.testing.machine import LEVELS as MACHINE_LEVELS
from shmref.testing.machine import level_overrides, machine_for

LEVELS = sorted(MACHINE_LEVELS)


@pytest.mark.parametrize("level", LEVELS)
def test_store_machine(impl, level):
    machine_for(impl, **level_overrides(level)).TestCase().runTest()


@pytest.mark.parametrize("level", LEVELS)
def test_store_machine_from_tlc_traces(impl, level):
    machine_for(impl, TraceSeededMachine, **level_overrides(level)).TestCase().runTest()


@pytest.mark.parametrize("level", LEVELS)
def test_store_machine_small_ids(impl, level):
    """ID_MAX 3: ids wrap every few puts and the live-id limit bites."""
    machine_for(impl, ID_MAX=3, N=10, **level_overrides(level)).TestCase().runTest()


def test_store_machine_reader_processes(impl):
    """Readers in their own processes: the same rules over real cross-process
    memory, judged for safety (protocol-safe)."""
    machine = machine_for(impl, reader_processes=True, **level_overrides("safety"))
    machine.TestCase.settings = settings(
        machine.TestCase.settings, max_examples=8, stateful_step_count=30
    )
    machine.TestCase().runTest()


@pytest.mark.parametrize("mutant", sorted(MUTATIONS))
def test_state_machine_catches_injected_bugs(mutant, is_refimpl):
    """Each deliberately broken copy of refimpl fails the state machine on a
    model comparison (not on some incidental crash)."""
    if not is_refimpl:
        pytest.skip("mutants are copies of refimpl")
    machine = machine_for(build_mutant(mutant))
    # Finding the bug is the point; shrinking it would only cost minutes.
    machine.TestCase.settings = settings(
        machine.TestCase.settings, max_examples=400, phases=[Phase.explicit, Phase.generate]
    )
    try:
        machine.TestCase().runTest()
    except AssertionError:
        return
    except ExceptionGroup as group:  # several distinct failures: all must be ours
        assert all(isinstance(e, AssertionError) for e in group.exceptions), group.exceptions
        return
    pytest.fail(f"the state machine did not catch mutant {mutant}: {MUTATIONS[mutant][3]}")


def counting_touch_impl() -> ModuleType:
    """refimpl whose reader-side touch also counts a read (as vLLM's current
    upstream module does): a chunk can then be freed before its reads."""
    import types

    import refimpl

    class Storage(refimpl.SingleWriterShmObjectStorage):
        def touch(self, key, address=0, monotonic_id=0, signature=None):
            super().touch(key, address, monotonic_id, signature)
            if not self.is_writer:
                self.get(address, monotonic_id, signature, key)

        @staticmethod
        def create_from_handle(handle):
            ring = refimpl.SingleWriterShmRingBuffer(*handle.ring_buffer_handle)
            return Storage(
                handle.max_object_size,
                handle.n_readers,
                ring,
                handle.serde_class,
                handle.reader_lock,
            )

    module = types.ModuleType("refimpl_counting_touch")
    module.__dict__.update(
        SingleWriterShmRingBuffer=refimpl.SingleWriterShmRingBuffer,
        SingleWriterShmObjectStorage=Storage,
    )
    return module


def test_state_machine_catches_a_reader_touch_that_counts(is_refimpl):
    """The reader_touch rule is not decoration: a touch that counts a read is
    caught by the count comparison with the model (counts read through the
    seed's layout, which refimpl claims)."""
    if not is_refimpl:
        pytest.skip("a variant of refimpl")
    machine = machine_for(counting_touch_impl(), observe_layout=True)
    machine.TestCase.settings = settings(
        machine.TestCase.settings, phases=[Phase.explicit, Phase.generate]
    )
    with pytest.raises(AssertionError, match="counts"):
        machine.TestCase().runTest()
