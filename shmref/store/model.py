"""A pure model of the storage protocol, in units, for the state machine.

It is the spec (spec/ShmObjectStorage.tla) written as plain Python: no
shared memory, no bytes, just who owns which cell. Like the spec's FIXED
switch, a `Policy` says which of refimpl's fixes change outcomes: SEED (the
seed's behaviour, the seed-compatible level), FIXED (refimpl's, hardened),
and every mix of them (`POLICIES`, protocol-safe: any refusal policy, only
safety judged). The
Hypothesis state machine runs it beside the real implementation and demands
the same outcome from every step and the same state after it.

Memory is modelled per unit cell (physical position 0..N-1): the chunk header
that was last written at a cell (a chunk's first cell), the count field next
to it, and whose payload each cell holds, so that a read of reused memory is
visibly stale, torn or foreign.
"""

from __future__ import annotations

import copy
import itertools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from shmref.store.driver import Outcome
from shmref.store.values import MD_SIZE, UNIT


@dataclass(frozen=True)
class Policy:
    """Which of refimpl's fixes (FINDINGS.md) change what the API shows."""

    id_limit: bool  # F1: MemoryError at ID_MAX - 1 live chunks (else ids collide)
    recheck: bool  # F2: get_end re-checks the header (stale: no count); else counts at the cell
    rotate: bool  # F4: the secret changes when ids come back to a chunk a clear() forgot
    reclaim: bool  # F11: free target 2*(max_object_size + 8) - 1 bytes (else 2*max_object_size)

    @property
    def name(self) -> str:
        if self == SEED:
            return "seed"
        if self == FIXED:
            return "fixed"
        return "+".join(f for f in ("id_limit", "recheck", "rotate", "reclaim") if getattr(self, f))


SEED = Policy(False, False, False, False)
FIXED = Policy(True, True, True, True)
POLICIES = tuple(Policy(*flags) for flags in itertools.product((False, True), repeat=4))


class IdCollision(Exception):
    """The seed's allocator gave a live chunk's id to a new chunk (hazard H4,
    FINDINGS #4): outside what a policy model follows."""


Handle = tuple[str, int, int]  # (key, address, id), address in units


@dataclass
class ModelRead:
    handle: Handle
    cell: int  # physical position of the chunk's header
    size: int
    copied: frozenset[tuple[str, int]] | None = None  # payload owners seen by get_copy


