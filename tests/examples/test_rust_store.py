"""examples/rust_store: the seed's store in Rust behind the process protocol.

Without `cargo` every test here is skipped, saying so (the Rust checks are
not run, never failed). Quick tests: the Rust unit tests, the Rust HMAC
against Python's `hmac`, every message against the protocol's schema, the
seed's readers reading what the Rust writer wrote and back, a bad request
line. Slow tests (`-m slow`): the oracle judges the program three ways
(alone, as the writer beside the seed's readers, as the readers beside
refimpl's writer), each run gated by its expectations file, and must give
it the seed's status on every property it runs; each mutant (a cargo
feature) is caught by the property and status that names it
(examples/rust_store/README.md, "Mutants"), that property run alone.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import importlib.util
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
RUST_DIR = REPO / "examples" / "rust_store"
BIN = RUST_DIR / "target" / "release" / "rust_store"
CARGO = shutil.which("cargo")
NO_CARGO = "cargo not found: the Rust checks are not run (examples/rust_store/README.md)"
HAVE_PROXY = importlib.util.find_spec("shmref.process") is not None
NO_PROXY = "shmref.process (the process protocol's proxy) is not here: not run"

pytestmark = pytest.mark.skipif(CARGO is None, reason=NO_CARGO)


def cargo(*args: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CARGO or "cargo", *args, "--offline", "--manifest-path", str(RUST_DIR / "Cargo.toml")],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def build(feature: str | None = None) -> Path:
    """The release program, or a mutant's (its own target dir, side by side)."""
    args = ["build", "--release", "--quiet"]
    target = BIN
    if feature is not None:
        target_dir = RUST_DIR / "target" / "mutants" / feature
        args += ["--features", feature, "--target-dir", str(target_dir)]
        target = target_dir / "release" / "rust_store"
    done = cargo(*args)
    if done.returncode:
        pytest.fail(f"cargo build {feature or ''} failed: {done.stderr.strip()[-2000:]}")
    return target


@pytest.fixture(scope="module")
def program() -> Path:
    return build()


