"""Does an implementation keep its read counts where the seed does?

Byte-level observation (shmref.observe) reads a chunk's read count at the
seed's offsets. That is power where it holds (a misplaced count shows at
the step it happens) and noise where it does not: a store with another
layout (secret elsewhere, other endianness, wider headers) would be judged
by bytes that are not its counts. The seed's layout is a claim of its own
(the level seed-layout); every other level reads counts from the bytes only
where this probe, run on a ring of the implementation's own, sees the
seed's counts: the header's id at the address put returned, a count of 0
after the put and of 2 after two counted reads.
"""

from __future__ import annotations

import copy
import multiprocessing as mp
from contextlib import ExitStack
from types import ModuleType

from shmref.observe import Segment

_PROBED: dict[tuple[str, int], bool] = {}


def seed_counts(impl: ModuleType) -> bool:
    """True if `impl` keeps read counts as the seed lays them out (probed
    once per module; any failure of the probe means no)."""
    key = (impl.__name__, id(impl))
    if key not in _PROBED:
        try:
            _PROBED[key] = _probe(impl)
        except Exception:  # a store that cannot be probed is read through its API only
            _PROBED[key] = False
    return _PROBED[key]


def _probe(impl: ModuleType) -> bool:
    with ExitStack() as resources:
        ring = impl.SingleWriterShmRingBuffer(1024, create=True)
        resources.callback(ring.close)
        writer = impl.SingleWriterShmObjectStorage(256, 2, ring)
        handle = copy.copy(writer.handle())
        handle.reader_lock = mp.get_context("spawn").Lock()
        reader = impl.SingleWriterShmObjectStorage.create_from_handle(handle)
        resources.callback(reader.close)
        address, monotonic_id = writer.put("shmref-probe", "probe")  # any serde stores a str
        signature = writer.get_signature("shmref-probe")
        segment = resources.enter_context(Segment(ring.handle()))
        if segment.header(address)[0] != monotonic_id or segment.count(address) != 0:
            return False
        for _ in range(2):
            reader.get(address, monotonic_id, signature, "shmref-probe")
        return segment.count(address) == 2
