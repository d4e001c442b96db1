"""Which tests of the suite (shmref/suite) make up which property of which
level: the one table TEST_GROUPS. The suite marks its tests from it
(`-m seed_compatible`, shmref/suite/conftest.py) and the oracle builds its
properties from it (shmref.oracle.testgroups); it lives in the lowest layer
so that the suite never imports the oracle that runs it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shmref.core.levels import HARDENED, LAYOUT, PROTOCOL, SEED


@dataclass(frozen=True)
class TestGroup:
    """A pytest selection that makes up one or more properties of a level. A
    case belongs to the group with the longest matching selection. A group
    whose selection is a file or a class gives one property per test
    function; any other group is one property named `name` (default: the
    selection)."""

    __test__ = False  # not a test class, whatever pytest guesses from the name

    level: str
    select: str  # pytest node id (prefix)
    what: str
    quick: bool = True
    name: str = ""
    closes: str = ""  # the FINDINGS.md entries a hardened property closes

    @property
    def split(self) -> bool:
        tail = self.select.split("::")[-1]
        return self.select.endswith(".py") or tail[:1].isupper()

    @property
    def label(self) -> str:
        return self.name or self.select


TEST_GROUPS: tuple[TestGroup, ...] = (
    TestGroup(SEED, "test_ring.py", "ring: docstring scenarios, ids"),
    TestGroup(SEED, "test_ring_limits.py", "ring: id bound, attach size, free_buf's stop, __del__"),
    TestGroup(SEED, "test_storage.py", "storage: handles, counting, reclamation"),
    TestGroup(SEED, "test_storage_readers.py", "storage: readers in other processes and threads"),
    TestGroup(SEED, "test_storage_bad_input.py", "storage: its validation kept under python -O"),
    TestGroup(
        SEED,
        "test_layout.py::test_same_results_as_seed",
        "differential: one call sequence on the seed and the impl, same results",
    ),
    TestGroup(
        LAYOUT,
        "test_layout.py::test_same_segment_bytes_as_seed",
        "same addresses, ids and segment bytes as the seed after every call",
    ),
    TestGroup(
        LAYOUT,
        "test_layout.py::test_seed_writer_impl_readers",
        "the seed's writer, impl readers, one segment",
    ),
    TestGroup(
        LAYOUT,
        "test_layout.py::test_impl_writer_seed_readers",
        "impl writer, the seed's readers, one segment",
    ),
    TestGroup(
        LAYOUT,
        "test_layout.py::test_mixed_readers_on_one_segment",
        "readers of the seed, refimpl and the impl on one segment",
    ),
    TestGroup(
        LAYOUT,
        "test_ring.py::test_secret_at_segment_start",
        "the 32-byte secret is the segment's first bytes",
    ),
    TestGroup(
        LAYOUT,
        "test_ring.py::test_int_encoding_is_little_endian_signed",
        "int2byte/byte2int: 4-byte little-endian signed (headers, counts)",
    ),
    TestGroup(
        LAYOUT,
        "test_storage.py::test_object_layout_in_segment",
        "a chunk's bytes: id, size, count, serde metadata and data at the seed's offsets",
    ),
    TestGroup(
        HARDENED,
        "test_ring.py::TestBadInput",
        "ring: bad input is a clear ValueError",
        closes="findings 1, 4, 9, 12, 14",
    ),
    TestGroup(
        HARDENED,
        "test_storage_bad_input.py::TestBadHandles",
        "storage: every malformed handle is a ValueError",
        closes="finding 2",
    ),
    TestGroup(
        HARDENED,
        "test_storage_bad_input.py::TestBadPuts",
        "storage: bad puts and misuse are clear errors, nothing left half-done",
        closes="findings 1, 3, 6, 9",
    ),
    TestGroup(
        HARDENED,
        "test_layout.py::test_same_results_as_refimpl",
        "differential: refimpl's result on every call, bad input included",
        closes="findings 1-3, 6, 7, 9, 12",
    ),
    TestGroup(
        PROTOCOL,
        "test_replay.py::test_simulation_corpus_replays[MCStorage]",
        "TLC simulation traces of MCStorage replayed step by step",
        name="replay MCStorage",
    ),
    TestGroup(
        PROTOCOL,
        "test_replay.py::test_simulation_corpus_replays[MCRing]",
        "TLC simulation traces of MCRing replayed step by step",
        quick=False,
        name="replay MCRing",
    ),
    TestGroup(
        PROTOCOL,
        "test_replay.py::test_allocator_state_graph_every_edge",
        "every edge of the allocator's state graph replayed",
        quick=False,
    ),
    TestGroup(
        SEED,
        "test_stateful.py::test_store_machine[seed]",
        "state machine beside the pure model: seed's policy, fixes allowed",
    ),
    TestGroup(
        HARDENED,
        "test_stateful.py::test_store_machine[fixed]",
        "Hypothesis state machine beside the pure model: refimpl's policy",
    ),
    TestGroup(
        PROTOCOL,
        "test_stateful.py::test_store_machine[safety]",
        "Hypothesis state machine beside the pure model: safety and liveness, either policy",
    ),
    TestGroup(
        SEED,
        "test_stateful.py::test_store_machine_from_tlc_traces[seed]",
        "state machine seeded with TLC trace prefixes: seed's policy, fixes allowed",
    ),
    TestGroup(
        HARDENED,
        "test_stateful.py::test_store_machine_from_tlc_traces[fixed]",
        "state machine seeded with TLC trace prefixes: refimpl's policy",
    ),
    TestGroup(
        PROTOCOL,
        "test_stateful.py::test_store_machine_from_tlc_traces[safety]",
        "state machine seeded with TLC trace prefixes: safety and liveness, either policy",
    ),
    TestGroup(
        SEED,
        "test_stateful.py::test_store_machine_small_ids[seed]",
        "state machine with ID_MAX 3 (ids wrap, live-id limit): seed's policy, fixes allowed",
        quick=False,
    ),
    TestGroup(
        HARDENED,
        "test_stateful.py::test_store_machine_small_ids[fixed]",
        "state machine with ID_MAX 3 (ids wrap, live-id limit): refimpl's policy",
        quick=False,
    ),
    TestGroup(
        PROTOCOL,
        "test_stateful.py::test_store_machine_small_ids[safety]",
        "state machine with ID_MAX 3 (ids wrap, live-id limit): safety and liveness, either policy",
        quick=False,
    ),
)
NOT_RUN_GROUPS = (
    "test_stateful.py::test_store_machine_reader_processes (readers in "
    "processes; minutes to shrink a failure)"
)


def property_of(node: str) -> str:
    """`test_ring.py::TestBadInput::test_x[1]` -> `test_ring.py::TestBadInput::test_x`."""
    return node.split("[", 1)[0]


def matches(select: str, node: str) -> bool:
    return node == select or node.startswith((select + "::", select + "["))


def group_of(node: str, groups: Sequence[TestGroup]) -> TestGroup | None:
    """The group with the longest selection that selects `node`."""
    mine = [g for g in groups if matches(g.select, node)]
    return max(mine, key=lambda g: len(g.select)) if mine else None


def property_key(node: str) -> tuple[str, str] | None:
    """(level, property) of a suite test: the same in every mode (--quick,
    --level, --all-groups, the plugin's markers), since it is decided by the
    one table TEST_GROUPS and never by which groups a run selected."""
    group = group_of(node, TEST_GROUPS)
    if group is None:
        return None
    return group.level, property_of(node) if group.split else group.label