class Driver:
    """The oracle's side of the protocol, by hand: one request, one reply;
    `is_free` callbacks answered True; every line kept for the schema check."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.lines: list[dict[str, Any]] = []
        self.hello = self.read()
        self.next = 0

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        message: dict[str, Any] = json.loads(self.proc.stdout.readline())
        self.lines.append(message)
        return message

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.lines.append(message)
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def __call__(self, op: str, **args: Any) -> dict[str, Any]:
        self.next += 1
        self.send({"type": "request", "id": self.next, "op": op, **args})
        while True:
            got = self.read()
            if got["type"] == "callback":
                self.send({"type": "answer", "in_reply_to": self.next, "result": True})
                continue
            assert got["in_reply_to"] == self.next
            return got

    def ok(self, op: str, **args: Any) -> Any:
        got = self(op, **args)
        assert "result" in got, got
        return got["result"]

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=10)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture
def writer(program: Path) -> Iterator[tuple[Driver, str, str, list[int]]]:
    """A Rust writer with key "k" put: (driver, storage, segment name, k's signature)."""
    drv = Driver(program)
    ring = drv.ok("create_ring", data_buffer_size=1024, name=None, create=True)
    storage = drv.ok(
        "create", ring=ring["ring"], max_object_size=256, n_readers=1, reader_lock=False
    )
    assert drv.ok(
        "put", object=storage["storage"], key="k", metadata=b64(b"\x81"), data=[b64(b"\xa1v")]
    ) == [0, 0]
    sig = drv.ok("get_signature", object=storage["storage"], key="k")
    yield drv, storage["storage"], ring["handle"][1], sig
    assert drv.close() == 0
    assert not Path("/dev/shm", ring["handle"][1]).exists(), "the writer left its segment"


def test_rust_unit_tests_pass() -> None:
    done = cargo("test", "--quiet")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "test result: ok" in done.stdout


def test_hmac_matches_pythons(writer: tuple[Driver, str, str, list[int]]) -> None:
    """The signature the Rust writer issues is Python's HMAC-SHA256 over the
    seed's payload, keyed by the segment's first 32 bytes."""
    drv, storage, name, sig = writer
    secret = Path("/dev/shm", name).read_bytes()[:32]
    payload = hashlib.sha256(b"k").digest() + (0).to_bytes(8, "little") + (0).to_bytes(4, "little")
    assert bytes(sig) == hmac.new(secret, payload, hashlib.sha256).digest()
    assert secret != bytes(32)
    assert (
        drv.ok(
            "verify_signature", object=storage, key="k", address=0, monotonic_id=0, signature=sig
        )
        is None
    )
    forged = drv(
        "verify_signature", object=storage, key="k", address=0, monotonic_id=0, signature=[0] * 32
    )
    assert forged["error"]["kind"] == "ValueError"


def test_seed_readers_read_the_rust_writer_and_back(
    writer: tuple[Driver, str, str, list[int]], program: Path
) -> None:
    """The seed's reader reads a value the Rust writer stored (as the seed's
    serde wrote it) and counts its read where the seed counts; a Rust reader
    counts beside it."""
    from shmref.seed.impl import load_impl

    seed = load_impl("seed")
    drv, storage, name, _ = writer
    value = {"tokens": list(range(10)), "text": "héllo"}
    data, _, metadata, _ = seed.MsgpackSerde().serialize(value)
    frames = [data] if isinstance(data, bytes) else list(data)
    address, mid = drv.ok(
        "put", object=storage, key="v", metadata=b64(metadata), data=[b64(bytes(f)) for f in frames]
    )
    sig = drv.ok("get_signature", object=storage, key="v")
    handle = seed.ShmObjectStorageHandle(
        max_object_size=256,
        n_readers=1,
        ring_buffer_handle=(1024, name),
        serde_class=seed.MsgpackSerde,
        reader_lock=mp.get_context("spawn").Lock(),
    )
    reader = seed.SingleWriterShmObjectStorage.create_from_handle(handle)
    count_at = 32 + address + 8
    try:
        assert reader.get(address, mid, sig, "v") == value
        assert Path("/dev/shm", name).read_bytes()[count_at : count_at + 4] == b"\x01\0\0\0"
    finally:
        reader.close()
    rust_reader = Driver(program)
    got = rust_reader.ok(
        "attach",
        max_object_size=256,
        n_readers=1,
        ring_buffer_handle=[1024, name],
        reader_lock=True,
    )
    read = rust_reader.ok(
        "get", object=got["storage"], address=address, monotonic_id=mid, signature=sig, key="v"
    )
    assert seed.MsgpackSerde().deserialize(memoryview(base64.b64decode(read["data"]))) == value
    assert Path("/dev/shm", name).read_bytes()[count_at : count_at + 4] == b"\x02\0\0\0"
    assert rust_reader.close() == 0
    drv.ok("get", object=storage, address=0, monotonic_id=0, signature=None, key=None)
    drv.ok("free_unused", object=storage)  # k (id 0, oldest) is owed a read: nothing is freed
    assert drv.ok("is_cached", object=storage, key="k") is True


@pytest.mark.skipif(CARGO is not None and not HAVE_PROXY, reason=NO_PROXY)
def test_every_message_fits_the_schema(writer: tuple[Driver, str, str, list[int]]) -> None:
    """Every line of a conversation that touches every op (errors and the
    is_free callback included) is valid against the protocol's schema."""
    import jsonschema

    from shmref.process import SCHEMA_PATH

    drv, storage, name, sig = writer
    ring = drv.ok("create_ring", data_buffer_size=256, name=None, create=True)["ring"]
    drv.ok("allocate_buf", object=ring, size=8)
    drv.ok("access_buf", object=ring, address=0)
    drv.ok("ring_state", object=ring)
    drv.ok("free_buf", object=ring, nbytes=None)
    drv.ok("int2byte", object=ring, integer=-2)
    drv.ok("byte2int", object=ring, data=b64(b"\xfe\xff\xff\xff"))
    drv.ok("get_auth_secret", object=ring)
    drv.ok("set_id_max", object=ring, value=4)
    drv.ok("handle", object=ring)
    drv.ok("close", object=ring)
    args = {"address": 0, "monotonic_id": 0, "signature": sig, "key": "k"}
    drv.ok("get", object=storage, **args)
    read = drv.ok("get_begin", object=storage, **args)["read"]
    drv.ok("get_copy", object=storage, read=read)
    drv.ok("get_end", object=storage, read=read)
    drv.ok("touch", object=storage, **{**args, "key": "k"})
    drv.ok("get_cached", object=storage, key="k")
    drv.ok("release_touches", object=storage)
    drv.ok("handle", object=storage)
    assert drv("get_cached", object=storage, key="absent")["error"]["kind"] == "KeyError"
    assert (
        drv("put", object=storage, key="k", metadata="", data=[])["error"]["kind"] == "ValueError"
    )
    drv.ok("free_unused", object=storage)
    drv.ok("clear", object=storage)
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))
    for line in drv.lines:
        errors = sorted(validator.iter_errors(line), key=str)
        assert not errors, f"{line}: {errors[0].message}"


