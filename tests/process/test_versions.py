"""Protocol versions (docs/protocol.md, "Versions"): a program is judged as
the version its hello says specified, and told in one line what changed
since; a hello without a version is refused in one line that says it.

The program of version 1 is tests/programs/v1_seed_store.py: the seed's code
behind the reference program as it stood on the morning of 2026-12-06, when
the `base64` of bytes arguments came without a new version number. Sent
version 2's bytes, its `put(b"a", ...)` raised `TypeError: unhashable type:
'dict'` and it lost `test_layout.py::test_same_results_as_seed`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shmref.core.runconfig import RunConfig, running
from shmref.process import PROTOCOL_VERSION, VERSIONS, channel
from shmref.process.messages import as_version, hello_problem
from shmref.seed.impl import load_impl

REPO = Path(__file__).resolve().parents[2]
V1_PROGRAM = REPO / "tests" / "programs" / "v1_seed_store.py"
V1 = f"exec:{sys.executable} {V1_PROGRAM}"
SAME_AS_SEED = "test_layout.py::test_same_results_as_seed"
OTHER_KEYS = "test_storage.py::test_a_key_of_another_type_is_refused_or_kept_as_given"
NOTE = "speaks protocol version 1, judged as version 1 specified (the current is 2; version 2: "


def test_the_current_version_is_the_last_with_its_change() -> None:
    assert PROTOCOL_VERSION == max(VERSIONS) == 2
    assert "base64" in VERSIONS[2]


def test_version_1_is_sent_bytes_without_their_value() -> None:
    request: dict[str, Any] = {
        "type": "request",
        "id": 3,
        "op": "put",
        "key": {"unrepresentable": "bytes", "base64": "YQ=="},
        "signature": [1, {"unrepresentable": "bytearray", "base64": ""}],
        "metadata": "AA==",
    }
    old = as_version(request, 1)
    assert old["key"] == {"unrepresentable": "bytes"}
    assert old["signature"] == [1, {"unrepresentable": "bytearray"}]
    assert old["metadata"] == "AA==" and as_version(request, 2) == request


@pytest.mark.parametrize(
    ("hello", "says"),
    [
        ({}, "no protocol version: "),
        ({"protocol": 3}, "protocol 3: "),
        ({"protocol": "2"}, "protocol '2': "),
        ({"protocol": True}, "protocol True: "),
    ],
)
def test_a_hello_without_a_known_version_is_told_what_changed(
    hello: dict[str, Any], says: str
) -> None:
    base = {"type": "hello", "name": "x", "roles": ["writer"], "capabilities": []}
    problem = hello_problem({**base, "reader_lock": "oracle", **hello})
    assert problem.startswith(says), problem
    assert "version 2: a bytes or bytearray argument" in problem
    assert 'docs/protocol.md, "Versions"' in problem
    assert "\n" not in problem


def test_a_version_1_program_gets_the_seeds_result_for_a_bytes_key(tmp_path: Path) -> None:
    """The morning's failure: put(b"a") is (0, 0), as the seed gives; what
    the proxy sent carried no base64; the note is one line."""
    log = tmp_path / "protocol.jsonl"
    with running(RunConfig(protocol_log=str(log))):
        impl = load_impl(V1)
        ring = impl.SingleWriterShmRingBuffer(1024, create=True)
        try:
            writer = impl.SingleWriterShmObjectStorage(256, 1, ring)
            assert writer.put(b"a", 1) == (0, 0)
            assert type(writer).BYTES_VALUES is False
        finally:
            ring.close()
        [note] = [n for n in channel.notes() if n.startswith(V1)]
        channel.close_all()
    assert NOTE in note and "\n" not in note
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    keys = [m["msg"]["key"] for m in sent if m["dir"] == "out" and m["msg"].get("op") == "put"]
    assert keys == [{"unrepresentable": "bytes"}], keys


def conformance(tmp_path: Path, impl: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shmref.conformance", "--impl", impl, "--no-baseline"]
        + ["--no-shrink", "--out", str(tmp_path / "out"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )


def test_a_hello_without_a_version_ends_the_run_in_one_line(tmp_path: Path) -> None:
    proc = conformance(tmp_path, f"{V1} --no-version", "--only", SAME_AS_SEED)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "bad hello (no protocol version: " in line
    assert "version 2: a bytes or bytearray argument" in line


@pytest.mark.slow
def test_a_version_1_program_keeps_its_statuses(tmp_path: Path) -> None:
    """The morning's program passes what it passed that morning
    (`test_same_results_as_seed`), and the property it could not pass on
    version 1 (telling b"k" from b"j") is not run on its bytes case: no new
    FAIL. The oracle says in one line what version 2 changed."""
    proc = conformance(
        tmp_path, V1, "--quick", "--level", "seed-compatible", "--only", SAME_AS_SEED,
        "--only", OTHER_KEYS,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    notes = [line for line in proc.stderr.splitlines() if NOTE in line]
    assert len(notes) == 1, proc.stderr
    report = json.loads((tmp_path / "out" / "conformance.json").read_text())
    got = {c["name"]: c["status"] for lv in report["levels"].values() for c in lv["checks"]}
    assert got == {SAME_AS_SEED: "pass", OTHER_KEYS: "pass"}, got
