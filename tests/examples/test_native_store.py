"""examples/native_store: its build, its C signatures, its own layout and
that bad input from Python is an exception and never a crash.

The oracle's verdict on it and on its C mutants: tests/examples/test_native_mutants.py.
"""

from __future__ import annotations

import hashlib
import hmac
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from refimpl.segment import attach_untracked

REPO = Path(__file__).resolve().parents[2]
NATIVE_DIR = REPO / "examples" / "native_store"
ENV = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{NATIVE_DIR}"}


def build_module() -> Any:
    """examples/native_store/build.py as a module (it is a script, not on sys.path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("native_build", NATIVE_DIR / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def native() -> ModuleType:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("not run: missing a C compiler (apt-get install gcc)")
    builder = build_module()
    try:
        builder.build("core")
    except builder.BuildError as exc:
        pytest.fail(str(exc))
    if str(NATIVE_DIR) not in sys.path:
        sys.path.append(str(NATIVE_DIR))
    import native_store

    return native_store


@pytest.fixture
def store(native: ModuleType) -> Iterator[tuple[Any, Any]]:
    """A writer with the readers' lock and one reader attached through its handle."""
    lock = mp.get_context("spawn").Lock()
    ring = native.SingleWriterShmRingBuffer(4096, create=True)
    writer = native.SingleWriterShmObjectStorage(1024, 1, ring, reader_lock=lock)
    reader = native.SingleWriterShmObjectStorage.create_from_handle(writer.handle())
    try:
        yield writer, reader
    finally:
        reader.close()
        writer.close()


def run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


# -- the C signatures ----------------------------------------------------------------


@pytest.mark.parametrize("sha_ni", [True, False], ids=["sha-ni", "portable"])
def test_c_sha256_is_hashlibs(native: ModuleType, sha_ni: bool) -> None:
    """Both compression functions (the CPU's SHA extensions, if it has them,
    and the portable one) against hashlib, at every length around the
    block and padding boundaries."""
    ffi, lib = native.SingleWriterShmRingBuffer._ffi, native.SingleWriterShmRingBuffer._lib
    if sha_ni and not lib.ns_sha_ni(1):
        pytest.skip("not run: this CPU has no SHA extensions")
    lib.ns_sha_ni(int(sha_ni))
    try:
        out = ffi.new("uint8_t[32]")
        data = bytes(range(256)) * 4
        for length in [*range(0, 140), 1000]:
            lib.ns_sha256(data[:length], length, out)
            assert bytes(out) == hashlib.sha256(data[:length]).digest(), length
    finally:
        lib.ns_sha_ni(1)


def test_signatures_are_the_seeds_hmac_with_the_rings_secret(store: tuple[Any, Any]) -> None:
    writer, reader = store
    address, monotonic_id = writer.put("clé", b"value")
    message = (
        hashlib.sha256("clé".encode()).digest()
        + address.to_bytes(8, "little")
        + monotonic_id.to_bytes(4, "little")
    )
    secret = writer.ring_buffer.get_auth_secret()
    assert bytes(writer.get_signature("clé")) == hmac.digest(secret, message, "sha256")
    reader.verify_signature("clé", address, monotonic_id, writer.get_signature("clé"))


def test_a_flipped_signature_bit_is_refused(store: tuple[Any, Any]) -> None:
    """The C comparison's broken input: one bit off anywhere is refused."""
    writer, reader = store
    address, monotonic_id = writer.put("k", b"value")
    signature = writer.get_signature("k")
    for i in (0, 17, 31):
        forged = list(signature)
        forged[i] ^= 1
        with pytest.raises(ValueError, match="Invalid SHM handle signature"):
            reader.get(address, monotonic_id, forged, "k")
    assert reader.get(address, monotonic_id, signature, "k") == b"value"