@pytest.mark.skipif(CARGO is not None and not HAVE_PROXY, reason=NO_PROXY)
def test_its_bench_request_is_checked_by_refimpls_readers(program: Path, tmp_path: Path) -> None:
    """The bench request (docs/protocol.md): the Rust loop's every object is in
    its segment, counted, signed and with its bytes, as refimpl's reader in
    another process finds them; its messages follow the schema. A value
    larger than a page, and two requests on one storage (cleared between)."""
    import jsonschema

    from shmref.oracle.shmclean import orphans
    from shmref.process import SCHEMA_PATH
    from shmref.process.benchcheck import CAPABILITY, Bench, Checkers
    from shmref.process.channel import Program
    from shmref.process.segments import names as shm_names

    before = shm_names()
    log = tmp_path / "protocol.jsonl"
    checkers = Checkers(1)
    rust = Program([str(program)], "exec:rust_store", log=str(log))
    try:
        assert CAPABILITY in rust.capabilities
        for size, count in ((1, 5), (64, 500), (5000, 30)):
            bench = Bench(rust, size, count, checkers)
            try:
                for round_ in range(2):
                    done = bench.run(f"r{round_}.")
                    assert (done.count, done.size) == (count, size)
                    assert 0 < done.seconds <= done.round_trip
            finally:
                bench.close()
    finally:
        rust.close()
        checkers.close()
    assert orphans(before, settle=2.0) == []
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))
    for line in log.read_text().splitlines():
        message = json.loads(line)["msg"]
        errors = sorted(validator.iter_errors(message), key=str)
        assert not errors, f"{str(message)[:300]}: {errors[0].message}"


def test_a_bad_request_line_is_one_line_and_exit_2(program: Path) -> None:
    done = subprocess.run(
        [str(program)], input="this is not json\n", capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2
    assert json.loads(done.stdout.splitlines()[0])["type"] == "hello"
    assert len(done.stderr.strip().splitlines()) == 1 and "not JSON" in done.stderr


# -- the oracle (slow) -----------------------------------------------------------------------

PASSING = {"pass", "skip", "assumption"}
SEED = os.environ.get("SHMREF_SEED", "")


def oracle(
    out: Path, *args: str, level: str | None = None, only: str | None = None
) -> dict[str, Any]:
    """The oracle's quick run: its conformance.json (`only`: that property alone)."""
    command = [sys.executable, "-m", "shmref.conformance", *args, "--quick", "--out", str(out)]
    if level is not None:
        command += ["--level", level]
    if only is not None:
        command += ["--only", only]
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600, cwd=REPO)
    report = out / "conformance.json"
    assert report.exists(), done.stdout[-2000:] + done.stderr[-2000:]
    result: dict[str, Any] = json.loads(report.read_text())
    return result


