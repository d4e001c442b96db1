"""The oracle (`python -m shmref.conformance`), in the smallest runs that
prove it. In `make test`: the hazard counterexamples refimpl closes and the
seed does not, replayed in this process; a failure's replay command, pasted
into a fresh shell, reproduces a broken copy of refimpl's failure; a module
lacking the contract is refused in one line; the contract's document; the
oracle's messages. `slow` (`make test-slow`), end to end through the CLI: a
broken copy of refimpl fails the protocol level with a trace and a command
per failure; refimpl passes every level; a faithful port of the seed gets
the seed's verdict on every property of every level.

The CLI runs pytest on shmref.suite in its own process: the slow tests are
about that CLI, so they run it as a subprocess, each run once per module (the
fixtures below), on one xdist worker (the group), so that the seed baseline
(cached in the user cache) is computed once and shared (refimpl's, the
port's and tests/oracle/test_layout_claim.py's runs have the same options, hence
the same baseline; the mutant's run needs none). A run that only gives
verdicts to compare does not shrink (`--no-shrink`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from shell_support import in_a_fresh_shell

import refimpl
from shmref import contract
from shmref.core.levels import FAIL, HARDENED, LEVELS, NOT_RUN, PROTOCOL, SEED
from shmref.core.suitegroups import TEST_GROUPS
from shmref.oracle.hazardcheck import hazard_check, hazard_counterexamples
from shmref.oracle.hazards import HAZARDS
from shmref.oracle.testgroups import failure_trace, pytest_checks
from shmref.oracle.verdict import level_status
from shmref.seed.mutants import build_mutant
from shmref.store.observe import first_difference
from shmref.store.values import value_for

REPO = Path(__file__).resolve().parents[2]
MUTANT = "free_rule_without_n_readers"
# a quick seed-compatible test that MUTANT fails (counts are per reader)
FAILED_BY_MUTANT = "test_storage.py::test_writer_with_lock_counts_its_gets_as_the_seed"
# end to end through the CLI: slow, needs TLC, one worker for the seed baseline
CLI = [pytest.mark.slow, pytest.mark.tlc, pytest.mark.xdist_group("conformance")]


def conformance(*args: str, extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    paths = [str(REPO), *([str(extra_path)] if extra_path else []), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return subprocess.run(
        [sys.executable, "-m", "shmref.conformance", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )


# -- in this process: hazards and replay commands -------------------------------------------


def test_refimpl_closes_the_hazards_the_seed_leaves_open():
    """Each hazard's shipped counterexamples replayed on refimpl and on the seed:
    refimpl passes the closable ones, the unclosable one is an assumption for
    both, and the seed fails at least the double read (FINDINGS)."""
    from shmref.seed.build import SeedError, build_seed_module

    try:
        seed = build_seed_module()
    except SeedError as exc:
        pytest.skip(f"no seed: {exc}")
    mine, theirs = {}, {}
    for hazard in HAZARDS:
        found = hazard_counterexamples(hazard.model)
        mine[hazard.model] = hazard_check("refimpl", refimpl, hazard, found)[0].status
        theirs[hazard.model] = hazard_check("shmref_seed", seed, hazard, found)[0].status
    assert mine["MCLostReader"] == theirs["MCLostReader"] == "assumption"
    assert mine["MCIdWrap"] == "pass"  # F4: clear rotates the signing secret
    assert (mine["MCDoubleRead"], theirs["MCDoubleRead"]) == ("pass", FAIL)
    for hazard in HAZARDS:
        if hazard.closable:
            assert mine[hazard.model] in ("pass", "skip"), (hazard.model, mine)
    assert set(mine.values()) <= {"pass", "assumption", "skip"}, mine


def test_a_failures_command_reproduces_it_in_a_fresh_shell():
    """The command the report gives for a failing case, pasted into a fresh
    shell, runs that one test on the broken implementation and fails (exit 1);
    it does not fail to find its test or module (exit 4 or 5, ImportError)."""
    module = build_mutant(MUTANT)
    group = next(g for g in TEST_GROUPS if g.label == "test_storage.py")
    case = {"node": FAILED_BY_MUTANT, "status": "fail", "text": "E   AssertionError: counts"}
    (check,) = pytest_checks(module.__name__, [group], [case], module)
    assert (check.level, check.status) == (SEED, FAIL)
    (failure,) = check.failures
    assert f"--shmref-impl {module.__name__}" in failure["command"]
    fresh = in_a_fresh_shell(failure["command"])
    output = fresh.stdout[-3000:] + fresh.stderr[-2000:]
    assert fresh.returncode == 1, failure["command"] + "\n" + output
    assert "ModuleNotFoundError" not in output and "1 failed" in fresh.stdout, output
    # the same command on refimpl passes: the failure is the mutant's
    fresh = in_a_fresh_shell(failure["command"].replace(module.__name__, "refimpl"))
    assert fresh.returncode == 0, fresh.stdout[-3000:]


# -- end to end through the CLI (slow) -------------------------------------------------------


def report_of(proc: subprocess.CompletedProcess[str], out: Path) -> dict[str, Any]:
    assert (out / "conformance.json").is_file(), proc.stdout + proc.stderr
    report: dict[str, Any] = json.loads((out / "conformance.json").read_text())
    report["markdown"] = (out / "conformance.md").read_text()
    report["returncode"] = proc.returncode
    report["output"] = proc.stdout + proc.stderr
    seed = out / "seed-baseline" / "conformance.json"
    report["seed_report"] = json.loads(seed.read_text()) if seed.is_file() else None
    return report


def checks_of(report: dict[str, Any], level: str) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["levels"][level]["checks"]}


@pytest.fixture(scope="module")
def mutant_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Reclaiming after one reader's read, judged at the protocol level (quick);
    no seed column (nothing here reads it: a seed baseline of its own is not built)."""
    module = build_mutant(MUTANT)
    out = tmp_path_factory.mktemp("mutant")
    proc = conformance(
        "--impl",
        module.__name__,
        "--quick",
        "--level",
        PROTOCOL,
        "--no-baseline",
        "--out",
        str(out),
        extra_path=Path(module.__file__ or "").parents[1],
    )
    return report_of(proc, out)


