"""`python -m shmref.conformance` end to end, with the smallest runs that
prove it: a broken copy of refimpl fails the protocol level, each failure
carrying a trace and a command that replays it in a fresh shell; refimpl
passes the same run; both carry the seed's own result (one seed run, cached
in the user cache and shared by the runs of this module). Slow: refimpl
passes every level, and a faithful port of the seed gets the seed's verdict
on every property of every level. Also the contract (shmref.contract) and
its document, and the oracle's messages.

The conformance CLI runs pytest on shmref.suite in its own process: these
tests are about that CLI, so they run it as a subprocess, each run once per
module (the fixtures below); the xdist group keeps them on one worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shmref import contract
from shmref.conformance import (
    HARDENED,
    LEVELS,
    NOT_RUN,
    PROTOCOL,
    SEED,
    TEST_GROUPS,
    failure_trace,
    level_status,
    pytest_checks,
)
from shmref.driver import value_for
from shmref.mutants import build_mutant
from shmref.observe import first_difference

REPO = Path(__file__).resolve().parents[1]
# The runs needing TLC (hazard traces, trace validation) and the suite on a
# module: one worker, so that the seed baseline is computed once.
CLI = [pytest.mark.tlc, pytest.mark.xdist_group("conformance")]
MUTANT = "free_rule_without_n_readers"


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
        timeout=900,
    )


def report_of(proc: subprocess.CompletedProcess[str], out: Path) -> dict[str, Any]:
    assert (out / "conformance.json").is_file(), proc.stdout + proc.stderr
    report: dict[str, Any] = json.loads((out / "conformance.json").read_text())
    report["markdown"] = (out / "conformance.md").read_text()
    report["returncode"] = proc.returncode
    report["output"] = proc.stdout + proc.stderr
    return report


@pytest.fixture(scope="module")
def mutant_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Reclaiming after one reader's read, judged at the protocol level (quick)."""
    module = build_mutant(MUTANT)
    out = tmp_path_factory.mktemp("mutant")
    proc = conformance(
        "--impl",
        module.__name__,
        "--quick",
        "--level",
        PROTOCOL,
        "--out",
        str(out),
        extra_path=Path(module.__file__ or "").parents[1],
    )
    return report_of(proc, out)


@pytest.fixture(scope="module")
def refimpl_report(
    tmp_path_factory: pytest.TempPathFactory, mutant_report: dict[str, Any]
) -> dict[str, Any]:
    """refimpl, the same run (after the mutant's, whose seed baseline it reuses)."""
    out = tmp_path_factory.mktemp("refimpl")
    proc = conformance("--impl", "refimpl", "--quick", "--level", PROTOCOL, "--out", str(out))
    return report_of(proc, out)


def checks_of(report: dict[str, Any], level: str) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["levels"][level]["checks"]}


class TestProtocolRun:
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
                assert f"--impl refimpl_{MUTANT}" in failure["command"]
                assert failure["trace"].strip()
        assert "| protocol-safe | **FAIL" in report["markdown"]
        assert "diverged at state" in report["markdown"]

    def test_a_failure_replays_from_a_fresh_shell(self, mutant_report):
        """A replay command pasted into a fresh shell (no inherited environment,
        no working directory) reproduces the failure (exit 1); it does not fail
        to find its test or module (exit 4 or 5, ImportError)."""
        failures = [
            f
            for c in checks_of(mutant_report, PROTOCOL).values()
            for f in c["failures"]
            if "pytest" in f["command"]
        ]
        replay = [f for f in failures if "test_replay.py" in f["command"]]
        command = (replay or failures)[0]["command"]
        fresh = subprocess.run(
            ["bash", "-c", command],
            cwd="/",
            capture_output=True,
            text=True,
            env={"PATH": os.environ["PATH"], "HOME": "/tmp"},
            timeout=600,
        )
        assert fresh.returncode == 1, command + "\n" + fresh.stdout[-2000:] + fresh.stderr[-2000:]
        assert "ModuleNotFoundError" not in fresh.stdout + fresh.stderr

    def test_refimpl_passes_the_same_run(self, refimpl_report):
        report = refimpl_report
        assert report["returncode"] == 0, report["output"] + report["markdown"]
        assert report["ok"] and report["impl"] == "refimpl"
        assert report["levels"][PROTOCOL]["status"] == "pass"
        checks = checks_of(report, PROTOCOL)
        assert {
            "replay MCStorage",
            "test_stateful.py::test_store_machine",
            "hazard MCDoubleRead",
            "trace validation",
        } <= set(checks)
        # the hazards no seed-compatible implementation closes are assumptions
        assert checks["hazard MCLostReader"]["status"] == "assumption"
        assert checks["hazard MCIdWrap"]["status"] == "pass"  # F4: clear rotates the secret
        assert checks["hazard MCDoubleRead"]["status"] == "pass"

    def test_every_property_carries_the_seeds_own_result(self, mutant_report, refimpl_report):
        """One seed run (the cached baseline) beside both reports: the seed's
        protocol-level result, which fails the hazards refimpl closes."""
        levels = (refimpl_report["levels"][PROTOCOL], mutant_report["levels"][PROTOCOL])
        assert [level["seed"] for level in levels] == ["FAIL", "FAIL"]
        for report in (mutant_report, refimpl_report):
            for check in checks_of(report, PROTOCOL).values():
                assert check["seed"] in ("pass", "FAIL", "skip", "assumption"), check
        seed_checks = {n: c["seed"] for n, c in checks_of(refimpl_report, PROTOCOL).items()}
        assert seed_checks["hazard MCDoubleRead"] == "FAIL"  # the seed's defect
        assert seed_checks["hazard MCLostReader"] == "assumption"