def test_clear_keeps_the_secret_until_the_ids_come_back(store: tuple[Any, Any]) -> None:
    """FINDINGS F4, as refimpl: after a clear an old handle reads its own object
    until its address is reused (then it is stale); the secret changes only
    when the ids come back to one the clear forgot."""
    writer, reader = store
    handle = (*writer.put("k", b"old"), writer.get_signature("k"), "k")
    secret = writer.ring_buffer.get_auth_secret()
    writer.clear()
    assert reader.get(*handle) == b"old"
    writer.put("k", b"new")  # same address, a new id
    with pytest.raises(ValueError, match="modified or is invalid"):
        reader.get(*handle)
    assert writer.ring_buffer.get_auth_secret() == secret
    assert writer.ring_buffer._rotate_at == handle[1]


# -- its own layout -----------------------------------------------------------------------


def test_layout_is_its_own(store: tuple[Any, Any]) -> None:
    """Control block first, data on a cache line, the secret after the data,
    a chunk header as one word (size low, id high): not the seed's bytes."""
    writer, _reader = store
    writer.put("a", b"x" * 20)
    address, monotonic_id = writer.put("b", b"y" * 10)
    size, name = writer.ring_buffer.handle()
    memory = attach_untracked(name)
    try:
        assert memory.buf is not None
        raw = bytes(memory.buf[: 64 + size + 64 + 32])
    finally:
        memory.close()
    assert raw[:8] == b"NTNSHM01" and int.from_bytes(raw[16:24], "little") == size
    header = int.from_bytes(raw[64 + address : 72 + address], "little")
    assert (header & 0xFFFFFFFF, header >> 32) == (8 + 4 + 1 + 10, monotonic_id)
    secret_at = 64 + (size + 63) // 64 * 64
    assert raw[secret_at : secret_at + 32] == writer.ring_buffer.get_auth_secret()


def test_a_foreign_segment_is_refused(native: ModuleType) -> None:
    """A reader attached to a segment without our control block: ValueError."""
    from multiprocessing.shared_memory import SharedMemory

    other = SharedMemory(create=True, size=4096)
    try:
        with pytest.raises(ValueError, match="not a native_store ring"):
            native.SingleWriterShmRingBuffer(1024, name=other.name)
    finally:
        other.close()
        other.unlink()


# -- bad input: an exception, never a crash ---------------------------------------------------


BAD_INPUT = """
    import multiprocessing as mp
    import native_store as ns

    refused = 0

    def expect(call, *errors):
        global refused
        try:
            call()
        except errors or (ValueError, MemoryError, KeyError):
            refused += 1
        else:
            raise SystemExit(f"accepted: {call}")

    ring = ns.SingleWriterShmRingBuffer(1000, create=True)
    writer = ns.SingleWriterShmObjectStorage(200, 1, ring, reader_lock=mp.Lock())
    reader = ns.SingleWriterShmObjectStorage.create_from_handle(writer.handle())
    address, mid = writer.put("k", b"v" * 50)
    sig = writer.get_signature("k")
    for bad in (2**40, 2**64 - 1, 995, 999, -1, 2**64, 1.0, None, True):
        expect(lambda: writer.get(bad, mid))
        expect(lambda: ring.read_header(bad))
        expect(lambda: reader.get(bad, mid, sig, "k"))
    for bad in (2**31, 2**32 - 1, -1, 2**32, "0"):
        expect(lambda: writer.get(address, bad))
        expect(lambda: reader.touch("k", address, bad, sig))
    for bad in (0, -8, 2**31, 2**63, 2.5):
        expect(lambda: ring.allocate_buf(bad))
    for bad in ([0] * 31, [256] * 32, [-1] * 32, [1.0] * 32, "x" * 32, None):
        expect(lambda: reader.get(address, mid, bad, "k"))
    for bad in (1, b"k", "\\ud800"):
        expect(lambda: writer.put(bad, b"v"))
        expect(lambda: reader.get(address, mid, sig, bad))
    expect(lambda: writer.get(address + 1, mid))  # inside the chunk: no header there
    expect(lambda: ns.SingleWriterShmRingBuffer(10**6, name=ring.handle()[1]))
    reader.close()
    expect(lambda: reader.get(address, mid, sig, "k"))
    expect(lambda: reader.ring_buffer.get_auth_secret())
    writer.close()
    for call in (
        lambda: writer.put("z", b"v"),
        lambda: writer.get(address, mid),
        lambda: writer.get_signature("k"),
        lambda: writer.free_unused(),
        lambda: ring.allocate_buf(8),
        lambda: ring.clear(),
        lambda: list(ring.free_buf(lambda i, b: True)),
    ):
        expect(call)
    print("refused", refused)
"""


