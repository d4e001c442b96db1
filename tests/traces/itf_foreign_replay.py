"""A replay harness written as an implementation without Python bindings
would write it: it reads shmref's ITF traces with nothing but `json` and the
rules of docs/itf.md, drives a ring (allocator traces) or an object store
with readers (storage traces) step by step and compares every observable
variable after every step. The store here is the seed's own code (built by
shmref.seed.build into SEED_DIR); in C or Rust it would be yours. A reader's
read is the seed's one-call `get`, done at get_end (at get_begin when the
trace says the read is refused there), as docs/itf.md allows; so it
cannot replay the traces whose point is a writer step inside a read
(MCDoubleRead, MCClearDrain: the read's get_end diverges there).

It imports nothing of shmref or refimpl: both are blocked (shmref may be
installed in site-packages, and the seed module borrows refimpl's serde
when it can), so the seed's own fallbacks are used.

    python tests/traces/itf_foreign_replay.py SEED_DIR FILE.itf.json...

Prints one JSON object: files, steps replayed, divergences (at most one per
file: the first), the segments it created, and which shmref/refimpl modules
it imported (none).
"""

from __future__ import annotations

import importlib.abc
import json
import multiprocessing
import sys
from typing import Any

UNIT = 16  # bytes per unit (docs/itf.md, Units)
MD_SIZE = 8  # the ring's chunk header
OBSERVED = (
    "data_buffer_start",
    "data_buffer_end",
    "monotonic_id_start",
    "monotonic_id_end",
    "metadata",
)


def value(v: Any) -> Any:
    """ITF JSON -> Python (docs/itf.md, Values); sets as lists (their
    elements may be records, which Python cannot hash)."""
    if isinstance(v, list):
        return [value(x) for x in v]
    if isinstance(v, dict):
        if "#bigint" in v:
            return int(v["#bigint"])
        if "#tup" in v:
            return tuple(value(x) for x in v["#tup"])
        if "#set" in v:
            return [value(x) for x in v["#set"]]
        if "#map" in v:
            return {value(k): value(x) for k, x in v["#map"]}
        return {k: value(x) for k, x in v.items()}
    return v