def statuses(report: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    """property -> (level, status, the seed's status)."""
    return {
        check["name"]: (level_name, check["status"], str(check.get("seed", "")))
        for level_name, level in report["levels"].items()
        for check in level["checks"]
    }


NOT_RUN = "not run"


def unlike_the_seed(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Properties that ran and whose status is not the seed's: name ->
    (status, the seed's). A property not run on the program (it lacks an
    optional capability, as SERDE_IN_PROCESS) says nothing either way."""
    return {
        name: (status, seed)
        for name, (_, status, seed) in statuses(report).items()
        if seed and seed != "no seed" and status != NOT_RUN and status.lower() != seed.lower()
    }


# Properties no program can show the seed's status on: they inject a serde's
# failure, and a program's serde is the proxy's (docs/protocol.md, "Stored
# values"), so they are not run on the side concerned.
SERDE_FAILS = {
    "test_storage_bad_input.py::TestBadPuts::test_failed_put_leaves_no_half_object": "writer",
    "hazard MCCopyFail": "reader",
}


RUNS = {
    "alone": ("--impl", f"exec:{BIN}"),
    "writer beside the seed's readers": ("--writer", f"exec:{BIN}", "--readers", "seed"),
    "readers beside refimpl's writer": ("--writer", "refimpl", "--readers", f"exec:{BIN}"),
}


# The oracle's runs here build seed baselines (the seed's quick run of each
# set of levels, cached in the user cache): on one xdist worker, one after
# another, each is built once and read by the runs after it, where two
# workers each built the same one at the same time.
BASELINES = pytest.mark.xdist_group("rust-store")


# its expectations files: what it fails on purpose in each run (issue 42)
EXPECTATIONS = {
    "alone": "alone.toml",
    "writer beside the seed's readers": "writer-beside-seed-readers.toml",
    "readers beside refimpl's writer": "readers-beside-refimpl-writer.toml",
}


def gate(out: Path, expect: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The oracle's quick run gated by one of the expectations files (make
    rust-conformance), its failures not shrunk: what is judged is statuses."""
    command = [sys.executable, "-m", "shmref.conformance", *args, "--quick", "--no-shrink"]
    command += ["--out", str(out)]
    command += ["--no-progress", "--expect", str(RUST_DIR / "expectations" / expect)]
    return subprocess.run(command, capture_output=True, text=True, timeout=3600, cwd=REPO)


@pytest.mark.slow
@BASELINES
@pytest.mark.skipif(CARGO is not None and not HAVE_PROXY, reason=NO_PROXY)
@pytest.mark.parametrize("run", sorted(RUNS))
def test_the_oracle_gives_it_the_seeds_status(run: str, program: Path, tmp_path: Path) -> None:
    """Judged alone and in both mixed roles, seed-compatible and seed-layout
    pass and nothing the seed passes fails. Alone and as the writer beside
    the seed's readers, every property has the seed's own status (hardened
    and protocol-safe fail where the seed's do). Beside refimpl's writer,
    refimpl's writer-side fixes pass too; what fails is the seed's
    reader-side defects (no re-check at the end of a read, untyped handles).

    The run is the one `make rust-conformance` gates, every level, no
    --level, its failures not shrunk: gated by its expectations file it
    exits 0, every result as the file expects (one oracle run for both: they
    were two identical runs)."""
    proc = gate(tmp_path, EXPECTATIONS[run], *RUNS[run])
    assert (tmp_path / "conformance.json").exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "expectations: every result as" in proc.stdout
    report = json.loads((tmp_path / "conformance.json").read_text())
    found = statuses(report)
    for name, role in SERDE_FAILS.items():
        exec_side = run == "alone" or (role == "writer") == run.startswith("writer")
        if name in found and exec_side:
            assert found[name][1] == NOT_RUN, (name, found[name])
    for level in ("seed-compatible", "seed-layout"):
        assert report["levels"][level]["status"] == "pass", (level, report["levels"][level])
    worse = {
        name: (status, seed)
        for name, (_, status, seed) in found.items()
        if seed.lower() == "pass" and status not in PASSING
    }
    assert not worse, worse
    if run != "readers beside refimpl's writer":
        differ = unlike_the_seed(report)
        assert not differ, differ


# mutant (cargo feature) -> (level, property, status) that names the defect,
# seen in the oracle's quick run of that level on the mutant.
CAUGHT_BY: dict[str, tuple[str, str, str]] = {
    "free_without_readers": (
        "seed-compatible",
        "test_storage.py::test_writer_with_lock_counts_its_gets_as_the_seed",
        "FAIL",
    ),
    "unsigned_count": ("seed-compatible", "test_ring.py::test_int_roundtrip", "FAIL"),
    "short_header": ("seed-layout", "test_storage.py::test_object_layout_in_segment", "FAIL"),
    "zero_secret": ("seed-compatible", "test_ring.py::test_secret_is_random", "FAIL"),
    "uncounted_read": (
        "seed-compatible",
        "test_storage.py::test_reads_count_and_reclaim_fifo",
        "FAIL",
    ),
}


@pytest.mark.slow
@BASELINES
@pytest.mark.skipif(CARGO is not None and not HAVE_PROXY, reason=NO_PROXY)
@pytest.mark.parametrize("mutant", sorted(CAUGHT_BY))
def test_each_mutant_is_caught(mutant: str, tmp_path: Path) -> None:
    """The property that names the defect, run alone (`--only`) at its level:
    which others fail too was never asked."""
    level, name, status = CAUGHT_BY[mutant]
    path = build(mutant)
    report = oracle(tmp_path, "--impl", f"exec:{path}", "--no-shrink", level=level, only=name)
    found = statuses(report)
    assert name in found, f"{name} was not run on {mutant}"
    assert found[name][1] == status, (mutant, name, found[name])
    assert found[name][2].lower() in ("pass", ""), f"the seed fails {name} too: no kill"


# -- its expectations files: what it fails on purpose (issue 42) ---------------------------


def surprises(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line.strip() for line in proc.stdout.splitlines() if line.startswith("  ")]


def test_every_expectations_file_reads_and_gives_every_failure_a_reason() -> None:
    from shmref.oracle.expectations import load

    for name in EXPECTATIONS.values():
        found = load(RUST_DIR / "expectations" / name)
        assert found.entries and all(
            "FINDINGS.md" in e.reason or "seed" in e.reason for e in found.entries
        ), name


@pytest.mark.slow
@BASELINES
@pytest.mark.skipif(CARGO is not None and not HAVE_PROXY, reason=NO_PROXY)
def test_a_mutant_is_named_alone_by_the_expectations(program: Path, tmp_path: Path) -> None:
    """zero_secret breaks one property more than the file lists: exit 1, that
    one named. Judged at seed-compatible, the level of its defect (the gate on
    every level is test_the_oracle_gives_it_the_seeds_status's)."""
    path = build("zero_secret")
    args = ("--impl", f"exec:{path}", "--no-shrink", "--level", "seed-compatible")
    proc = gate(tmp_path, EXPECTATIONS["alone"], *args)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert surprises(proc) == [
        "new failure: test_ring.py::test_secret_is_random (expected no failure, got FAIL)"
    ]


@pytest.mark.slow
@BASELINES
@pytest.mark.skipif(CARGO is not None and not HAVE_PROXY, reason=NO_PROXY)
def test_a_lie_in_the_file_is_an_unexpected_pass(program: Path, tmp_path: Path) -> None:
    """A file that lists a property the program passes (a failure whose cause
    is gone) gets it named as an unexpected pass, to be recorded."""
    lie = tmp_path / "lie.toml"
    text = (RUST_DIR / "expectations" / EXPECTATIONS["alone"]).read_text()
    lie.write_text(
        text + '\n[[expected]]\nproperty = "test_ring.py::test_secret_is_random"\n'
        'status = "FAIL"\nreason = "a lie"\n'
    )
    proc = gate(
        tmp_path / "out", str(lie), "--impl", f"exec:{program}", "--level", "seed-compatible"
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert surprises(proc) == [
        "unexpected pass: test_ring.py::test_secret_is_random (expected FAIL, got pass); "
        f"record it in {lie}"
    ]
