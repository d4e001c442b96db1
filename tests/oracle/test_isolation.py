"""The oracle judges stores that crash, hang, exit or raise BaseException
without dying itself (shmref.oracle.isolation, shmref.oracle.worker): each such store
(tests/faulty/) gets CRASH, TIMEOUT or ERROR on the properties it breaks, a
fresh report, and nothing left in /dev/shm. Also: the level table does not
depend on the run's options, bad options are one line, and a run without
the seed file reports what needs the seed as `not run`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from shmref.core.levels import CRASH, LEVELS, PASS, TIMEOUT
from shmref.core.suitegroups import TEST_GROUPS, TestGroup, group_of, property_key, property_of
from shmref.oracle.conformance_run import selected_groups
from shmref.oracle.shmclean import orphans
from shmref.process.segments import names as shm_names
from shmref.render import sink

REPO = Path(__file__).resolve().parents[2]
FAULTY = Path(__file__).resolve().parents[1] / "faulty"
# a level whose properties call a reader's get, and few of them: runs stay short
LEVEL = "hardened"


def conformance(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **(env or {})}
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO), str(FAULTY)])
    return subprocess.run(
        [sys.executable, "-m", "shmref.conformance", *args],
        capture_output=True,
        text=True,
        env=environment,
        stdin=subprocess.DEVNULL,
        timeout=900,
    )


def statuses(out: Path) -> dict[str, str]:
    report = json.loads((out / "conformance.json").read_text())
    return {c["name"]: c["status"] for d in report["levels"].values() for c in d["checks"]}


def run_faulty(module: str, out: Path, *extra: str) -> tuple[dict[str, str], str]:
    (out / "conformance.json").parent.mkdir(parents=True, exist_ok=True)
    (out / "conformance.json").write_text('{"stale": true}')  # an earlier run's report
    before = shm_names()
    proc = conformance(
        "--impl", module, "--quick", "--level", LEVEL, "--no-baseline", "--out", str(out), *extra
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert not orphans(before, settle=2.0), "left in /dev/shm"
    return statuses(out), (out / "conformance.md").read_text()


@pytest.mark.slow
def test_a_store_that_segfaults_gets_crash_and_the_run_goes_on(tmp_path):
    found, markdown = run_faulty("segfault_in_get", tmp_path)
    assert CRASH in found.values(), found
    assert PASS in found.values(), "the properties that never call get still pass"
    assert "killed by SIGSEGV" in markdown
    assert_drawn_up_to_the_call(tmp_path, CRASH, "get")


def assert_drawn_up_to_the_call(out: Path, status: str, call: str) -> None:
    """Each property that crashed or hung is drawn: its test's calls, the
    last one (the one that never returned) marked with the status."""
    report = json.loads((out / "conformance.json").read_text())
    lost = [
        f["case"]
        for level in report["levels"].values()
        for check in level["checks"]
        if check["status"] == status
        for f in check["failures"]
    ]
    traces, problems = sink.load_all(out / sink.FOLDER)
    assert lost and not problems
    for case in lost:
        steps = traces[case].steps
        assert steps[-1].outcome == status and steps[-1].diverged, case
        assert steps[-1].action == call and steps[-1].result == "never returned", case


@pytest.mark.slow
def test_a_store_that_hangs_gets_timeout_with_the_stack(tmp_path):
    found, markdown = run_faulty("hang_in_get", tmp_path, "--call-timeout", "3")
    assert TIMEOUT in found.values(), found
    assert "did not return within 3 s" in markdown
    assert "hang_in_get.py" in markdown, "the report shows where it hung"
    assert_drawn_up_to_the_call(tmp_path, TIMEOUT, "get")


# a store whose get_end (which only the hazard replays call) crashes or hangs, and that
# notes each process that imports it
ENDS_BADLY = """
import ctypes, os, threading
import refimpl
from refimpl import *  # noqa: F403
from refimpl import MsgpackSerde, ShmObjectStorageHandle, SingleWriterShmRingBuffer
with open({log!r}, "a") as log:
    log.write(f"{{os.getpid()}}\\n")
class SingleWriterShmObjectStorage(refimpl.SingleWriterShmObjectStorage):
    def get_end(self, *args, **kwargs):
        ctypes.string_at(0) if {crash} else threading.Event().wait()
    @staticmethod
    def create_from_handle(handle):
        ring = SingleWriterShmRingBuffer(*handle.ring_buffer_handle)
        return SingleWriterShmObjectStorage(
            handle.max_object_size, handle.n_readers, ring, handle.serde_class, handle.reader_lock
        )