def observe(ring: Any) -> dict[str, Any]:
    return {
        "data_buffer_start": ring.data_buffer_start // UNIT,
        "data_buffer_end": ring.data_buffer_end // UNIT,
        "monotonic_id_start": ring.monotonic_id_start,
        "monotonic_id_end": ring.monotonic_id_end,
        "metadata": {i: a // UNIT for i, a in ring.metadata.items()},
    }


def replay(path: str, seed: Any, segments: list[str]) -> tuple[int, str | None]:
    """Steps replayed and the first divergence (None: every step matched)."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    meta = doc["#meta"]
    if meta.get("schema") != "shmref-itf/1" or meta.get("kind") != "trace":
        return 0, f"{path}: not a shmref ITF trace"
    if "key_index" in doc["vars"]:
        return replay_store(path, seed, doc, segments)
    ring_class = seed.SingleWriterShmRingBuffer
    states = doc["states"]
    ring = ring_class(UNIT * value(states[0]["N"]), create=True)
    segments.append(ring.shared_memory.name)
    ring.ID_MAX = value(states[0]["ID_MAX"])
    marked: set[int] = set()  # ids whose free predicate answers true (mark_free)
    steps = 0
    try:
        for k in range(1, len(states)):
            state = states[k]
            assert state["#meta"]["index"] == k
            action = value(state["last_action"])
            name, outcome, freed = action["name"], "ok", None
            try:
                if name == "allocate_buf":
                    _address, new_id = ring.allocate_buf(UNIT * action["size"] - MD_SIZE)
                    marked.discard(new_id)
                elif name == "mark_free":
                    marked.add(action["id"])
                elif name == "free_buf":
                    freed = list(
                        ring.free_buf(lambda i, _buf: i in marked, UNIT * action["nbytes"])
                    )
                    marked.difference_update(freed)
                elif name == "clear":
                    ring.clear()
                    marked.clear()
                else:
                    return steps, f"state {k}: {name} is not an allocator action"
            except (MemoryError, ValueError, KeyError) as exc:
                outcome = type(exc).__name__
            steps += 1
            got = {"outcome": outcome, **observe(ring)}
            want = {"outcome": action["outcome"], **{v: value(state[v]) for v in OBSERVED}}
            if freed is not None:
                got["freed"], want["freed"] = freed, action["freed"]
            for field in want:
                if got[field] != want[field]:
                    return steps, (
                        f"{path}: state {k} ({name}): {field} is {got[field]!r}, "
                        f"the trace says {want[field]!r}"
                    )
    finally:
        ring.close()
    return steps, None


class BlockOracle(importlib.abc.MetaPathFinder):
    """A foreign harness has no shmref and no refimpl."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.split(".")[0] in ("refimpl", "shmref"):
            raise ImportError(f"{name} is not available to a foreign harness")
        return None


STORE_OBSERVED = (*OBSERVED, "key_index", "writer_flag", "touched")


def value_for(key: str, size: int, serde: Any, owners: dict[str, str]) -> str:
    """A value of `key` ("k1|k1|k1...") whose stored object is a chunk of
    `size` units; `owners` remembers whose value it is."""
    target = UNIT * size - MD_SIZE
    for length in range(target + 1):
        candidate = ((key + "|") * target)[:length]
        _data, data_bytes, _md, md_bytes = serde.serialize(candidate)
        if 4 + data_bytes + md_bytes == target and owners.get(candidate, key) == key:
            owners[candidate] = key  # 4: the reader count before the object
            return candidate
    raise SystemExit(f"no value of {key} fills {size} units")


def store_state(writer: Any) -> dict[str, Any]:
    ring = writer.ring_buffer
    buf = ring.shared_memory.buf
    counts = {}
    for i, address in ring.metadata.items():
        at = ring.DATA_OFFSET + address % ring.data_buffer_size + MD_SIZE
        counts[i] = int.from_bytes(buf[at : at + 4], "little", signed=True)
    return {
        **observe(ring),
        "key_index": {k: (a // UNIT, i) for k, (a, i) in writer.key_index.items()},
        "writer_flag": dict(writer.writer_flag),
        "touched": sorted(writer._touched),
        "counts": counts,
    }


def spec_state(state: dict[str, Any], n: int) -> dict[str, Any]:
    want = {v: value(state[v]) for v in STORE_OBSERVED}
    want["touched"] = sorted(want["touched"])
    cells = value(state["count"])
    want["counts"] = {i: cells[a % n] for i, a in want["metadata"].items()}
    return want


def replay_store(
    path: str, seed: Any, doc: dict[str, Any], segments: list[str]
) -> tuple[int, str | None]:
    states = doc["states"]
    n, readers = value(states[0]["N"]), sorted(value(states[0]["Readers"]))
    ring = seed.SingleWriterShmRingBuffer(UNIT * n, create=True)
    segments.append(ring.shared_memory.name)
    ring.ID_MAX = value(states[0]["ID_MAX"])
    writer = seed.SingleWriterShmObjectStorage(
        UNIT * value(states[0]["MAX_OBJ"]) - MD_SIZE, len(readers), ring
    )
    handle = writer.handle()
    handle.reader_lock = multiprocessing.Lock()
    stores = [seed.SingleWriterShmObjectStorage.create_from_handle(handle) for _ in readers]
    signatures: dict[tuple[Any, ...], Any] = {}
    begun: dict[int, tuple[Any, ...]] = {}  # reader -> handle of its read in progress
    owners: dict[str, str] = {}  # value -> the key it was put under
    steps = 0
    try:
        for k in range(1, len(states)):
            action = value(states[k]["last_action"])
            name, outcome, got = action["name"], "ok", {}
            reader = readers.index(action["reader"]) if "reader" in action else -1
            try:
                if name in ("put", "get_cached"):
                    if name == "put":
                        address, i = writer.put(
                            action["key"],
                            value_for(action["key"], action["size"], writer.ser_de, owners),
                        )
                    else:
                        address, i = writer.get_cached(action["key"])
                    got["handle"] = (action["key"], address // UNIT, i)
                    signatures[got["handle"]] = writer.get_signature(action["key"])
                elif name in ("touch", "release_touches", "free_unused", "clear"):
                    call = getattr(writer, name)
                    call(action["key"]) if name == "touch" else call()
                elif name == "get_begin":
                    begun[reader] = action["handle"]
                    if action["outcome"] != "ok":  # refused at once: the whole get now
                        read = begun.pop(reader)
                        stores[reader].get(*checked(stores[reader], read, signatures))
                elif name == "get_end":
                    read = begun.pop(reader)
                    result = stores[reader].get(*checked(stores[reader], read, signatures))
                    got["value"] = owners.get(result, "<foreign>")
                elif name not in ("get_copy", "drop_delivery", "get_check"):
                    return steps, f"state {k}: {name} is not a storage action"
            except Rejected:
                outcome = "rejected"
            except (MemoryError, ValueError, KeyError) as exc:
                # a read refused after its signature check passed is stale
                outcome = "stale" if name in ("get_begin", "get_end") else type(exc).__name__
            steps += 1
            want = {"outcome": action["outcome"], **spec_state(states[k], n)}
            have = {"outcome": outcome, **store_state(writer)}
            if "handle" in got:
                have["handle"], want["handle"] = got["handle"], action["handle"]
            if "value" in got:  # every cell holds the bytes of the key read
                cells = set(action["value"])
                want["value"] = cells.pop() if len(cells) == 1 else "<foreign>"
                have["value"] = got["value"]
            for field in want:
                if have[field] != want[field]:
                    return steps, (
                        f"{path}: state {k} ({name}): {field} is {have[field]!r}, "
                        f"the trace says {want[field]!r}"
                    )
    finally:
        for store in stores:
            store.ring_buffer.close()
        ring.close()
    return steps, None


class Rejected(Exception):
    """The signature check of a read refused its handle."""


def checked(store: Any, handle: Any, signatures: dict[Any, Any]) -> tuple[Any, ...]:
    """The get arguments of a read, after its signature check as a step of
    its own: a refusal there is `rejected`, by where it happened (the
    messages of an implementation are its own business)."""
    key, address, i = handle
    signature = signatures.get(tuple(handle), [0] * 32)
    try:
        store.verify_signature(key, UNIT * address, i, signature)
    except ValueError:
        raise Rejected from None
    return UNIT * address, i, signature, key


def main() -> int:
    seed_dir, files = sys.argv[1], sys.argv[2:]
    sys.meta_path.insert(0, BlockOracle())
    sys.path.insert(0, seed_dir)
    import shmref_seed

    segments: list[str] = []
    total, divergences = 0, []
    for path in files:
        steps, divergence = replay(path, shmref_seed, segments)
        total += steps
        if divergence:
            divergences.append(divergence)
    ours = sorted(m for m in sys.modules if m.split(".")[0] in ("refimpl", "shmref"))
    print(
        json.dumps(
            {
                "files": len(files),
                "steps": total,
                "divergences": divergences,
                "segments": segments,
                "modules": ours,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