@dataclass
class StoreModel:
    n: int  # ring size in units
    n_readers: int
    id_max: int
    max_obj: int  # largest chunk, units
    policy: Policy = FIXED
    unit: int = UNIT  # bytes per unit (the driver's, scaled to the serde)
    data_buffer_start: int = 0
    data_buffer_end: int = 0
    monotonic_id_start: int = 0
    monotonic_id_end: int = 0
    metadata: dict[int, int] = field(default_factory=dict)  # live id -> address, FIFO
    key_index: dict[str, tuple[int, int]] = field(default_factory=dict)
    id_index: dict[int, str] = field(default_factory=dict)
    writer_flag: dict[int, int] = field(default_factory=dict)
    touched: set[int] = field(default_factory=set)
    header: dict[int, tuple[int, int]] = field(default_factory=dict)  # cell -> (id, size)
    count: dict[int, int] = field(default_factory=dict)  # cell -> reader count field
    owner: dict[int, tuple[str, int]] = field(default_factory=dict)  # cell -> (key, put #)
    puts: int = 0
    extent: dict[int, tuple[int, int]] = field(default_factory=dict)  # put # -> (cell, size)
    issued: set[Handle] = field(default_factory=set)
    inbox: list[Counter[Handle]] = field(default_factory=list)  # per reader: deliveries
    reads: list[ModelRead | None] = field(default_factory=list)
    rotate_at: int | None = None  # F4's fence: the oldest id the last clear() forgot

    def __post_init__(self) -> None:
        self.inbox = [Counter() for _ in range(self.n_readers)]
        self.reads = [None] * self.n_readers

    def clone(self) -> StoreModel:
        """A copy to try a step on, as `copy.deepcopy` makes it but some ten
        times faster (the state machine asks before most puts): every
        container is copied; what they hold is immutable, but for a read."""
        other = copy.copy(self)
        for name, value in vars(self).items():
            if isinstance(value, (dict, set)):
                setattr(other, name, value.copy())
        other.inbox = [Counter(box) for box in self.inbox]
        other.reads = [copy.copy(read) for read in self.reads]
        return other

    # -- allocator ---------------------------------------------------------------

    def place(self, size: int) -> int | None:
        address = self.data_buffer_end
        if address % self.n + size > self.n:
            address = (address // self.n + 1) * self.n
        return None if address + size - self.data_buffer_start > self.n else address

    def allocate(self, size: int) -> tuple[int, int] | None:
        address = self.place(size)
        at_limit = len(self.metadata) >= self.id_max - 1
        if address is None or (at_limit and self.policy.id_limit):
            return None
        monotonic_id = self.monotonic_id_end
        if monotonic_id in self.metadata:
            raise IdCollision(f"id {monotonic_id} given to a new chunk while live")
        if monotonic_id == self.rotate_at:  # F4: a new secret before a forgotten id returns
            self.issued.clear()
            self.rotate_at = None
        cell = address % self.n
        self.header[cell] = (monotonic_id, size)
        for inner in range(cell + 1, cell + size):
            self.header.pop(inner, None)  # payload bytes overwrite old headers
        self.metadata[monotonic_id] = address
        self.data_buffer_end = address + size
        self.monotonic_id_end = (monotonic_id + 1) % self.id_max
        return address, monotonic_id

    def is_free(self, monotonic_id: int) -> bool:
        if monotonic_id in self.touched:
            return False
        cell = self.metadata[monotonic_id] % self.n
        return self.count[cell] >= self.writer_flag[monotonic_id] * self.n_readers

    def free(self, nbytes: int) -> list[int]:
        """free_buf with a target of `nbytes` BYTES (whole units are freed)."""
        freed: list[int] = []
        freed_units = 0
        while freed_units * self.unit < nbytes and self.monotonic_id_start in self.metadata:
            oldest = self.monotonic_id_start
            if not self.is_free(oldest):
                break
            freed_units += self.header[self.metadata.pop(oldest) % self.n][1]
            freed.append(oldest)
            self.monotonic_id_start = (oldest + 1) % self.id_max
            following = self.metadata.get(self.monotonic_id_start)
            if following is None:
                self.data_buffer_start = self.data_buffer_end = 0
            else:
                self.data_buffer_start += (following - self.data_buffer_start) % self.n
        if self.data_buffer_start >= self.n:
            self.data_buffer_start -= self.n
            self.data_buffer_end -= self.n
        return freed

    # -- writer actions ------------------------------------------------------------

    def put(self, key: str, size: int) -> Outcome:
        if key in self.key_index or size > self.max_obj:
            return Outcome("ValueError")
        placed = self.allocate(size)
        if placed is None:
            self.free_unused()
            placed = self.allocate(size)
            if placed is None:
                return Outcome("MemoryError")
        address, monotonic_id = placed
        cell = address % self.n
        self.count[cell] = 0
        self.puts += 1
        self.extent[self.puts] = (cell, size)
        for inner in range(cell, cell + size):
            self.owner[inner] = (key, self.puts)
        self.writer_flag[monotonic_id] = 1
        self.key_index[key] = placed
        self.id_index[monotonic_id] = key
        self._issue(key)
        return Outcome("ok", placed)

    def get_cached(self, key: str) -> Outcome:
        if key not in self.key_index:
            return Outcome("KeyError")
        placed = self.key_index[key]
        self.writer_flag[placed[1]] += 1
        self.touched.discard(placed[1])
        self._issue(key)
        return Outcome("ok", placed)

    def touch(self, key: str) -> Outcome:
        if key in self.key_index:
            self.touched.add(self.key_index[key][1])
        return Outcome("ok")

    def release_touches(self) -> Outcome:
        self.touched.clear()
        return Outcome("ok")

    def free_unused(self) -> Outcome:
        max_object_size = self.unit * self.max_obj - MD_SIZE
        if self.policy.reclaim:  # refimpl (F11)
            target = 2 * (max_object_size + MD_SIZE) - 1
        else:  # the seed
            target = 2 * max_object_size
        for freed in self.free(target):
            del self.key_index[self.id_index.pop(freed)]
            del self.writer_flag[freed]
        return Outcome("ok")

    def clear(self) -> Outcome:
        if self.policy.rotate and self.metadata and self.rotate_at is None:
            self.rotate_at = self.monotonic_id_start  # F4: the fence (refimpl.ring.clear)
        self.metadata.clear()
        self.monotonic_id_start = self.monotonic_id_end
        self.data_buffer_start = self.data_buffer_end = 0
        self.key_index.clear()
        self.id_index.clear()
        self.writer_flag.clear()
        self.touched.clear()
        return Outcome("ok")

    def writer_get(self, handle: Handle) -> Outcome:
        """The writer reads its own object: the id check, no count."""
        _key, address, monotonic_id = handle
        cell = address % self.n
        header = self.header.get(cell)
        if header is None or header[0] != monotonic_id:
            return Outcome("stale")
        keys = {
            key
            for key, _ in (
                self.owner.get(c, ("<garbage>", 0)) for c in range(cell, cell + header[1])
            )
        }
        return Outcome("ok", keys.pop() if len(keys) == 1 else "<foreign>")

    # -- reader actions ----------------------------------------------------------

    def reader_touch(self, reader: int, handle: Handle) -> Outcome:
        """A reader's touch validates the handle (signature, then id) and
        counts nothing."""
        if handle not in self.issued:
            return Outcome("rejected")
        _key, address, monotonic_id = handle
        header = self.header.get(address % self.n)
        return (
            Outcome("ok") if header is not None and header[0] == monotonic_id else Outcome("stale")
        )

    def get_begin_foreign(self, reader: int, handle: Handle) -> Outcome:
        """A handle signed with another storage's secret is refused."""
        self.reads[reader] = None
        return Outcome("rejected")

    def get_begin(self, reader: int, handle: Handle) -> Outcome:
        self.reads[reader] = None
        if handle not in self.issued:
            return Outcome("rejected")
        _key, address, monotonic_id = handle
        cell = address % self.n
        header = self.header.get(cell)
        if header is None or header[0] != monotonic_id:
            return Outcome("stale")
        self.reads[reader] = ModelRead(handle, cell, header[1])
        return Outcome("ok")

    def get_copy(self, reader: int) -> Outcome:
        read = self.reads[reader]
        assert read is not None, f"get_copy of reader {reader} with no read in flight"
        cells = range(read.cell, read.cell + read.size)
        read.copied = frozenset(self.owner.get(cell, ("<garbage>", 0)) for cell in cells)
        whole = len(read.copied) == 1 and (
            self.extent.get(next(iter(read.copied))[1]) == (read.cell, read.size)
        )
        if not whole:  # parts of objects: the serde may decode them or raise
            return Outcome("torn")
        return Outcome("ok")

    def get_end(self, reader: int) -> Outcome:
        """Re-check the header (F2), count, and return the copied key. The
        seed counts at the cell it opened, whatever lives there now (a cell
        inside another chunk's payload: that payload is corrupted)."""
        read, self.reads[reader] = self.reads[reader], None
        assert read is not None, f"get_end of reader {reader} with no read in flight"
        if self.policy.recheck:
            if self.header.get(read.cell) != (read.handle[2], read.size):
                return Outcome("stale")
            self.count[read.cell] += 1
        elif read.cell in self.header:
            self.count[read.cell] += 1
        else:
            self.owner[read.cell] = ("<corrupt>", 0)
        keys = {key for key, _ in read.copied or ()}
        return Outcome("ok", keys.pop() if len(keys) == 1 else "<foreign>")

    def _issue(self, key: str) -> None:
        address, monotonic_id = self.key_index[key]
        handle = (key, address, monotonic_id)
        self.issued.add(handle)
        for inbox in self.inbox:
            inbox[handle] += 1

    # -- views ---------------------------------------------------------------------

    def counts(self) -> dict[int, int]:
        return {i: self.count[a % self.n] for i, a in self.metadata.items()}

    def in_flight(self) -> bool:
        return any(read is not None for read in self.reads)


# -- what a state machine may take ---------------------------------------------------


def put_collides(models: Iterable[StoreModel], key: str, size: int) -> bool:
    """Would this put give a live chunk's id in a seed model (no F1), or make
    ID_MAX chunks live (a full lap of ids: the seed's free_buf then frees
    them and returns an empty id range, FINDINGS #4)? Not modelled: hazard
    H4, judged by TLC and the hazard replays."""
    for model in models:
        if model.policy.id_limit:
            continue
        after = model.clone()
        try:
            after.put(key, size)
        except IdCollision:
            return True
        if len(after.metadata) >= after.id_max:
            return True
    return False


def put_breaks_a3(models: Iterable[StoreModel], key: str, size: int) -> bool:
    """Would this put reissue the id of a handle a reader may still present?
    The spec's A3 (StorageWriter.tla: put is not taken then; without A1 every
    issued handle is outstanding). Safety is judged under A3, as TLC judges
    it (outstanding: issued, in an inbox, or being read, even after a
    clear); beyond it is hazard H3 (MCIdWrap and its replay)."""
    for model in models:
        try:
            outcome = model.clone().put(key, size)
        except IdCollision:
            continue
        outstanding = set(model.issued).union(*model.inbox)
        outstanding |= {read.handle for read in model.reads if read is not None}
        if outcome.status == "ok" and outcome.result[1] in {h[2] for h in outstanding}:
            return True
    return False
