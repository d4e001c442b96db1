"""Faults on real processes (issue 19): a reader killed while it holds the
reader lock, a writer killed in the middle of a put, and a ring larger than
/dev/shm's free space. Each has a control that shows what happens without
refimpl's remedy, so the test can fail."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

import refimpl
from shmref.store.readers import ReaderProcess

REPO = Path(__file__).resolve().parents[2]
CTX = mp.get_context("spawn")
WAIT = 60  # seconds a child may take to reach the point under test (not a timing assertion)

pytestmark = pytest.mark.usefixtures("refimpl_only")


@pytest.fixture
def refimpl_only(is_refimpl: bool) -> None:
    if not is_refimpl:
        pytest.skip("refimpl's fault handling (the seed blocks, leaks or dies here)")


def kill_self_on_return(function_name: str) -> None:
    """SIGKILL this process when any function of that name returns: a
    deterministic death at an exact point of a real call."""

    def tracer(frame: Any, what: str, arg: Any) -> Any:
        if frame.f_code.co_name != function_name:
            return None

        def local(frame: Any, what: str, arg: Any) -> Any:
            if what == "return":
                os.kill(os.getpid(), signal.SIGKILL)
            return local

        return local

    sys.settrace(tracer)


# -- a reader killed while it holds the reader lock -----------------------------------


class DiesWhenHeld:
    """The reader lock, except that the process dies as soon as it holds it."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock

    def acquire(self, *args: Any) -> bool:
        got: bool = self.lock.acquire(*args)
        if got:
            os.kill(os.getpid(), signal.SIGKILL)
        return got

    def release(self) -> None:
        self.lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def reader_dies_holding_the_lock(handle: Any, signed: tuple) -> None:
    """A real read, killed inside its critical section (where the count is added)."""
    handle = dataclasses.replace(handle, reader_lock=DiesWhenHeld(handle.reader_lock))
    storage = refimpl.SingleWriterShmObjectStorage.create_from_handle(handle)
    storage.get(*signed)


def read_with_bound(handle: Any, signed: tuple, timeout: float | None, results: Any) -> None:
    storage = refimpl.SingleWriterShmObjectStorage.create_from_handle(handle)
    storage.READER_LOCK_TIMEOUT = timeout
    results.put(("reading", None))
    try:
        results.put(("ok", storage.get(*signed)))
    except Exception as exc:  # reported to the test
        results.put((type(exc).__name__, str(exc)))
    finally:
        storage.close()


def test_reader_killed_holding_the_lock(ring_factory):
    lock = CTX.Lock()
    # The writer is built as vLLM's sender is, without the readers' lock (a
    # writer holding it would wait in put as the readers do); readers get it.
    writer = refimpl.SingleWriterShmObjectStorage(256, 2, ring_factory(4096))
    handle = dataclasses.replace(writer.handle(), reader_lock=lock)
    address, monotonic_id = writer.put("k", "value")
    signed = (address, monotonic_id, writer.get_signature("k"), "k")
    dying = CTX.Process(target=reader_dies_holding_the_lock, args=(handle, signed))
    dying.start()
    dying.join(WAIT)
    assert dying.exitcode == -signal.SIGKILL
    assert not lock.acquire(False)  # the dead reader still holds it

    results = CTX.Queue()
    bounded = CTX.Process(target=read_with_bound, args=(handle, signed, 1.0, results))
    bounded.start()
    assert results.get(timeout=WAIT)[0] == "reading"
    outcome, message = results.get(timeout=WAIT)
    bounded.join(WAIT)
    assert outcome == "ReaderLockTimeout", message
    assert "died while holding it" in message
    writer.put("after", "a lockless writer carries on")

    # Control: without the bound (the seed's wait), the reader blocks for good.
    unbounded = CTX.Process(target=read_with_bound, args=(handle, signed, None, results))
    unbounded.start()
    try:
        assert results.get(timeout=WAIT)[0] == "reading"
        unbounded.join(3)
        assert unbounded.is_alive() and results.empty()
    finally:
        unbounded.kill()
        unbounded.join(WAIT)


# -- a writer killed in the middle of a put ---------------------------------------------


def writer_dies_mid_put(name: str, lock: Any, conn: Any) -> None:
    ring = refimpl.SingleWriterShmRingBuffer(4096, name=name, create=True)
    # vLLM's sender holds no reader lock (one that did would die holding it here,
    # inside put, and the readers would then time out on it).
    writer = refimpl.SingleWriterShmObjectStorage(512, 1, ring)
    handles = []
    for key in ("a", "b"):
        address, monotonic_id = writer.put(key, key * 100)
        handles.append((address, monotonic_id, writer.get_signature(key), key))
    conn.send((ring.handle(), handles))  # the lock goes by inheritance only
    kill_self_on_return("allocate_buf")  # header written, object not
    writer.put("c", "c" * 100)


def signed_handle(secret: bytes, key: str, address: int, monotonic_id: int) -> tuple:
    message = (
        hashlib.sha256(key.encode()).digest()
        + address.to_bytes(8, "little")
        + monotonic_id.to_bytes(4, "little")
    )
    return address, monotonic_id, list(hmac.new(secret, message, hashlib.sha256).digest()), key