"""


@pytest.mark.slow
@pytest.mark.parametrize("crash", [True, False], ids=["crash", "hang"])
def test_a_hazard_replays_in_a_child_whose_crash_or_hang_is_its_status(tmp_path, crash):
    """`--hazard` calls the store in a child like every other property: a
    crash or a hang in the replay is CRASH or TIMEOUT, with a report, and the
    oracle's own process never imports the store."""
    log = tmp_path / "imported-by.txt"
    (tmp_path / "ends_badly.py").write_text(ENDS_BADLY.format(log=str(log), crash=crash))
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path)])}
    out = tmp_path / "out"
    args = ["--impl", "ends_badly", "--hazard", "MCDoubleRead", "--call-timeout", "3"]
    oracle = subprocess.Popen(
        [sys.executable, "-m", "shmref.conformance", *args, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=environment,
        text=True,
    )
    stdout, stderr = oracle.communicate(timeout=600)
    assert oracle.returncode == 1, stdout + stderr
    status = CRASH if crash else TIMEOUT
    assert f"{status}: " in stdout and "Traceback" not in stderr, stdout + stderr
    assert statuses(out)["hazard MCDoubleRead"] == status
    importers = {int(line) for line in log.read_text().split()}
    assert importers and oracle.pid not in importers  # the contract check's child, the workers


@pytest.mark.slow
def test_a_store_that_exits_gets_crash_with_its_exit_code(tmp_path):
    found, markdown = run_faulty("exit_in_get", tmp_path)
    assert CRASH in found.values(), found
    assert "exited with code 3" in markdown


@pytest.mark.slow
def test_keyboard_interrupt_and_system_exit_from_a_store_are_its_errors(tmp_path):
    found, markdown = run_faulty("interrupt_in_get", tmp_path)
    assert not {CRASH, TIMEOUT} & set(found.values()), found
    assert "the implementation raised" in markdown
    assert PASS in found.values()


@pytest.mark.parametrize(
    "args, says",
    [
        (["--timeout", "0"], "--timeout"),
        (["--timeout", "soon"], "--timeout"),
        (["--call-timeout", "-1"], "--call-timeout"),
        (["--call-timeout", "inf"], "--call-timeout"),
        (["--level", "gold"], "--level"),
        (["--shrink-budget", "-1"], "--shrink-budget"),
        (["--shrink-budget", "nan"], "--shrink-budget"),
        (["--shrink-budget", "a while"], "--shrink-budget"),
        (["--workers", "0"], "--workers"),
        (["--workers", "two"], "--workers"),
    ],
)
def test_options_that_make_no_sense_are_one_line_exit_2(args, says):
    proc = conformance("--impl", "refimpl", *args)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert says in proc.stderr


def test_a_module_that_crashes_on_import_is_one_line_exit_2(tmp_path):
    (tmp_path / "dies_on_import.py").write_text("import ctypes\nctypes.string_at(0)\n")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path)])}
    proc = subprocess.run(
        [sys.executable, "-m", "shmref.conformance", "--impl", "dies_on_import"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )
    assert proc.returncode == 2
    assert "SIGSEGV" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def suite_nodes() -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + ["--shmref-impl", "refimpl", "--pyargs", "shmref.suite"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        timeout=300,
    )
    nodes = [ln.split("suite/", 1)[1] for ln in proc.stdout.splitlines() if "::" in ln]
    assert nodes, proc.stdout[-2000:]
    return nodes


Assign = Callable[[str, list[TestGroup]], "tuple[str, str] | None"]


def run_key(node: str, selected: list[TestGroup]) -> tuple[str, str] | None:
    """What a run does with `node`: skip it unless its group is selected,
    then count it under the one table's (level, property)."""
    group = group_of(node, TEST_GROUPS)
    return property_key(node) if group is not None and group in selected else None


def old_run_key(node: str, selected: list[TestGroup]) -> tuple[str, str] | None:
    """The defect issue 23 found: the longest match among the SELECTED groups
    (under --level seed-compatible, TestBadInput fell to test_ring.py)."""
    group = group_of(node, selected)
    if group is None:
        return None
    return group.level, property_of(node) if group.split else group.label


def mode_differences(nodes: list[str], assign: Assign) -> list[str]:
    """Tests that some mode (--quick, --all-groups, a --level subset) counts
    under another (level, property) than the full run, or under a level the
    mode did not select."""
    full = {node: assign(node, list(TEST_GROUPS)) for node in nodes}
    found = []
    for quick in (False, True):
        for all_groups in (False, True):
            for levels in [[level] for level in LEVELS] + [list(LEVELS)]:
                selected = selected_groups(quick, levels, all_groups)
                for node in nodes:
                    key = assign(node, selected)
                    if key is not None and (key != full[node] or key[0] not in levels):
                        found.append(f"{node} under {levels} quick={quick}: {key}")
    return found


def test_the_level_of_a_property_does_not_depend_on_the_runs_options():
    nodes = suite_nodes()
    assert mode_differences(nodes, run_key) == []
    # the check can fail: the old assignment moved bad-input tests between levels
    broken = mode_differences(nodes, old_run_key)
    assert any("TestBadInput" in line for line in broken), broken[:5]


def cases(out: Path) -> dict[str, str]:
    report = json.loads((out / "conformance.json").read_text())
    return {
        c["name"]: c["cases"]
        for d in report["levels"].values()
        for c in d["checks"]
        if c["status"] not in (CRASH, TIMEOUT)
    }


@pytest.mark.slow
def test_children_sharing_a_run_lose_no_property_and_keep_a_crash_to_its_own(tmp_path):
    """Three children sharing the tests (shmref.oracle.shards) give what one
    child gives: the same status of every property (a crash in one child
    changes no other child's property), every test run once (the same case
    counts), and every property the level table makes of the selection."""
    one, _ = run_faulty("segfault_in_get", tmp_path / "one", "--workers", "1")
    three, markdown = run_faulty("segfault_in_get", tmp_path / "three", "--workers", "3")
    assert three == one
    assert CRASH in three.values() and PASS in three.values()
    assert cases(tmp_path / "three") == cases(tmp_path / "one")
    selected = selected_groups(True, [LEVEL], False)
    expected = {key[1] for node in suite_nodes() if (key := run_key(node, selected))}
    assert expected <= set(three), expected - set(three)
    assert len(list((tmp_path / "three" / "workers").glob("*.jsonl"))) > 3, (
        "the crash's child replaced"
    )


@pytest.mark.slow
def test_without_the_seed_file_what_needs_it_is_not_run(tmp_path):
    proc = conformance(
        "--impl",
        "refimpl",
        "--quick",
        "--level",
        "seed-compatible",
        "--out",
        str(tmp_path),
        env={"SHMREF_SEED": str(tmp_path / "no-such-seed.txt")},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report: dict[str, Any] = json.loads((tmp_path / "conformance.json").read_text())
    level = report["levels"]["seed-compatible"]
    assert level["status"] == PASS
    missing = [c for c in level["checks"] if "missing seed" in c["detail"]]
    assert missing and all(c["status"] == "not run" for c in missing)
    assert "not run" in proc.stdout


def test_the_documented_statuses_are_the_reports():
    """docs/conformance.md's status table lists exactly the statuses a report uses."""
    from shmref.core import levels as verdict

    text = (REPO / "docs" / "conformance.md").read_text()
    table = text.split("<!-- statuses:", 1)[1].split("<!-- end of statuses -->", 1)[0]
    documented = {
        row.split("`")[1].split(":")[0] for row in table.splitlines() if row.startswith("| `")
    }
    used = {
        verdict.PASS,
        verdict.FAIL,
        verdict.ERROR,
        verdict.CRASH,
        verdict.TIMEOUT,
        verdict.NOT_RUN,
        verdict.SKIP,
        verdict.ASSUMPTION,
    }
    assert documented == used


def test_the_plugin_fails_a_hung_test_instead_of_hanging(tmp_path):
    """`pytest --shmref-impl` (no child processes there): a test whose store
    hangs fails with TimeoutError after --shmref-test-timeout."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        + ["--shmref-impl", "hang_in_get", "--shmref-test-timeout", "2"]
        + ["--pyargs", "shmref.suite", "-k", "test_put_then_get_roundtrip_types"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(FAULTY)])},
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "TimeoutError" in proc.stdout


def test_only_what_no_live_process_holds_is_an_orphan():
    """Segments and semaphores in use (open, mapped, or a semaphore whose
    mapping shows glibc's temporary name) are never removed; a segment
    nobody holds any more is."""
    import multiprocessing
    from multiprocessing import shared_memory, synchronize

    from shmref.oracle.shmclean import remove_orphans

    before = shm_names()
    held = shared_memory.SharedMemory(create=True, size=4096)
    lock = multiprocessing.get_context("spawn").Lock()
    left = shared_memory.SharedMemory(create=True, size=4096)
    left_name = left.name
    left.close()  # closed, never unlinked: what a dead process leaves
    try:
        semaphore = "sem." + str(lock._semlock.name).lstrip("/")
        assert isinstance(lock, synchronize.Lock)
        found = orphans(before)
        assert left_name in found
        assert held.name not in found and semaphore not in found
        # Among its own three only: what is new and unheld here may be another
        # test's (tests/oracle/test_shared_machine.py leaves one on purpose)
        removed = remove_orphans(before, within={left_name, held.name, semaphore})
        assert removed == [left_name] and left_name not in shm_names()
        assert held.name in shm_names()
    finally:
        held.close()
        held.unlink()
        from multiprocessing import resource_tracker

        resource_tracker.unregister("/" + left_name, "shared_memory")


def processes_naming(text: str) -> list[str]:
    """Command lines of live processes that name `text` (a run's folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in argv:
                found.append(argv)
    return found


@pytest.mark.slow
def test_sigterm_stops_the_run_and_every_process_it_started(tmp_path):
    """A run killed from outside (SIGTERM, as `timeout` or a CI runner sends)
    stops its workers (in sessions of their own: no signal reaches them) and
    the seed's baseline run (built, not cached), and says so in one line."""
    import signal
    import time

    environment = {**os.environ, "SHMREF_CACHE_DIR": str(tmp_path / "cache")}
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO), str(FAULTY)])
    before = shm_names()
    out = tmp_path / "out"
    run = subprocess.Popen(
        [sys.executable, "-m", "shmref.conformance", "--impl", "hang_in_get", "--quick"]
        + ["--level", LEVEL, "--out", str(out), "--no-progress"],
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not list(out.glob("workers/*.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2)  # its worker is inside the hanging store, the seed's run under way
    assert len(processes_naming(str(tmp_path))) >= 3, "no workers and seed run to stop"
    run.send_signal(signal.SIGTERM)
    stdout, stderr = run.communicate(timeout=60)
    assert run.returncode == 130, stdout + stderr
    assert stderr.strip().splitlines()[-1].startswith("shmref: interrupted"), stderr
    assert "Traceback" not in stderr, stderr
    time.sleep(1)
    assert processes_naming(str(tmp_path)) == []
    assert not orphans(before, settle=2.0), "left in /dev/shm"


def test_a_run_stopped_for_timeouts_gives_every_property_timeout():
    """Which properties finished before the third TIMEOUT depends on the
    scheduling, so all of them are TIMEOUT, not only the unfinished ones:
    the contract check and the run-wide checks keep theirs."""
    from shmref.core.levels import FAIL, NOT_RUN
    from shmref.oracle.conformance_run import stopped_for_timeouts
    from shmref.oracle.verdict import RUN_CHECKS, Check

    hung = [("hardened", f"hung {k}") for k in range(3)]
    checks = [
        Check("hardened", "the contract check", "", PASS),
        Check("hardened", RUN_CHECKS[0], "", PASS),
        *(Check(level, name, "", TIMEOUT, detail="stack") for level, name in hung),
        Check("hardened", "finished", "", PASS),
        Check("hardened", "failed", "", FAIL, failures=[{"case": "x"}]),
        Check("hardened", "unstarted", "", NOT_RUN),
    ]
    why = stopped_for_timeouts(checks, hung, 3)
    assert "hung 0, hung 1, hung 2" in why and "--max-timeouts 0" in why
    by_name = {c.name: c for c in checks}
    assert by_name["the contract check"].status == PASS
    assert by_name[RUN_CHECKS[0]].status == PASS
    assert all(by_name[name].detail.startswith("stack") for _, name in hung)
    for name, was in (
        ("finished", "it was pass"),
        ("failed", "it was FAIL"),
        ("unstarted", "not run"),
    ):
        assert by_name[name].status == TIMEOUT and by_name[name].detail.endswith(was)
    assert by_name["failed"].failures == []
