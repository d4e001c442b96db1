"""Expectations (issue 42): `--expect FILE` exits 0 iff every result is what
the file expects, and names every result it does not (a new failure, an
unexpected pass); `--write-expectations FILE` writes the file a run expects;
a bad file is one line naming the file, the line and what is wrong, exit 2.

In this process: the file read and judged on made-up checks. Through the
CLI, in `--only` runs of a few properties (seconds each): the seed's run
writes the file and passes with it; a mutant that breaks one more property
exits 1 naming only that one; refimpl, which fixes what the seed fails, is
told each unexpected pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shmref.core.levels import FAIL, FLAKY, HARDENED, NOT_RUN, PASS, PROTOCOL, SEED
from shmref.oracle import cli
from shmref.oracle.expectations import Expectations, ExpectationsError, load, parse, write
from shmref.oracle.testgroups import plugin_args
from shmref.oracle.verdict import Check

REPO = Path(__file__).resolve().parents[2]
BAD_ADDRESSES = "test_ring.py::TestBadInput::test_bad_addresses"  # the seed fails it (hardened)
COPY_FAIL = "hazard MCCopyFail"  # the seed fails it on every counterexample
# the seed passes it, tests/stores/seed_writer_reads_uncounted.py fails it
FAILED_BY_MUTANT = "test_storage.py::test_writer_with_lock_counts_its_gets_as_the_seed"
ONLY = [BAD_ADDRESSES, COPY_FAIL, FAILED_BY_MUTANT]

GOOD = """\
version = 1

[[expected]]
property = "test_ring.py::TestBadInput::test_bad_addresses"
status = "FAIL"
reason = "keeps the seed's untyped addresses (finding 1)"

[[expected]]
property = "hazard MCCopyFail"
case = "MCCopyFail sim-3"
status = "FAIL"
reason = "https://example.invalid/bug/7"