@pytest.fixture(scope="module")
def refimpl_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """refimpl, every level, every group (the port's run: one seed baseline)."""
    out = tmp_path_factory.mktemp("refimpl")
    proc = conformance("--impl", "refimpl", "--quick", "--all-groups", "--out", str(out))
    return report_of(proc, out)


@pytest.fixture(scope="module")
def port_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The port's verdicts only (it fails what the seed fails: nothing shrunk)."""
    out = tmp_path_factory.mktemp("port")
    args = ["--impl", "port", "--quick", "--all-groups", "--no-shrink", "--out", str(out)]
    proc = conformance(*args)
    return report_of(proc, out)


class TestCli:
    pytestmark = CLI

    def test_a_mutant_fails_the_protocol_level(self, mutant_report):
        """Reclaiming after one reader's read is a protocol bug: the replays
        and the state machine catch it, and each failure says how to replay it."""
        report = mutant_report
        assert report["returncode"] == 1, report["output"]
        assert not report["ok"]
        assert report["levels"][PROTOCOL]["status"] == "FAIL"
        assert report["levels"][SEED]["status"] == report["levels"][HARDENED]["status"] == NOT_RUN
        failed = [c for c in checks_of(report, PROTOCOL).values() if c["status"] == "FAIL"]
        assert "replay MCStorage" in {c["name"] for c in failed}
        for check in failed:
            for failure in check["failures"]:
                assert re.search(f"--(shmref-)?impl refimpl_{MUTANT}", failure["command"])
                assert failure["trace"].strip()
        assert re.search(r"\|\s*protocol-safe\s*\|\s*\*\*FAIL", report["markdown"])
        assert "diverged at state" in report["markdown"]
        commands = [f["command"] for c in failed for f in c["failures"] if "pytest" in f["command"]]
        # the replay's failure if there is one: it fails without a Hypothesis search
        command = next((c for c in commands if "test_replay.py" in c), commands[0])
        fresh = in_a_fresh_shell(command)
        assert fresh.returncode == 1, command + "\n" + fresh.stdout[-2000:] + fresh.stderr[-2000:]

    def test_refimpl_passes_every_level(self, refimpl_report):
        report = refimpl_report
        assert report["returncode"] == 0, report["output"] + report["markdown"]
        assert report["ok"] and report["impl"] == "refimpl"
        for level in LEVELS:
            assert report["levels"][level]["status"] == "pass", level
            assert re.search(rf"\|\s*{level}\s*\|\s*\*\*pass", report["markdown"]), level
        checks = {c["name"]: c for level in LEVELS for c in report["levels"][level]["checks"]}
        assert {
            "test_layout.py::test_same_results_as_seed",
            "hazard MCDoubleRead",
            "trace validation",
            "test_stateful.py::test_store_machine[seed]",
            "test_stateful.py::test_store_machine[fixed]",
            "test_stateful.py::test_store_machine[safety]",
            "replay MCStorage",
        } <= set(checks)
        assert all(c["seed"] for c in checks.values()), "every property carries the seed's result"
        assert checks["hazard MCDoubleRead"]["seed"] == FAIL

    def test_seed_passes_seed_compatible_and_a_faithful_port_gets_the_seeds_verdict(
        self, port_report
    ):
        """The seed passes seed-compatible with 0 failures, by construction; the
        port gets exactly the seed's result on every property of every level
        (the report's `seed` column is the seed's own run, cached)."""
        report, seed = port_report, port_report["seed_report"]
        assert report["returncode"] in (0, 1), report["output"]
        assert seed is not None, "no seed baseline: " + report["output"]
        assert seed["levels"][SEED]["status"] == "pass"
        assert not [c for c in seed["levels"][SEED]["checks"] if c["status"] in ("FAIL", "ERROR")]
        mine = {
            (level, c["name"]): c["status"]
            for level in LEVELS
            for c in report["levels"][level]["checks"]
        }
        theirs = {
            (level, c["name"]): c["status"]
            for level in LEVELS
            for c in seed["levels"][level]["checks"]
        }
        assert mine.keys() == theirs.keys()
        differing = {k: (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]}
        assert not differing, f"port vs seed: {differing}"
        every_group = {g.label for g in TEST_GROUPS if not g.split}
        assert every_group <= {name for _level, name in mine}
        for level in LEVELS:
            assert report["levels"][level]["seed"] == seed["levels"][level]["status"]