def test_writer_killed_mid_put(impl_name):
    name = f"shmref-fault-{uuid.uuid4().hex[:12]}"
    lock = CTX.Lock()
    here, there = CTX.Pipe()
    dying = CTX.Process(target=writer_dies_mid_put, args=(name, lock, there))
    dying.start()
    there.close()
    assert here.poll(WAIT), "the writer process sent nothing"
    ring_handle, (a, b) = here.recv()
    handle = refimpl.ShmObjectStorageHandle(512, 1, ring_handle, refimpl.MsgpackSerde, lock)
    dying.join(WAIT)
    assert dying.exitcode == -signal.SIGKILL
    assert os.path.exists(f"/dev/shm/{name}")  # nobody unlinked it

    reader = ReaderProcess(impl_name, handle, timeout=WAIT)
    try:
        assert reader.call("get", *a) == ("ok", "a" * 100)  # complete objects still read
        assert reader.call("get", *b) == ("ok", "b" * 100)
        # The interrupted put issued no handle; one signed with the real secret
        # for its chunk (right after b's, next id) is refused clearly.
        attached = refimpl.SingleWriterShmRingBuffer(*handle.ring_buffer_handle)
        try:
            _, size = attached.read_header(b[0])
            torn = signed_handle(attached.get_auth_secret(), "c", b[0] + size, b[1] + 1)
        finally:
            attached.close()
        outcome, message = reader.call("get", *torn)
        assert outcome == "ValueError" and "cannot be read back" in message, (outcome, message)
    finally:
        reader.stop()

    # A writer is alive: the name stays taken (the control: the lock is what decides).
    live = refimpl.SingleWriterShmRingBuffer(64, create=True)
    try:
        with pytest.raises(FileExistsError, match="writer is alive"):
            refimpl.SingleWriterShmRingBuffer(64, name=live.handle()[1], create=True)
    finally:
        live.close()
    # The next writer replaces the killed writer's segment under the same name.
    ring = refimpl.SingleWriterShmRingBuffer(4096, name=name, create=True)
    try:
        writer = refimpl.SingleWriterShmObjectStorage(512, 1, ring, reader_lock=lock)
        address, monotonic_id = writer.put("d", "fresh")
        reader = ReaderProcess(impl_name, writer.handle(), timeout=WAIT)
        try:
            signed = (address, monotonic_id, writer.get_signature("d"), "d")
            assert reader.call("get", *signed) == ("ok", "fresh")
        finally:
            reader.stop()
    finally:
        ring.close()
    assert not os.path.exists(f"/dev/shm/{name}")


# -- a ring larger than /dev/shm's free space -----------------------------------------

SMALL_SHM = "1m"
FULL_SHM_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import refimpl
    from refimpl import ring, segment
    if sys.argv[1] == "lazy":  # the seed's way: no reservation
        segment.reserve_pages = lambda memory: None
    out = {}
    try:
        r = refimpl.SingleWriterShmRingBuffer(4 << 20, create=True)
    except OSError as exc:
        out["create"] = [exc.errno, str(exc)]
    else:
        out["create"] = "ok"
        print(json.dumps(out), flush=True)
        for _ in range(64):  # write 64 KiB chunks until past the free space
            address, _id = r.allocate_buf(64 << 10)
            with r.access_buf(address) as (view, _):
                view[:] = b"x" * len(view)
        out["writes"] = "ok"
        r.close()
    out["left"] = sorted(n for n in os.listdir("/dev/shm") if not n.startswith("sem."))
    small = refimpl.SingleWriterShmRingBuffer(256 << 10, create=True)  # fits
    small.close()
    out["small"] = "ok"
    print(json.dumps(out), flush=True)
""")


def in_small_shm(mode: str) -> subprocess.CompletedProcess[str]:
    """Run the script in a private mount namespace whose /dev/shm is 1 MiB."""
    shell = (
        f'mount -t tmpfs -o size={SMALL_SHM} tmpfs /dev/shm && exec "{sys.executable}" -c "$0" "$1"'
    )
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", shell, FULL_SHM_SCRIPT, mode],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


@pytest.fixture(scope="module")
def small_shm() -> None:
    if shutil.which("unshare") is None:
        pytest.skip("SKIPPED OUT LOUD: no `unshare`, so no private 1 MiB /dev/shm to fill")
    probe = subprocess.run(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            f"mount -t tmpfs -o size={SMALL_SHM} tmpfs /dev/shm",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode != 0:
        pytest.skip(
            "SKIPPED OUT LOUD: cannot mount a small tmpfs over /dev/shm in a "
            f"private mount namespace (needs root): {probe.stderr.strip()}"
        )


def test_ring_larger_than_free_shm_fails_at_construction(small_shm):
    run = in_small_shm("reserve")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    code, message = out["create"]
    assert code == 28  # ENOSPC
    assert f"{(4 << 20) + 32} bytes" in message and "/dev/shm has" in message
    assert out["left"] == []  # the failed segment was removed
    assert out["small"] == "ok"  # and the space was given back


def test_without_reservation_the_first_write_past_free_space_is_sigbus(small_shm):
    """Control: tmpfs allocates lazily, so the seed's way dies later, by SIGBUS."""
    run = in_small_shm("lazy")
    assert json.loads(run.stdout.splitlines()[0])["create"] == "ok"
    assert run.returncode == -signal.SIGBUS, (run.returncode, run.stdout, run.stderr)