[[expected]]
property = "hazard MCDoubleRead"
status = ["pass", "FAIL"]
reason = "a known flake"
"""


def test_a_good_file_is_read():
    found = parse(GOOD, "x.toml")
    assert [(e.prop, e.case, e.statuses) for e in found.entries] == [
        (BAD_ADDRESSES, "", ("FAIL",)),
        (COPY_FAIL, "MCCopyFail sim-3", ("FAIL",)),
        ("hazard MCDoubleRead", "", ("pass", "FAIL")),
    ]
    assert found.entries[0].reason.startswith("keeps the seed's")


@pytest.mark.parametrize(
    ("change", "line", "said"),
    [
        (("[[expected]]\nproperty", "[[expected]\nproperty"), 3, "not TOML"),
        (
            ('status = "FAIL"\nreason = "keeps', 'status = "FAILED"\nreason = "keeps'),
            5,
            "unknown status 'FAILED'",
        ),
        (('test_bad_addresses"', 'test_bad_adresses"'), 4, "unknown property"),
        (("MCCopyFail sim-3", "MCCopyFail sim-9"), 10, "unknown case 'MCCopyFail sim-9'"),
        (
            ('reason = "a known flake"', 'reason = "a known flake"\nbug = 3'),
            18,
            "unknown key 'bug'",
        ),
        (
            ("hazard MCDoubleRead", 'hazard MCCopyFail"\ncase = "MCCopyFail sim-3'),
            16,
            "listed twice",
        ),
        (("version = 1", "version = 2"), 1, "version 2"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file_and_the_line(change, line, said):
    text = GOOD.replace(*change)
    assert text != GOOD
    with pytest.raises(ExpectationsError) as raised:
        parse(text, "store.toml")
    message = str(raised.value)
    assert message.startswith(f"store.toml:{line}: ") and said in message, message
    assert "\n" not in message


def test_the_cli_refuses_a_bad_file_in_one_line_before_running(tmp_path, capsys):
    path = tmp_path / "store.toml"
    path.write_text(GOOD.replace('FAIL"\nreason = "keeps', 'FAILS"\nreason = "keeps'))
    assert cli.main(["--impl", "refimpl", "--expect", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err == f"shmref: {path}:5: unknown status 'FAILS' (known: pass, FAIL, skip, "
        "not run, assumption, ERROR, CRASH, TIMEOUT, FLAKY)"
    )
    assert cli.main(["--impl", "refimpl", "--expect", str(tmp_path / "none.toml")]) == 2
    assert "none.toml: cannot read it: No such file" in capsys.readouterr().err


def hazard(status: str, *cases: str) -> Check:
    check = Check(PROTOCOL, COPY_FAIL, "copy fails", status)
    check.failures = [{"case": f"MCCopyFail {c}", "trace": "", "command": ""} for c in cases]
    return check


def kinds(expect: Expectations, *checks: Check) -> list[tuple[str, str, str]]:
    return [(s.kind, s.prop, s.case) for s in expect.judge(checks)]


def test_every_result_in_either_direction_is_judged():
    expect = parse(GOOD, "x.toml")
    listed = Check(HARDENED, BAD_ADDRESSES, "", FAIL)
    unlisted = Check(SEED, FAILED_BY_MUTANT, "", FAIL)
    assert kinds(expect, listed, Check(SEED, FAILED_BY_MUTANT, "", PASS)) == []
    assert kinds(expect, unlisted) == [("new failure", FAILED_BY_MUTANT, "")]
    assert kinds(expect, Check(HARDENED, BAD_ADDRESSES, "", PASS)) == [
        ("unexpected pass", BAD_ADDRESSES, "")
    ]
    assert kinds(expect, Check(HARDENED, BAD_ADDRESSES, "", "TIMEOUT")) == [
        ("new failure", BAD_ADDRESSES, "")
    ]
    # not judged (a missing capability): neither a failure nor a pass of a listed case
    assert kinds(expect, Check(PROTOCOL, COPY_FAIL, "", NOT_RUN)) == []
    # per case: one more failing counterexample, or the listed one closed
    assert kinds(expect, hazard(FAIL, "sim-3")) == []
    assert kinds(expect, hazard(FAIL, "sim-3", "bfs")) == [
        ("new failure", COPY_FAIL, "MCCopyFail bfs")
    ]
    assert kinds(expect, hazard(FAIL, "bfs")) == [
        ("new failure", COPY_FAIL, "MCCopyFail bfs"),
        ("unexpected pass", COPY_FAIL, "MCCopyFail sim-3"),
    ]
    assert kinds(expect, hazard(PASS)) == [("unexpected pass", COPY_FAIL, "MCCopyFail sim-3")]


def test_a_known_flake_is_expected_and_an_unknown_one_is_named():
    expect = parse(GOOD, "x.toml")
    known = Check(PROTOCOL, "hazard MCDoubleRead", "", FLAKY, attempts=[FAIL, PASS])
    unknown = Check(HARDENED, BAD_ADDRESSES, "", FLAKY, attempts=[FAIL, PASS])
    assert kinds(expect, known) == []
    assert kinds(expect, unknown) == [("flaky", BAD_ADDRESSES, "")]
    line = expect.judge([unknown])[0].line("x.toml")
    assert line == f"flaky: {BAD_ADDRESSES} (expected FAIL, got FLAKY: FAIL, pass)"


def test_the_written_file_expects_the_run_and_keeps_known_reasons(tmp_path):
    checks = [
        Check(HARDENED, BAD_ADDRESSES, "", FAIL),
        hazard(FAIL, "sim-3", "bfs"),
        Check(SEED, FAILED_BY_MUTANT, "", PASS),
        Check(PROTOCOL, "hazard MCDoubleRead", "", FLAKY, attempts=[FAIL, PASS]),
    ]
    path = tmp_path / "x.toml"
    assert write(path, checks, parse(GOOD, "x.toml")) == 4
    again = load(path)
    assert again.judge(checks) == []
    reasons = {(e.prop, e.case): e.reason for e in again.entries}
    assert reasons[(BAD_ADDRESSES, "")].startswith("keeps the seed's")
    assert reasons[(COPY_FAIL, "MCCopyFail sim-3")] == "https://example.invalid/bug/7"
    assert reasons[(COPY_FAIL, "MCCopyFail bfs")] == ""  # left to fill in
    assert reasons[("hazard MCDoubleRead", "")] == "a known flake"
    write(path, checks)
    assert {e.reason for e in load(path).entries} == {"", "attempts: FAIL, pass"}


# -- through the CLI, a few properties each --------------------------------------------------


def conformance(
    impl: str, out: Path, *args: str, path: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), path) if p)}
    command = [sys.executable, "-m", "shmref.conformance", "--impl", impl, "--quick"]
    command += ["--no-baseline", "--no-progress", "--no-shrink", "--out", str(out), *args]
    command += [a for name in ONLY for a in ("--only", name)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, cwd=REPO)


@pytest.fixture(scope="module")
def seed_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The expectations the seed's run writes (it fails two of ONLY)."""
    folder = tmp_path_factory.mktemp("seed")
    proc = conformance("seed", folder / "report", "--write-expectations", str(folder / "x.toml"))
    assert proc.returncode == 1 and "expectations: 8 entries written" in proc.stdout, proc.stderr
    return folder / "x.toml"


