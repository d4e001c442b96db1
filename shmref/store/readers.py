"""A Driver's readers, attached through the writer's handle: in this process
(`LocalReader`, whose serde can be made to fail one copy), or in a real
process of their own (`RemoteReader` over a `ReaderProcess`) that runs reads
on command, so tests exercise true cross-process shared memory rather than
readers inside the test process."""

from __future__ import annotations

import copy
import functools
import gc
import hashlib
import multiprocessing as mp
import queue
import time
from collections.abc import Callable
from contextlib import suppress
from types import ModuleType
from typing import Any

from shmref.core.runconfig import RunConfig, current_run, enter_run
from shmref.core.vocabulary import exception_named
from shmref.seed.impl import load_impl
from shmref.store import racing, splitread

# One context everywhere: spawn gives each reader a fresh interpreter, which is
# what a vLLM worker is, and avoids inheriting the writer's mappings by fork.
CTX = mp.get_context("spawn")


def _outcome(call: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    try:
        return "ok", call(*args)
    except Exception as exc:  # reported to the test, which decides
        return type(exc).__name__, str(exc)


def reader_main(
    impl_name: str,
    handle: Any,
    commands: Any,
    results: Any,
    run: RunConfig | None = None,
    start: Any = None,
) -> None:
    """Serve commands until ("exit",), in the run `run` of the process that
    started it (a spawned interpreter inherits no module state); `start` is
    the barrier it shares with the other readers of a race. Commands:
    ("get", address, id, signature, key)        -> a whole read
    ("race", rounds, reads, address, id, signature, key)
                                                -> rounds x reads whole reads,
                                                   raced (shmref.store.racing)
    ("begin", address, id, signature, key)      -> first step of a split read
    ("copy",) / ("end",)                        -> its next steps
    ("touch", key, address, id, signature)      -> reader-side touch
    ("verify", [handles])                       -> (intact reads, problems)
    Each answers (outcome, value-or-message)."""
    enter_run(run)
    impl = load_impl(impl_name)
    handle = copy.copy(handle)
    handle.serde_class = serde_class = splitread.cut_serde(handle.serde_class)
    storage = impl.SingleWriterShmObjectStorage.create_from_handle(handle)
    read = None
    try:
        while True:
            command = commands.get()
            verb, args = command[0], command[1:]
            if verb == "exit":
                break
            if verb == "get":
                results.put(_outcome(storage.get, *args))
            elif verb == "race":
                results.put(_outcome(race_reads, start, storage, *args))
            elif verb == "begin":
                outcome = _outcome(
                    functools.partial(splitread.begin, serde_class=serde_class),
                    storage,
                    *args,
                )
                read = outcome[1] if outcome[0] == "ok" else None
                results.put((outcome[0], None if outcome[0] == "ok" else outcome[1]))
            elif verb == "copy":
                results.put(_outcome(splitread.copy, storage, read))
            elif verb == "end":
                results.put(_outcome(splitread.end, storage, read))
                read = None
            elif verb == "verify":
                results.put(("ok", verify_many(storage, args[0])))
            elif verb == "touch":
                results.put(_outcome(splitread.touch, storage, *args))
            else:
                results.put(("ValueError", f"unknown command {verb!r}"))
    finally:
        if read is not None:
            with suppress(Exception):
                splitread.abandon(read)
        splitread.abandon_all(serde_class)
        close_storage(storage)


def race_reads(start: Any, storage: Any, rounds: int, reads: int, *handle: Any) -> int:
    """`rounds` rounds of `reads` whole reads of one handle, back to back,
    each round started with the other readers of the race by the barrier
    `start`, so that they collide on the same count; how many were read."""
    if start is None:
        raise ValueError("a race needs the readers' barrier: ReaderProcess(..., start=)")
    return racing.race_with_others(start, rounds, reads, lambda: storage.get(*handle))


def close_storage(storage: Any) -> None:
    """Close a reader storage. A read held at its serde (shmref.store.splitread)
    ran the store's get in a thread: the views of the segment its frames held
    can stay in reference cycles until the cycle collector runs, and closing a
    segment with views alive is a BufferError. Collect, then close again."""
    close_despite_cycles(storage.close)


def close_despite_cycles(close: Callable[[], None]) -> None:
    """Call `close` (of a storage or a ring) until no BufferError: views of the
    segment kept in reference cycles (a held read's thread, or the traceback of
    a refused call made inside the store's `with access_buf(...)`, whose frames
    hold its views) are freed by the cycle collector, not when they die."""
    for attempt in range(20):
        try:
            close()
            return
        except BufferError:
            if attempt == 19:
                raise
            gc.collect()  # and a reading thread just abandoned may still be unwinding
            time.sleep(0.05)


def checksummed(key: str, payload: bytes) -> bytes:
    """A value that proves its own integrity and its key: digest + key + payload."""
    body = key.encode() + b"\0" + payload
    return hashlib.sha256(body).digest()[:8] + body


def verify_many(storage: Any, handles: list[tuple[Any, ...]]) -> tuple[int, list[str]]:
    """Read every (address, id, signature, key) handle; count the reads whose
    value is intact and is that key's, and describe the others."""
    good, bad = 0, []
    for address, monotonic_id, signature, key in handles:
        try:
            value = storage.get(address, monotonic_id, signature, key)
        except Exception as exc:  # a refused read is a failure here, not a crash
            bad.append(f"{key}: {type(exc).__name__}: {exc}")
            continue
        digest, body = value[:8], value[8:]
        if hashlib.sha256(body).digest()[:8] != digest:
            bad.append(f"{key}: torn value")
        elif (owner := body.split(b"\0", 1)[0]) != key.encode():
            bad.append(f"{key}: foreign value of {owner!r}")
        else:
            good += 1
    return good, bad


class ReaderProcess:
    """A reader process and its two queues; `call` sends one command and waits."""

    def __init__(
        self, impl_name: str, handle: Any, timeout: float = 60.0, start: Any = None
    ) -> None:
        """`start`: a barrier (`CTX.Barrier`) shared with the readers this
        one races, given at spawn (a lock or barrier cannot be sent later)."""
        self.commands = CTX.Queue()
        self.results = CTX.Queue()
        self.timeout = timeout
        self.process = CTX.Process(
            target=reader_main,
            args=(impl_name, handle, self.commands, self.results, current_run(), start),
            daemon=True,
        )
        self.process.start()

    def send(self, *command: Any) -> None:
        self.commands.put(command)

    def receive(self) -> tuple[str, Any]:
        """The next answer; a reader that died or hangs is an error, not a wait forever."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                answer: tuple[str, Any] = self.results.get(timeout=0.2)
                return answer
            except queue.Empty:
                if not self.process.is_alive():
                    raise RuntimeError(
                        f"reader process exited with code {self.process.exitcode}"
                    ) from None
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reader gave no answer in {self.timeout} s") from None

    def call(self, *command: Any) -> tuple[str, Any]:
        self.send(*command)
        return self.receive()

    def stop(self) -> None:
        """Ask politely, then insist: a test must never leave a reader behind."""
        if self.process.is_alive():
            with suppress(Exception):
                self.commands.put(("exit",))
            self.process.join(10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(10)
        self.commands.close()
        self.results.close()


def receive_race(readers: list[ReaderProcess], start: Any) -> list[tuple[str, Any]]:
    """Each reader's answer to a "race", in order. A reader that dies or
    goes silent breaks the race: the barrier `start` is aborted, so the
    others stop waiting for it at once (their answer a BrokenBarrierError),
    and this raises naming the reader, rather than every reader waiting
    out its barrier's timeout."""
    answers: dict[int, tuple[str, Any]] = {}
    deadline = time.monotonic() + max(reader.timeout for reader in readers)
    while len(answers) < len(readers):
        for index, reader in enumerate(readers):
            if index in answers:
                continue
            with suppress(queue.Empty):
                answers[index] = reader.results.get(timeout=0.05)
                continue
            if not reader.process.is_alive():
                start.abort()
                raise RuntimeError(
                    f"reader process {index} exited with code {reader.process.exitcode} "
                    "during the race"
                )
        if time.monotonic() > deadline and len(answers) < len(readers):
            start.abort()
            raise TimeoutError(
                f"readers {sorted(set(range(len(readers))) - set(answers))} "
                "gave no answer to the race in time"
            )
    return [answers[index] for index in range(len(readers))]


# -- the Driver's readers ------------------------------------------------------------


class LocalReader:
    """A reader storage in this process, attached through the writer's handle.
    Its serde class is the handle's, wrapped (splitread.CutSerde) so that one
    copy can be made to fail (the spec's COPY_FAIL) and a `get` can be held
    at its serde, without touching the storage's attributes."""

    def __init__(self, impl: ModuleType, handle: Any) -> None:
        self.serde_class = splitread.cut_serde(handle.serde_class)
        handle = copy.copy(handle)
        handle.serde_class = self.serde_class
        self.storage = impl.SingleWriterShmObjectStorage.create_from_handle(handle)
        self.read: Any = None

    def begin(self, *args: Any) -> None:
        self.abandon()
        self.read = splitread.begin(self.storage, *args, serde_class=self.serde_class)

    def copy(self, fail: bool = False) -> None:
        self.serde_class.fail = fail
        try:
            splitread.copy(self.storage, self.read)
        finally:
            self.serde_class.fail = False

    def end(self) -> Any:
        read, self.read = self.read, None
        return splitread.end(self.storage, read)

    def touch(self, *args: Any) -> Any:
        return splitread.touch(self.storage, *args)

    def abandon(self) -> None:
        if self.read is not None:
            splitread.abandon(self.read)
            self.read = None

    def close(self) -> None:
        self.abandon()
        splitread.abandon_all(self.serde_class)
        close_storage(self.storage)


class RemoteReader:
    """A reader in its own process (see shmref.store.readers), stepped by command."""

    def __init__(self, impl: ModuleType, handle: Any) -> None:
        self.process = ReaderProcess(impl.__name__, handle)

    def _call(self, *command: Any) -> Any:
        status, payload = self.process.call(*command)
        if status != "ok":
            raise (exception_named(status) or RuntimeError)(payload)
        return payload

    def begin(self, *args: Any) -> None:
        self._call("begin", *args)

    def copy(self, fail: bool = False) -> None:
        if fail:
            raise NotImplementedError("injected copy failures need in-process readers")
        self._call("copy")

    def end(self) -> Any:
        return self._call("end")

    def touch(self, *args: Any) -> Any:
        return self._call("touch", *args)

    def abandon(self) -> None:
        """Nothing to release here: the process holds its own views."""

    def close(self) -> None:
        self.process.stop()
