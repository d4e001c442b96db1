"""The seed's own code behind the process protocol (docs/protocol.md): the
seed's module, built by shmref from its text, served by the reference
program (shmref.process.serve). A quick run of it must leave nothing in
/dev/shm and get the in-process seed's status on every property, a segment
its constructor leaves when it raises included
(tests/process/test_misbehaving_programs.py).

The seed has no split read of its own; in process the oracle cuts its `get`
where it calls the serde (shmref.store.splitread). A program's `get` cannot
be cut from the oracle's side (it has copied and counted before the oracle's
serde runs), so this program offers `get_begin`, `get_copy` and `get_end` by
making the same cut here: the seed's `get` runs in a thread held at its
serde, `get_copy` lets it copy, `get_end` lets it count.

    python3 seed_store.py [--broken MODE]
      keys    bytes keys arrive as opaque values (the base64 dropped):
              b"a" and b"b", or b"a" twice, are two different keys
      early   the whole read at get_begin (copied and counted there),
              as a program that cannot cut its store's read would
      whole   no split read at all (the seed's module as it is): the
              properties that need one are `not run`
"""

from __future__ import annotations

import dataclasses
import gc
import sys
import time
import types
from typing import Any

from shmref.process import serve
from shmref.process.serve import Server
from shmref.seed.build import build_seed_module
from shmref.store.splitread import HeldRead, cut_serde


class CutRead:
    """A read begun: the seed's get in its thread (None: read whole at
    get_begin), and the copy once made."""

    def __init__(self, held: HeldRead | None) -> None:
        self.held = held
        self.copied = held is None
        self.value: Any = None
        self.error: BaseException | None = None

    def close(self) -> None:
        """A read never ended (abandoned, or open at close): its get stops
        at its serde, uncounted, as the oracle's in-process abandon does."""
        if self.held is not None:
            self.held.close()


def recording(serde_class: type) -> type:
    """The serde class, keeping what its deserialize returned (the copy)."""

    class Recording(serde_class):  # type: ignore[misc]
        copied: Any = None

        def deserialize(self, data: Any) -> Any:
            self.copied = super().deserialize(data)
            return self.copied

    return Recording


def seed_with_split_read(seed: types.ModuleType, early: bool) -> types.ModuleType:
    """The seed's module with a storage class that adds the three steps."""
    base = seed.SingleWriterShmObjectStorage

    class Storage(base):  # type: ignore[misc,valid-type]
        def __init__(
            self,
            max_object_size: Any,
            n_readers: Any,
            ring_buffer: Any,
            serde_class: type = seed.MsgpackSerde,
            reader_lock: Any = None,
        ) -> None:
            cut = cut_serde(recording(serde_class))
            super().__init__(max_object_size, n_readers, ring_buffer, cut, reader_lock)

        @staticmethod
        def create_from_handle(handle: Any) -> Any:
            cut = cut_serde(recording(handle.serde_class))
            storage = base.create_from_handle(dataclasses.replace(handle, serde_class=cut))
            storage.__class__ = Storage
            return storage

        def get_begin(
            self, address: Any, monotonic_id: Any, signature: Any = None, key: Any = None
        ) -> CutRead:
            args = (address, monotonic_id, signature, key)
            if early:  # broken on purpose: copied and counted here
                read = CutRead(None)
                read.value = base.get(self, *args)
                return read
            held = HeldRead(self, type(self.ser_de), args)
            try:
                stage = held.wait()  # the get's own error, if it failed before its serde
            finally:
                # the thread holds its gate now: a plain get (or the next
                # read) must not stop at this one's, should it be abandoned
                type(self.ser_de).gate = None
            if stage == "done":
                raise RuntimeError("the seed's get returned without deserializing")
            return CutRead(held)

        def get_copy(self, read: CutRead) -> None:
            if read.copied or read.held is None:
                return
            read.copied = True
            read.held.copy()  # its serde deserializes: the copy
            read.value = self.ser_de.serde.copied

        def get_end(self, read: CutRead) -> None:
            if read.held is None:
                return
            if not read.copied:
                self.get_copy(read)
            read.held.end()  # the count, under the caller's lock

        def close(self) -> None:
            """The reads aborted just before may leave views of the segment
            in reference cycles: collected, as the oracle does in process
            (shmref.store.readers.close_despite_cycles)."""
            for attempt in range(20):
                try:
                    super().close()
                    return
                except BufferError:
                    if attempt == 19:
                        raise
                    gc.collect()
                    time.sleep(0.05)

    module = types.ModuleType(seed.__name__)
    module.__dict__.update(vars(seed))
    module.SingleWriterShmObjectStorage = Storage  # type: ignore[attr-defined]
    return module


def lossy_decode(value: Any) -> Any:
    """Broken on purpose: every value JSON cannot carry is opaque."""
    if isinstance(value, dict) and "unrepresentable" in value:
        return serve.Unrepresentable(str(value["unrepresentable"]))
    if isinstance(value, list):
        return [lossy_decode(v) for v in value]
    return value


if __name__ == "__main__":
    broken = sys.argv[sys.argv.index("--broken") + 1] if "--broken" in sys.argv else ""
    if broken == "keys":
        serve.decode = lossy_decode
    seed = build_seed_module()
    if broken != "whole":
        seed = seed_with_split_read(seed, early=broken == "early")
    out, sys.stdout = sys.stdout, sys.stderr  # the protocol on stdout; anything else on stderr
    Server(seed, ["writer", "reader"], out, sys.stdin).run()