def test_the_seed_passes_with_the_file_it_wrote(seed_file, tmp_path):
    proc = conformance("seed", tmp_path, "--expect", str(seed_file))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"expectations: every result as {seed_file} expects" in proc.stdout
    report = json.loads((tmp_path / "conformance.json").read_text())
    assert report["expectations"]["surprises"] == [] and not report["ok"]


def test_a_mutant_breaking_one_more_property_is_named_alone(seed_file, tmp_path):
    """The seed with a writer that does not count its reads (tests/stores/)."""
    stores = str(REPO / "tests" / "stores")
    proc = conformance(
        "seed_writer_reads_uncounted", tmp_path, "--expect", str(seed_file), path=stores
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    named = [line.strip() for line in proc.stdout.splitlines() if line.startswith("  ")]
    assert named == [f"new failure: {FAILED_BY_MUTANT} (expected no failure, got FAIL)"]


def test_a_fixed_failure_is_an_unexpected_pass_to_record(seed_file, tmp_path):
    """refimpl fixes what the seed fails: each listed failure is named."""
    proc = conformance("refimpl", tmp_path, "--expect", str(seed_file))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    named = [line.strip() for line in proc.stdout.splitlines() if line.startswith("  ")]
    assert len(named) == 8 and all(line.startswith("unexpected pass: ") for line in named)
    assert f"unexpected pass: {BAD_ADDRESSES} (expected FAIL, got pass); record it in" in named[0]


# -- the pytest plugin: --shmref-expect ------------------------------------------------------

SINGLE = "test_ring.py::TestBadInput::test_reader_cannot_write"  # one test; the seed fails it
PLUGIN_FILE = f"""\
version = 1
[[expected]]
property = "{BAD_ADDRESSES}"
status = "FAIL"
reason = "untyped addresses (finding 1)"
[[expected]]
property = "{SINGLE}"
status = "FAIL"
reason = "the seed lets a reader allocate"
"""


def suite(impl: str, expect: Path) -> subprocess.CompletedProcess[str]:
    tests = [str(REPO / "shmref" / "suite" / name) for name in (BAD_ADDRESSES, SINGLE)]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0"]
    command += [*plugin_args(), "--shmref-impl", impl, "--shmref-expect", str(expect)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [*command, *tests], capture_output=True, text=True, env=env, cwd=REPO, timeout=300
    )


def test_the_plugin_honours_the_same_file(tmp_path):
    """The seed fails both properties: xfail, exit 0. refimpl passes them: the
    one-test property is a strict XPASS, the parametrized one an unexpected pass."""
    expect = tmp_path / "x.toml"
    expect.write_text(PLUGIN_FILE)
    seed = suite("seed", expect)
    assert seed.returncode == 0 and "5 xfailed" in seed.stdout, seed.stdout + seed.stderr
    fixed = suite("refimpl", expect)
    assert fixed.returncode == 1, fixed.stdout + fixed.stderr
    assert "[XPASS(strict)]" in fixed.stdout and "4 xpassed" in fixed.stdout
    assert f"shmref: unexpected pass: {BAD_ADDRESSES} (none of its tests failed)" in fixed.stdout
    expect.write_text(PLUGIN_FILE.replace('"FAIL"', '"FIALED"', 1))
    bad = suite("seed", expect)
    assert bad.returncode == 4 and f"--shmref-expect: {expect}:4: unknown status" in bad.stderr
