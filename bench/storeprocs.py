"""What one round of `bench.store` runs on: the reader processes (each
attaches every contender and reads the batches it is sent) and the writers
(a storage of refimpl, the seed or native_store, or the plain copy's bare
segment). Spawned readers import this module, not the whole bench."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import resource
import signal
import time
from contextlib import suppress
from multiprocessing import shared_memory
from multiprocessing.connection import Connection
from types import ModuleType
from typing import Any

from bench.common import BENCH_SERDE, load, segment_buf

CTX = mp.get_context("spawn")
MODULES = {"native": "native_store"}  # contender -> the module a reader loads
CHUNK_SLACK = 64  # header, count and msgpack framing, with room to spare


def reader_main(conn: Connection, lock: Any) -> None:
    """Serve commands on `conn`: attach a contender, read a batch, detach.

    The reader lock cannot travel through a pipe, so every storage shares the
    one this process inherited. Ctrl-C is the parent's to handle: it stops us.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    attached: dict[str, Any] = {}
    try:
        while True:
            try:
                command = conn.recv()
            except EOFError:
                break
            verb = command[0]
            if verb == "exit":
                break
            try:
                if verb == "attach":
                    _, tag, impl_name, handle = command
                    attached[tag] = _attach(impl_name, handle, lock)
                    conn.send(("ok", None))
                elif verb == "get":
                    _, tag, handles = command
                    conn.send(("ok", _read_batch(attached[tag], handles)))
                elif verb == "detach":
                    _close(attached.pop(command[1]))
                    conn.send(("ok", None))
                else:
                    conn.send(("error", f"unknown command {verb!r}"))
            except Exception as exc:  # reported to the parent, which stops the bench
                conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        for reader in attached.values():
            with suppress(Exception):
                _close(reader)


def _attach(impl_name: str, handle: Any, lock: Any) -> Any:
    if impl_name == "plain":
        from refimpl.segment import attach_untracked

        return attach_untracked(handle)
    impl = load(MODULES.get(impl_name, impl_name))
    return impl.SingleWriterShmObjectStorage.create_from_handle(
        dataclasses.replace(handle, reader_lock=lock)
    )


def _close(reader: Any) -> None:
    reader.close()


def minor_faults() -> int:
    """Page faults of this process so far that needed no disk (a fresh page
    mapped or zeroed): the cost that CPU time shows and instructions do not."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _read_batch(reader: Any, handles: list[Any]) -> tuple[float, int, float, int]:
    """Read every handle; returns (seconds, total bytes read, CPU seconds, page faults)."""
    total = 0
    faults = minor_faults()
    start, cpu = time.perf_counter(), time.process_time()
    if isinstance(reader, shared_memory.SharedMemory):
        buf = segment_buf(reader)
        for offset, size in handles:
            total += len(bytes(buf[offset : offset + size]))
    else:
        get = reader.get
        for address, monotonic_id, signature, key in handles:
            total += len(get(address, monotonic_id, signature, key))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return seconds, total, cpu, minor_faults() - faults


class Readers:
    """R reader processes, stopped (and killed if need be) on close."""

    def __init__(self, count: int) -> None:
        self.lock = CTX.Lock()
        self.conns: list[Connection] = []
        self.procs: list[Any] = []
        try:
            for _ in range(count):
                parent, child = CTX.Pipe()
                proc = CTX.Process(target=reader_main, args=(child, self.lock), daemon=True)
                proc.start()
                child.close()
                self.conns.append(parent)
                self.procs.append(proc)
        except BaseException:
            self.close()
            raise

    def broadcast(self, *command: Any) -> list[Any]:
        for conn in self.conns:
            conn.send(command)
        answers = []
        for conn, proc in zip(self.conns, self.procs, strict=True):
            while not conn.poll(0.5):
                if not proc.is_alive():
                    raise RuntimeError(f"reader process exited with code {proc.exitcode}")
            status, payload = conn.recv()
            if status != "ok":
                raise RuntimeError(f"reader failed: {payload}")
            answers.append(payload)
        return answers

    def close(self) -> None:
        for conn in self.conns:
            with suppress(Exception):
                conn.send(("exit",))
        for proc in self.procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        for conn in self.conns:
            conn.close()


class StoreWriter:
    """A writer storage of `impl` holding `batch` objects of `size` bytes."""

    def __init__(self, impl: ModuleType, size: int, batch: int, n_readers: int, lock: Any) -> None:
        chunk = size + CHUNK_SLACK
        self.ring = impl.SingleWriterShmRingBuffer((batch + 2) * chunk, create=True)
        self.writer = impl.SingleWriterShmObjectStorage(
            chunk, n_readers, self.ring, serde_class=BENCH_SERDE, reader_lock=lock
        )
        self.counter = 0

    def reader_handle(self) -> Any:
        return dataclasses.replace(self.writer.handle(), reader_lock=None)

    def put_batch(self, value: bytes, batch: int) -> list[Any]:
        put, sign = self.writer.put, self.writer.get_signature
        handles = []
        for _ in range(batch):
            key = f"k{self.counter}"
            self.counter += 1
            address, monotonic_id = put(key, value)
            handles.append((address, monotonic_id, sign(key), key))
        return handles

    def close(self) -> None:
        self.ring.close()


class PlainWriter:
    """The physical limit: the value's bytes copied into a segment, no more."""

    def __init__(self, size: int, batch: int) -> None:
        self.memory = shared_memory.SharedMemory(create=True, size=batch * size)
        self.size = size

    def reader_handle(self) -> str:
        return self.memory.name

    def put_batch(self, value: bytes, batch: int) -> list[Any]:
        buf, size = segment_buf(self.memory), self.size
        handles = []
        for i in range(batch):
            buf[i * size : (i + 1) * size] = value
            handles.append((i * size, size))
        return handles

    def close(self) -> None:
        with suppress(FileNotFoundError):
            self.memory.unlink()
        self.memory.close()