@pytest.mark.slow
@pytest.mark.tlc
@pytest.mark.xdist_group("conformance")
def test_refimpl_passes_every_level(tmp_path, is_refimpl):
    if not is_refimpl:
        pytest.skip("about refimpl")
    proc = conformance("--impl", "refimpl", "--quick", "--out", str(tmp_path))
    report = report_of(proc, tmp_path)
    assert proc.returncode == 0, report["output"] + report["markdown"]
    assert report["ok"] and report["impl"] == "refimpl"
    for level in LEVELS:
        assert report["levels"][level]["status"] == "pass", level
        assert f"| {level} | **pass" in report["markdown"]
    checks = [c for level in LEVELS for c in report["levels"][level]["checks"]]
    assert {
        "test_layout.py::test_same_results_as_seed",
        "hazard MCDoubleRead",
        "trace validation",
        "test_stateful.py::test_store_machine",
        "replay MCStorage",
    } <= {c["name"] for c in checks}
    assert all(c["seed"] for c in checks), "every property carries the seed's result"


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


@pytest.mark.tlc
def test_hazard_replay_command_reports_the_assumption(is_refimpl):
    """`--hazard` replays one counterexample; an assumption exits 0, with its table."""
    if not is_refimpl:
        pytest.skip("about refimpl")
    proc = conformance("--impl", "refimpl", "--hazard", "MCLostReader")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ASSUMPTION" in proc.stdout and "drop_delivery" in proc.stdout


# -- the seed and its faithful port ------------------------------------------------------


def test_the_port_keeps_the_contract_and_renames_every_private_name():
    """The faithful port (shmref.port) of the seed: every contract name, none
    of the seed's private ones."""
    from shmref.port import build_port_module

    port = build_port_module()
    assert contract.missing(port) == []  # the port keeps every contract name ...
    ring = port.SingleWriterShmRingBuffer(64, create=True)
    try:  # ... and none of the seed's private ones
        assert not hasattr(ring, "metadata") and not hasattr(ring, "shared_memory")
        assert hasattr(ring, "_port_metadata")
    finally:
        ring.close()


@pytest.mark.slow
@pytest.mark.tlc
@pytest.mark.xdist_group("conformance")
def test_seed_passes_seed_compatible_and_a_faithful_port_gets_the_seeds_verdict(tmp_path):
    """The seed passes seed-compatible with 0 failures, by construction; the
    port gets exactly the seed's result on every property of every level
    (the report's `seed` column is the seed's own run, cached)."""
    proc = conformance("--impl", "port", "--quick", "--all-groups", "--out", str(tmp_path))
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    report = json.loads((tmp_path / "conformance.json").read_text())
    seed = json.loads((tmp_path / "seed-baseline" / "conformance.json").read_text())
    assert seed["levels"][SEED]["status"] == "pass"
    assert not [c for c in seed["levels"][SEED]["checks"] if c["status"] in ("FAIL", "ERROR")]
    mine = {
        (level, c["name"]): c["status"]
        for level in LEVELS
        for c in report["levels"][level]["checks"]
    }
    theirs = {
        (level, c["name"]): c["status"] for level in LEVELS for c in seed["levels"][level]["checks"]
    }
    assert mine.keys() == theirs.keys()
    differing = {k: (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]}
    assert not differing, f"port vs seed: {differing}"
    every_group = {g.label for g in TEST_GROUPS if not g.split}
    assert every_group <= {name for _level, name in mine}
    for level in LEVELS:
        assert report["levels"][level]["seed"] == seed["levels"][level]["status"]


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
            "node": "tests/test_ring.py::TestBadInput::test_x[1]",
            "status": "fail",
            "text": "E  AssertionError: boom",
        },
        {"node": "tests/test_ring.py::test_y", "status": "pass", "text": ""},
    ]
    groups = [g for g in TEST_GROUPS if g.select.startswith("tests/test_ring.py")]
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


@pytest.mark.tlc
def test_an_implementation_raising_the_unexpected_is_named_with_its_step():
    """A RuntimeError from put is the implementation's: the hazard check says
    at which step and what it raised; the oracle does not crash."""
    import types

    import refimpl
    from shmref.conformance import ERROR, HAZARDS, hazard_check, hazard_trace

    class Storage(refimpl.SingleWriterShmObjectStorage):
        def put(self, key, value):
            raise RuntimeError("disk on fire")

    module = types.ModuleType("refimpl_raising")
    module.SingleWriterShmRingBuffer = refimpl.SingleWriterShmRingBuffer
    module.SingleWriterShmObjectStorage = Storage
    hazard = next(h for h in HAZARDS if h.model == "MCDoubleRead")
    trace, source = hazard_trace(hazard.model)
    check, replay = hazard_check("refimpl_raising", module, hazard, trace, source)
    assert replay is None and check.status == ERROR
    assert check.detail.startswith("step ") and "put(" in check.detail
    assert "RuntimeError: disk on fire" in check.detail
