"""The seed's bytes are a claim of their own (the level seed-layout), and a
store is judged, not its serde (issue 23).

Fixture stores (tests/stores/, built from the seed's text at import time):
`seed_other_layout` behaves as the seed on a segment laid out otherwise
(secret at the end, big-endian integers); `seed_count_last` behaves as the
seed with its objects laid out `[metadata][data][count]` inside a chunk and
the seed's optional pieces on offer (a read composed from them with the
seed's object layout would be wrong); `seed_pickle_serde` and
`seed_json_serde` are the seed's code with a serde of their own as default
(more bytes per object than msgpack; JSON refuses bytes and reads int keys
back as strings). In `make test`: the
fixtures are what they claim (the seed's API results; other bytes), the
count probe tells the two layouts apart, a hazard replay of a store whose
counts are not the seed's still catches a misplaced count (through the API)
and clears a correct store, and the side-by-side machine with the store's
own serde passes the pickle store and catches a broken one, and the pickle
store's full-run recording goes on past the UnpicklingError of a read
(issue 40: that is the step's outcome, judged FAIL). `slow`, end to
end: the layout stores get the seed's verdict on every property outside
seed-layout and fail seed-layout; the serde store passes seed-compatible
as the seed does."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import RuleBasedStateMachine

import refimpl
from shmref.core.levels import LAYOUT, LEVELS, SEED
from shmref.core.suitegroups import TEST_GROUPS
from shmref.oracle import hazardcheck, hazards
from shmref.seed.build import SeedError
from shmref.seed.impl import load_impl
from shmref.store.observe import Segment
from shmref.suite.sidebyside import machine

REPO = Path(__file__).resolve().parents[2]
STORES = Path(__file__).resolve().parents[1] / "stores"
CLI = [pytest.mark.slow, pytest.mark.tlc, pytest.mark.xdist_group("conformance")]
LAYOUT_PROPERTIES = {g.label for g in TEST_GROUPS if g.level == LAYOUT}
FIXTURES = ("seed_other_layout", "seed_pickle_serde", "seed_json_serde", "seed_count_last")


@pytest.fixture(scope="module")
def stores() -> Iterator[dict[str, ModuleType]]:
    """The seed and the two fixture stores (skipped without the seed file)."""
    sys.path.insert(0, str(STORES))
    try:
        yield {name: load_impl(name) for name in ("seed", *FIXTURES)}
    except SeedError as exc:
        pytest.skip(str(exc))
    finally:
        sys.path.remove(str(STORES))


def history(impl: ModuleType) -> list[Any]:
    """One call sequence through the API: what it returned, in order."""
    ring = impl.SingleWriterShmRingBuffer(100, create=True)
    try:
        seen: list[Any] = [ring.allocate_buf(20), ring.allocate_buf(30)]
        with ring.access_buf(28) as (view, header):
            seen += [header, len(view)]
        seen += [list(ring.free_buf(lambda i, _b: i == 0)), ring.data_buffer_start]
        seen += [ring.byte2int(ring.int2byte(-5)), len(ring.get_auth_secret())]
        storage = impl.SingleWriterShmObjectStorage(64, 1, ring)
        ring.clear()
        seen += [storage.put("k", b"v" * 20), storage.get(*storage.get_cached("k"))]
        try:
            storage.put("big", b"x" * 80)
        except ValueError as exc:
            seen.append(str(exc))
        return seen
    finally:
        ring.close()


@pytest.mark.parametrize("store", ["seed_other_layout", "seed_count_last"])
def test_the_layout_store_returns_what_the_seed_returns(stores, store):
    assert history(stores[store]) == history(stores["seed"])


def test_the_count_last_store_lays_objects_out_its_own_way(stores):
    """`[metadata][data][count]`: the seed's object layout read from its
    bytes (count first, then the serde's bytes) is not this store's, though
    it has every piece a read could be composed from."""
    impl = stores["seed_count_last"]
    ring = impl.SingleWriterShmRingBuffer(256, create=True)
    try:
        storage = impl.SingleWriterShmObjectStorage(64, 1, ring)
        address, _ = storage.put("k", b"value")
        assert all(hasattr(storage, n) for n in ("verify_signature", "increment_reader_flag"))
        with ring.access_buf(address) as (view, _header):
            assert ring.byte2int(view[:4]) != 0  # the seed's count is the metadata here
            with pytest.raises(Exception):  # noqa: B017 - any refusal of the wrong bytes
                assert storage.ser_de.deserialize(view[4:]) == b"value"
            assert storage.ser_de.deserialize(view[:-4]) == b"value"
    finally:
        ring.close()


def test_the_layout_store_has_other_bytes(stores):
    """Not the seed's bytes: the secret is not at the start, the header's id
    is not little-endian at the seed's offset, and int2byte is big-endian."""
    impl = stores["seed_other_layout"]
    ring = impl.SingleWriterShmRingBuffer(256, create=True)
    try:
        address, chunk_id = ring.allocate_buf(16)
        ring.allocate_buf(16)
        with Segment(ring.handle()) as segment:
            assert segment.secret() != ring.get_auth_secret()
            assert segment.header(address + 24)[0] != 1
        assert ring.int2byte(1) == b"\x00\x00\x00\x01"
    finally:
        ring.close()


def test_hazard_replays_observe_counts_through_the_api(stores):
    """MCDoubleReadCount's misplaced count, on a store whose counts the
    oracle does not read: the count probe after the trace finds it, on the
    seed too; refimpl passes every hazard it closes (no false alarm)."""
    layout = stores["seed_other_layout"]
    hazard = next(h for h in hazards.HAZARDS if h.model == "MCDoubleReadCount")
    found = hazardcheck.hazard_counterexamples(hazard.model)
    check, _ = hazardcheck.hazard_check("seed_other_layout", layout, hazard, found)
    assert check.status == "FAIL" and "no read naming it made" in check.detail, check.detail
    seed_check, _ = hazardcheck.hazard_check("seed", stores["seed"], hazard, found)
    assert seed_check.status == "FAIL", seed_check.detail
    for h in hazards.HAZARDS:  # refimpl, through the API too: no false alarm
        found = hazardcheck.hazard_counterexamples(h.model)
        api = hazardcheck.hazard_check("refimpl", refimpl, h, found)[0]
        assert api.status in ("pass", "assumption"), (h.model, api.detail)


def test_the_count_probe_fails_the_seed_through_the_api(stores):
    seed = stores["seed"]
    hazard = next(h for h in hazards.HAZARDS if h.model == "MCDoubleReadCount")
    found = hazardcheck.hazard_counterexamples(hazard.model)
    check, replay = hazardcheck.hazard_check("seed", seed, hazard, found)
    assert check.status == "FAIL" and replay is not None
    assert any(row[1] == "(count probe)" for row in replay.rows)


def quick(cls: type[RuleBasedStateMachine]) -> type[RuleBasedStateMachine]:
    """Few examples, no shrinking: a pass or the first failure is all we need."""
    cls.TestCase.settings = settings(
        cls.TestCase.settings, max_examples=20, phases=[Phase.generate], deadline=None
    )
    return cls


def test_side_by_side_uses_the_stores_own_serde(stores):
    """The pickle store passes the seed's side-by-side machine (the seed and
    refimpl run with its serde); the same store with one behaviour changed
    (a duplicate put returns the cached handle) is caught."""
    store = stores["seed_pickle_serde"]
    quick(machine(store, layout=False)).TestCase().runTest()

    class Lenient(store.SingleWriterShmObjectStorage):
        def put(self, key: str, value: Any) -> tuple[int, int]:
            if self.is_cached(key):
                return self.get_cached(key)
            return super().put(key, value)

    broken = ModuleType("lenient_pickle_store")
    broken.SingleWriterShmRingBuffer = store.SingleWriterShmRingBuffer
    broken.SingleWriterShmObjectStorage = Lenient
    with pytest.raises(AssertionError, match="put"):
        quick(machine(broken, layout=False)).TestCase().runTest()


def test_the_pickle_stores_full_recording_goes_on_past_its_unpickling_error(stores, tmp_path):
    """The full run's first recording (300 steps, seed 1; a quick run's 150
    steps never get there): the pickle store's read of an overwritten chunk
    raises UnpicklingError, which is that step's outcome (issue 40: "torn"), so the
    run is recorded to its end and trace validation judges it (FAIL, as the
    seed: tests/traces/test_trace_validation.py judges such an outcome), where the
    recording used to stop and the property was ERROR."""
    from shmref.traces.recording import Recording, record

    recording = record(stores["seed_pickle_serde"], 300, 1)
    # its serde's own exception at the copy is named "torn" (shmref.store.splitread sees where
    # it came from); an UnpicklingError out of the store's own code keeps its class name
    raised = [k for k, e in enumerate(recording.log) if e["outcome"] in ("torn", "UnpicklingError")]
    assert raised and recording.log[raised[0]]["name"] == "get_copy", recording.log[-3:]
    assert recording.log[raised[0]]["outcome"] == "torn"
    assert len(recording.log) == len(record(stores["seed"], 300, 1).log)  # to the end
    recording.save(tmp_path / "recording-1.json")
    assert Recording.load(tmp_path / "recording-1.json") == recording


# -- end to end (slow) -----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.tlc
def test_a_wide_serde_is_replayed_on_the_model_of_its_width(stores, monkeypatch):
    """MCStorageWide is not decoration: a store driven with the pickle store's
    own serde (48-byte units) diverges from MCStorage's simulations at a free
    step and follows MCStorageWide's, and the seed (16-byte units) the other
    way round. By default both are driven in 16-byte units
    (`driving_serde_class`: a store whose own serde is wide gets refimpl's
    msgpack-only one), so that each is judged at the seed's resolution."""
    from shmref.store import driver, values
    from shmref.suite.test_replay import replay_all, storage_corpus, storage_model

    pickle_store, seed = stores["seed_pickle_serde"], stores["seed"]
    assert (storage_model(pickle_store), storage_model(seed)) == ("MCStorage", "MCStorage")
    for module in (values, driver):  # each store driven with its own serde
        monkeypatch.setattr(
            module, "driving_serde_class", lambda impl, serde_class=None: serde_class
        )

    class Narrow(seed.SingleWriterShmObjectStorage):  # the seed, msgpack-only by default
        def __init__(
            self,
            max_object_size: int,
            n_readers: int,
            ring_buffer: Any,
            serde_class: type = refimpl.MsgpackOnlySerde,
            reader_lock: Any = None,
        ) -> None:
            super().__init__(max_object_size, n_readers, ring_buffer, serde_class, reader_lock)

    seed = store_module("narrow_seed", seed.SingleWriterShmRingBuffer, Narrow)
    assert (storage_model(pickle_store), storage_model(seed)) == ("MCStorageWide", "MCStorage")
    for impl, own, other in (
        (pickle_store, "MCStorageWide", "MCStorage"),
        (seed, "MCStorage", "MCStorageWide"),
    ):
        assert replay_all(impl, own, storage_corpus(own))[1] == []
        failures = replay_all(impl, other, storage_corpus(other))[1]
        assert failures and "free_unused" in failures[0], impl.__name__


def failures_in(out: Path, which: Any) -> list[str]:
    """The report's failure traces of the named (level, property) pairs, so
    that a difference from the seed says why."""
    import json

    report = json.loads((out / "conformance.json").read_text())
    return [
        failure["trace"]
        for level in LEVELS
        for c in report["levels"][level]["checks"]
        if (level, c["name"]) in which
        for failure in c.get("failures", [])
    ]


def run_oracle(impl: str, out: Path) -> dict[str, Any]:
    """`python -m shmref.conformance --impl IMPL --quick --all-groups
    --no-shrink`, the fixture stores importable; {(level, name): (status,
    seed's status)}. Verdicts only, as the seed baseline's: the stores fail
    what the seed fails (three state machines among them), and shrinking
    those was most of the run; a status that differs still shows its trace."""
    import json

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), str(STORES), env.get("PYTHONPATH", "")) if p
    )
    proc = subprocess.run(
        [sys.executable, "-m", "shmref.conformance", "--impl", impl, "--quick", "--all-groups"]
        + ["--no-shrink", "--out", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert (out / "conformance.json").is_file(), proc.stdout + proc.stderr
    report = json.loads((out / "conformance.json").read_text())
    return {
        (level, c["name"]): (c["status"], c["seed"])
        for level in LEVELS
        for c in report["levels"][level]["checks"]
    }


@pytest.mark.slow
@pytest.mark.tlc
@pytest.mark.xdist_group("conformance")
def test_the_layout_store_gets_the_seeds_verdict_outside_the_layout_claim(stores, tmp_path):
    checks = run_oracle("seed_other_layout", tmp_path)
    outside = {k: v for k, v in checks.items() if k[0] != LAYOUT}
    assert outside and {k for k, (mine, seed) in outside.items() if mine != seed} == set()
    claim = {k[1]: v for k, v in checks.items() if k[0] == LAYOUT}
    assert set(claim) == LAYOUT_PROPERTIES
    assert {v for v in claim.values()} == {("FAIL", "pass")}, claim


@pytest.mark.slow
@pytest.mark.tlc
@pytest.mark.xdist_group("conformance")
def test_the_count_last_store_gets_the_seeds_verdict_outside_the_layout_claim(stores, tmp_path):
    """Objects laid out `[metadata][data][count]` with the seed's optional
    pieces on offer: reads are the store's own `get` held at its serde
    (shmref.store.splitread), never composed from the seed's object layout,
    so every property outside seed-layout gets the seed's status; the layout
    claim fails where the object's bytes are read."""
    checks = run_oracle("seed_count_last", tmp_path)
    outside = {k: v for k, v in checks.items() if k[0] != LAYOUT}
    differ = {k: v for k, v in outside.items() if v[0] != v[1]}
    assert outside and not differ, (differ, failures_in(tmp_path, differ))
    claim = {k[1]: v for k, v in checks.items() if k[0] == LAYOUT}
    assert claim["test_storage.py::test_object_layout_in_segment"] == ("FAIL", "pass"), claim


@pytest.mark.slow
@pytest.mark.tlc
@pytest.mark.xdist_group("conformance")
def test_the_serde_store_passes_seed_compatible_as_the_seed(stores, tmp_path):
    """A serde with more overhead (48-byte units) changes no verdict: the
    store gets the seed's status on every property of every level."""
    checks = run_oracle("seed_pickle_serde", tmp_path)
    differ = {k: v for k, v in checks.items() if v[0] != v[1]}
    assert checks and not differ, (differ, failures_in(tmp_path, differ))
    compatible = {k: v for k, v in checks.items() if k[0] == SEED}
    assert {mine for mine, _seed in compatible.values()} <= {"pass", "skip"}
    layout = {k: v for k, v in checks.items() if k[0] == LAYOUT}
    assert all(mine == seed == "pass" for mine, seed in layout.values()), layout


@pytest.mark.slow  # the plugin builds no seed baseline: in no xdist group
@pytest.mark.parametrize(
    "store, marker, failing",
    [
        ("seed_other_layout", "seed_layout", LAYOUT_PROPERTIES),
        ("seed_json_serde", "seed_compatible", set()),
        ("seed_json_serde", "seed_layout", set()),
    ],
)
def test_the_plugin_judges_the_store_by_its_level(stores, store, marker, failing):
    """`pytest --shmref-impl STORE --pyargs shmref.suite -m MARKER`: the
    layout store fails exactly the layout tests; the JSON serde store passes
    seed-compatible and seed-layout (its bytes are the seed's, its serde
    travels in the handle). Which tests fail is all that is asked: the quick
    profile, failures not shrunk. That the layout store and the pickle store
    pass seed-compatible is their oracle runs' above (the same plugin runs
    the suite in the oracle's children; docs/ci-time.md)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), str(STORES), env.get("PYTHONPATH", "")) if p
    )
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += ["--rootdir", str(REPO), "--shmref-impl", store, "--shmref-profile"]
    command += ["shmref-quick-baseline", "--pyargs", "shmref.suite", "-m", marker]
    run = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    failed = {
        "test_" + line.split("::test_", 1)[1].split("[")[0].split()[0]
        for line in run.stdout.splitlines()
        if line.startswith(("FAILED ", "ERROR "))
    }
    assert failed == {label.split("::", 1)[1] for label in failing}, run.stdout[-3000:]
    assert run.returncode == (1 if failing else 0), run.stdout[-3000:]


# -- reads held at the store's serde (shmref.store.splitread) ----------------------------------


def test_a_held_read_lets_the_writer_act_between_the_steps(stores):
    """On the count-last store: a read begun, the writer puts and frees, the
    read is copied and ended with its own value, and its count (at the end
    of the object, where the seed's layout has none) frees the chunk."""
    from shmref.store.driver import Driver

    with Driver(stores["seed_count_last"], 8, n_readers=1, id_max=5, max_obj=3) as story:
        assert story.put("a", 2).status == "ok"
        assert story.get_begin(0, ("a", 0, 0)).status == "ok"
        assert story.put("b", 2).status == "ok"
        story.free_unused()
        assert story.observe()["key_index"] == {"a": (0, 0), "b": (2, 1)}  # a: not read yet
        assert story.get_copy(0).status == "ok"
        assert story.get_end(0).result == "a"
        story.free_unused()
        assert story.observe()["key_index"] == {"b": (2, 1)}


def test_a_get_that_bypasses_the_handles_serde_is_not_split(stores):
    """A store whose get deserializes with a serde of its own cannot be held
    at the handle's: its split reads are not run (never passed)."""
    from shmref.contract import MissingCapability
    from shmref.store.driver import Driver
    from shmref.store.values import driving_serde_class

    seed = stores["seed"]

    class OwnSerde(seed.SingleWriterShmObjectStorage):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # the serde the Driver drives it with, but an instance of its own
            self.ser_de = driving_serde_class(seed)()

    module = store_module("own_serde_store", seed.SingleWriterShmRingBuffer, OwnSerde)
    with Driver(module, 8, n_readers=1, id_max=5, max_obj=3) as story:
        story.put("a", 2)
        with pytest.raises(MissingCapability, match="split read"):
            story.get_begin(0, ("a", 0, 0))


def test_the_machine_catches_a_count_in_the_wrong_place(stores):
    """The count-last store with its reads counted where the seed counts
    (the object's first 4 bytes, its metadata here): the seed-compatible
    machine, judging through the API, fails it."""
    from shmref.testing.machine import level_overrides, machine_for

    store = stores["seed_count_last"]

    class Misplaced(store.SingleWriterShmObjectStorage):
        def increment_reader_flag(self, data_view: memoryview) -> None:
            with self.ring_buffer.access_buf(self._reading) as (view, _):
                super().increment_reader_flag(view[:4])

        def get(self, address: int, *args: Any) -> Any:
            self._reading = address
            return super().get(address, *args)

    broken = store_module("misplaced_count_store", store.SingleWriterShmRingBuffer, Misplaced)
    with pytest.raises(AssertionError):
        quick(machine_for(broken, **level_overrides("seed"))).TestCase().runTest()
    quick(machine_for(store, **level_overrides("seed"))).TestCase().runTest()  # the store passes


def store_module(name: str, ring_cls: type, storage_cls: type) -> ModuleType:
    """A store module of `ring_cls` and `storage_cls`, whose readers (made by
    create_from_handle) are `storage_cls` too."""

    def create_from_handle(handle: Any) -> Any:
        ring = ring_cls(*handle.ring_buffer_handle)
        return storage_cls(
            handle.max_object_size,
            handle.n_readers,
            ring,
            handle.serde_class,
            handle.reader_lock,
        )

    storage_cls.create_from_handle = staticmethod(create_from_handle)  # type: ignore[attr-defined]
    module = ModuleType(name)
    module.SingleWriterShmRingBuffer = ring_cls  # type: ignore[attr-defined]
    module.SingleWriterShmObjectStorage = storage_cls  # type: ignore[attr-defined]
    return module