def test_failure_trace_is_the_shrunk_example():
    text = "\n".join(
        [
            "AssertionError: put('a', 1): implementation gave X, model expects Y",
            "self = Machine()",
            "E       AssertionError: put('a', 1): implementation gave X, model expects Y",
            "E       assert False",
            "E       Falsifying example:",
            "E       state = Machine()",
            "E       state.put(key='a', size=1)",
            "E       state.teardown()",
            "E       Explanation:",
            "E           These lines were always and only run by failing examples:",
            "E       You can reproduce this example by temporarily adding @reproduce_failure",
        ]
    )
    assert failure_trace(text) == "\n".join(
        [
            "AssertionError: put('a', 1): implementation gave X, model expects Y",
            "Falsifying example:",
            "state = Machine()",
            "state.put(key='a', size=1)",
            "state.teardown()",
        ]
    )


def test_hazard_replay_command_reports_the_assumption(is_refimpl):
    """`--hazard` replays one counterexample; an assumption exits 0, with its table."""
    if not is_refimpl:
        pytest.skip("about refimpl")
    proc = conformance("--impl", "refimpl", "--hazard", "MCLostReader")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ASSUMPTION" in proc.stdout and "drop_delivery" in proc.stdout


# -- the seed and its faithful port ------------------------------------------------------


def test_the_port_keeps_the_contract_and_renames_every_private_name():
    """The faithful port (shmref.seed.port) of the seed: every contract name, none
    of the seed's private ones."""
    from shmref.seed.port import build_port_module

    port = build_port_module()
    assert contract.missing(port) == []  # the port keeps every contract name ...
    ring = port.SingleWriterShmRingBuffer(64, create=True)
    try:  # ... and none of the seed's private ones
        assert not hasattr(ring, "metadata") and not hasattr(ring, "shared_memory")
        assert hasattr(ring, "_port_metadata")
    finally:
        ring.close()


# -- the contract ------------------------------------------------------------------------------

LACKING = """
import refimpl

SingleWriterShmRingBuffer = refimpl.SingleWriterShmRingBuffer


class SingleWriterShmObjectStorage:
    # refimpl's storage without is_cached

    def __init__(self, *args, **kwargs):
        self.inner = refimpl.SingleWriterShmObjectStorage(*args, **kwargs)

    def __getattr__(self, name):
        if name == "is_cached":
            raise AttributeError(name)
        return getattr(self.inner, name)

    create_from_handle = staticmethod(refimpl.SingleWriterShmObjectStorage.create_from_handle)
"""


def test_contract_document_is_generated_from_the_contract():
    text = (REPO / "docs" / "conformance.md").read_text()
    assert contract.DOC_BEGIN in text and contract.DOC_END in text
    shown = text.split(contract.DOC_BEGIN, 1)[1].split(contract.DOC_END, 1)[0]
    assert shown.strip() == contract.markdown().strip(), (
        "docs/conformance.md: paste shmref.contract.markdown() between the markers"
    )
    for name in ("key_index", "writer_flag", "shared_memory", "ser_de", "metadata"):
        assert f"`{name}`" not in shown, f"{name} is private: not part of the contract"


def test_missing_names_what_a_module_lacks(tmp_path, monkeypatch):
    import importlib

    import refimpl

    assert contract.missing(refimpl) == [] and contract.missing(refimpl, optional=True) == []
    (tmp_path / "lacking_impl.py").write_text(LACKING)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert contract.missing(importlib.import_module("lacking_impl")) == ["storage.is_cached"]


def test_a_module_lacking_required_names_is_refused_in_one_line(tmp_path):
    (tmp_path / "lacking_impl.py").write_text(LACKING)
    proc = conformance(
        "--impl", "lacking_impl", "--out", str(tmp_path / "out"), extra_path=tmp_path
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "lacking_impl: lacks what the contract (shmref.contract) requires: storage.is_cached"
    ]
    proc = conformance("--impl", "no_such_module_here")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().startswith("no_such_module_here: does not import")


def test_a_missing_optional_capability_is_not_run_never_pass():
    group = next(g for g in TEST_GROUPS if g.label == "replay MCStorage")
    cases = [
        {"node": group.select, "status": "skip", "text": "Skipped: not run: missing ring.ID_MAX"}
    ]
    (check,) = pytest_checks("m", [group], cases)
    assert check.status == NOT_RUN and check.detail == "not run: missing ring.ID_MAX"
    assert level_status([check], PROTOCOL, LEVELS) == NOT_RUN
    passing = [{"node": group.select, "status": "pass", "text": ""}]
    assert pytest_checks("m", [group], passing)[0].status == "pass"


def test_each_case_belongs_to_the_most_specific_group():
    cases = [
        {
            "node": "test_ring.py::TestBadInput::test_x[1]",
            "status": "fail",
            "text": "E  AssertionError: boom",
        },
        {"node": "test_ring.py::test_y", "status": "pass", "text": ""},
    ]
    groups = [g for g in TEST_GROUPS if g.select.startswith("test_ring.py")]
    checks = {c.name: c for c in pytest_checks("m", groups, cases)}
    assert checks["test_ring.py::TestBadInput::test_x"].level == HARDENED
    assert checks["test_ring.py::test_y"].level == SEED
    assert "closes finding" in checks["test_ring.py::TestBadInput::test_x"].what


# -- messages ------------------------------------------------------------------------------


def test_a_layout_mismatch_names_the_field_its_offset_and_both_values():
    expected = bytearray(64)
    expected[16:24] = (3).to_bytes(4, "little") + (24).to_bytes(4, "little")
    actual = bytearray(expected)
    actual[20] = 32  # the size field of the chunk at offset 16
    text = first_difference(bytes(expected), bytes(actual), [0, 16])
    assert text is not None
    assert "field 'size'" in text and "offset 16" in text
    assert "18000000" in text and "20000000" in text
    assert first_difference(bytes(expected), bytes(expected), [0]) is None
    assert "sizes differ" in (first_difference(b"ab", b"abc") or "")


class OddSerde:
    """A serde whose overhead is unlike msgpack's: a 5-byte header, and one
    more byte for str than for bytes."""

    def serialize(self, value):
        data = value.encode() + b"!" if isinstance(value, str) else bytes(value)
        return data, len(data), b"HEAD:", 5

    def deserialize(self, data):
        return bytes(data[5:])


def test_driver_values_fit_units_for_a_serde_with_another_overhead():
    serde = OddSerde()
    for size in (2, 3, 5):
        value = value_for("k1", size, serde)
        _data, n, _md, m = serde.serialize(value)
        assert 4 + m + n == 16 * size - 8
    with pytest.raises(ValueError, match="exactly 4 bytes with OddSerde"):
        value_for("k1", 1, serde)  # 4 + 5 header bytes cannot fit 8: said so

    class Jumpy:  # no length of any value fits: a clear message, not a hang
        def serialize(self, value):
            return b"", 1000, b"", 0

    with pytest.raises(ValueError, match="serializes to exactly"):
        value_for("k1", 1, Jumpy())


def test_an_implementation_raising_the_unexpected_is_named_with_its_step():
    """A RuntimeError from put is the implementation's: the hazard check says
    at which step and what it raised; the oracle does not crash."""
    import types

    import refimpl
    from shmref.core.levels import ERROR

    class Storage(refimpl.SingleWriterShmObjectStorage):
        def put(self, key, value):
            raise RuntimeError("disk on fire")

    module = types.ModuleType("refimpl_raising")
    module.SingleWriterShmRingBuffer = refimpl.SingleWriterShmRingBuffer
    module.SingleWriterShmObjectStorage = Storage
    hazard = next(h for h in HAZARDS if h.model == "MCDoubleRead")
    found = hazard_counterexamples(hazard.model)
    check, replay = hazard_check("refimpl_raising", module, hazard, found[:1])
    assert replay is not None and replay.violation == check.detail and check.status == ERROR
    assert check.detail.startswith("step ") and "put(" in check.detail
    assert "RuntimeError: disk on fire" in check.detail