def test_bad_input_is_an_exception_never_a_crash(native: ModuleType) -> None:
    """Every bad address, id, size, signature, key and closed-store call
    raises; run in a child, so a crash would be its exit status, not ours."""
    done = run_python(BAD_INPUT)
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    assert "refused" in done.stdout


def test_nothing_is_left_in_dev_shm(native: ModuleType) -> None:
    done = run_python(
        """
        import multiprocessing as mp, native_store as ns
        ring = ns.SingleWriterShmRingBuffer(4096, create=True)
        print(ring.handle()[1])
        writer = ns.SingleWriterShmObjectStorage(512, 1, ring, reader_lock=mp.Lock())
        writer.put("k", b"v")
        reader = ns.SingleWriterShmObjectStorage.create_from_handle(writer.handle())
        reader.close()
        writer.close()
        """
    )
    assert done.returncode == 0, done.stderr
    assert not Path("/dev/shm", done.stdout.strip()).exists()


# -- the build ------------------------------------------------------------------------------------


def copy_sources(tmp_path: Path) -> Path:
    folder = tmp_path / "native_store"
    folder.mkdir()
    for name in ("build.py", "ns_ring.c", "ns_ring.h", "ns_sign.c"):
        shutil.copy2(NATIVE_DIR / name, folder / name)
    return folder


def test_a_compiler_error_is_one_line_naming_it(tmp_path: Path) -> None:
    folder = copy_sources(tmp_path)
    source = folder / "ns_ring.c"
    source.write_text(source.read_text().replace("return NS_OK;", "return NS_OK", 1))
    done = subprocess.run(
        [sys.executable, str(folder / "build.py")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "ns_ring.c" in lines[0] and "error" in lines[0], done.stderr
    assert done.stdout == ""


def test_no_compiler_is_one_line_saying_what_to_install(tmp_path: Path) -> None:
    folder = copy_sources(tmp_path)
    done = subprocess.run(
        [sys.executable, str(folder / "build.py")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CC": "/nonexistent/cc"},
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "native_store: no C compiler ('/nonexistent/cc' not found): install one, "
        "e.g. `apt-get install gcc`"
    ]


def test_a_build_older_than_its_sources_is_refused(tmp_path: Path, native: ModuleType) -> None:
    """The import's staleness check, given a stale build: a copy whose C
    source is newer than its compiled module."""
    folder = copy_sources(tmp_path)
    shutil.copytree(NATIVE_DIR / "native_store", folder / "native_store")
    (folder / "build").mkdir()
    for built in (NATIVE_DIR / "build").glob("_ns_core.*.so"):
        shutil.copy2(built, folder / "build" / built.name)
    later = (folder / "build").stat().st_mtime + 10
    os.utime(folder / "ns_ring.c", (later, later))
    done = subprocess.run(
        [sys.executable, "-c", "import native_store"],
        env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{folder}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "older than its sources: run `make native`" in done.stderr


def test_reader_threads_sharing_a_storage_get_their_own_values(store: tuple[Any, Any]) -> None:
    """Out-parameters are per call: two threads reading objects of different
    sizes through one reader storage never get each other's size or place."""
    import threading

    writer, reader = store
    handles = {}
    for key, value in (("short", b"s" * 5), ("long", b"L" * 300)):
        address, monotonic_id = writer.put(key, value)
        handles[key] = (address, monotonic_id, writer.get_signature(key), key, value)
    wrong: list[Any] = []

    def read(key: str) -> None:
        address, monotonic_id, signature, _key, value = handles[key]
        for _ in range(20000):  # shared out-parameters failed within this (stale or foreign)
            try:
                got = reader.get(address, monotonic_id, signature, key)
            except ValueError as exc:
                wrong.append(exc)
                return
            if got != value:
                wrong.append(got)
                return

    threads = [threading.Thread(target=read, args=(k,)) for k in ("short", "long") * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong
