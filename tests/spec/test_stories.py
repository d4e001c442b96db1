"""TLC's counterexamples, kept as plain stories.

Each test is a counterexample that `make check` found in a hazard model,
written out step by step in the spec's vocabulary (units of 16 bytes; see
DESIGN.md) and played on real shared memory: first on the seed's own code,
where the hazard happens, then on refimpl, which either closes it or shares
it (then it is an assumption of the protocol; see spec/README.md).
"""

from __future__ import annotations

import pytest

import refimpl
from shmref.store.driver import Driver


@pytest.fixture(scope="module")
def seed():
    try:
        from shmref.seed.build import build_seed_module

        return build_seed_module()
    except Exception as exc:  # the seed text lives outside the repo
        pytest.skip(f"seed module unavailable: {exc}")


def test_double_read_returns_another_keys_value(seed):
    """MCDoubleRead: a reader reads one delivery twice (a retry), so the
    aggregate count reaches writer_count * n_readers while the other reader
    is still mid-read; the writer reclaims and reuses the chunk."""
    for impl in (seed, refimpl):
        with Driver(impl, 4, n_readers=2, id_max=5, max_obj=2, layout=True) as story:
            k1 = ("k1", 0, 0)
            assert story.put("k1", 1).result == (0, 0)
            story.get_begin(0, k1), story.get_begin(1, k1)
            story.get_copy(0), story.get_copy(1)
            assert story.get_end(0).result == "k1"
            story.get_begin(0, k1)  # reader 0 reads the same delivery again
            assert story.get_end(1).result == "k1"  # count 2 = 1 hand-out * 2 readers
            story.free_unused()  # k1 reclaimed while reader 0 is mid-read
            assert story.put("k2", 1).result == (0, 1)  # same address
            story.get_copy(0)
            outcome = story.get_end(0)
            if impl is seed:
                assert outcome.result == "k2"  # k1's handle returned k2's value
                assert story.observe()["counts"] == {1: 1}  # and inflated k2's count
            else:
                assert outcome.status == "stale"  # refimpl re-checks: ValueError
                assert story.observe()["counts"] == {1: 0}


def test_clear_while_a_read_is_in_flight(seed):
    """MCClearInFlight: clear() (vLLM's reset_mm_cache) while a reader has
    passed the id check; the next put reuses address 0."""
    for impl in (seed, refimpl):
        with Driver(impl, 2, n_readers=1, id_max=4, max_obj=2, layout=True) as story:
            story.put("k1", 1)
            story.clear()
            begun = story.get_begin(0, ("k1", 0, 0))
            assert begun.status == "ok"  # header still k1's; the secret stays (F4)
            assert story.put("k2", 1).result == (0, 1)
            story.get_copy(0)
            outcome = story.get_end(0)
            if impl is seed:
                assert outcome.result == "k2"
                assert story.observe()["counts"] == {1: 1}
            else:
                assert outcome.status == "stale"
                assert story.observe()["counts"] == {1: 0}


def test_id_wraparound_lets_a_stale_handle_read_a_new_object(seed):
    """MCIdWrap: ids wrap at ID_MAX (2**31 in production, 2 here); a handle
    held back across the wrap names a new chunk with the same id at the same
    address. The signature covers (key, address, id), not the chunk's
    contents, so it still verifies in the seed (assumption A3). refimpl's
    clear leaves a fence at the oldest id it forgets, and the put that
    issues that id again rotates the signing secret first (F4): the
    held-back handle is rejected (spec/MCIdWrapFixed)."""
    for impl in (seed, refimpl):
        with Driver(impl, 2, n_readers=1, id_max=2, max_obj=2) as story:
            story.put("k1", 1)  # id 0 at 0: its handle is held back
            story.clear()
            story.put("k1", 1)  # id 1
            story.clear()
            assert story.put("k2", 1).result == (0, 0)  # id 0 again, address 0 again
            begun = story.get_begin(0, ("k1", 0, 0))
            if impl is refimpl:
                assert begun.status == "rejected"
                continue
            assert begun.status == "ok"
            story.get_copy(0)
            assert story.get_end(0).result == "k2"


def test_a_delivery_never_read_pins_the_ring(seed):
    """MCLostReader (liveness): one reader never reads a delivery (request
    aborted, worker gone). FIFO reclamation stops at that chunk forever, so
    every later put that needs space fails, though all later objects were read."""
    for impl in (seed, refimpl):
        with Driver(impl, 4, n_readers=2, id_max=64, max_obj=2) as story:
            story.put("pinned", 1)
            for reader in (0,):  # reader 1 never gets to read "pinned"
                story.get_begin(reader, ("pinned", 0, 0))
                story.get_copy(reader)
                story.get_end(reader)
            outcomes = []
            for i in range(6):
                key = f"k{i}"
                outcome = story.put(key, 1)
                outcomes.append(outcome.status)
                if outcome.status == "ok":
                    address, monotonic_id = outcome.result
                    for reader in (0, 1):
                        story.get_begin(reader, (key, address, monotonic_id))
                        story.get_copy(reader)
                        story.get_end(reader)
            assert outcomes[-1] == "MemoryError"
            assert story.observe()["monotonic_id_start"] == 0  # stuck at "pinned"


def test_a_failed_copy_pins_the_ring_in_the_seed_only(seed):
    """MCCopyFail: deserialization fails after the id check. The seed raises
    before counting, so the chunk is never reclaimable; refimpl counts the
    read and raises (F3)."""
    for impl in (seed, refimpl):
        with Driver(impl, 4, n_readers=1, id_max=64, max_obj=2) as story:
            story.put("k1", 1)
            story.get_begin(0, ("k1", 0, 0))
            copied = story.get_copy(0, fail=True)
            ended = story.get_end(0) if copied.status == "ok" else copied
            assert ended.status == "DeserializeError"
            story.free_unused()
            assert ("k1" in story.observe()["key_index"]) == (impl is seed)
