"""A replay harness written as an implementation without Python bindings
would write it: it reads shmref's ITF traces of the allocator with nothing
but `json` and the rules of docs/itf.md, drives a ring step by step and
compares every observable variable after every step. The ring here is the
seed's own code (built by shmref.seedbuild into SEED_DIR); in C or Rust it
would be yours. It imports nothing of shmref or refimpl: both are blocked
(shmref may be installed in site-packages, and the seed module borrows
refimpl's serde when it can), so the seed's own fallbacks are used.

    python tests/itf_foreign_replay.py SEED_DIR FILE.itf.json...

Prints one JSON object: files, steps replayed, divergences (at most one per
file: the first), the segments it created, and which shmref/refimpl modules
it imported (none).
"""

from __future__ import annotations

import importlib.abc
import json
import sys
from typing import Any

UNIT = 16  # bytes per unit (docs/itf.md, Units)
MD_SIZE = 8  # the ring's chunk header
OBSERVED = ("data_buffer_start", "data_buffer_end", "monotonic_id_start",
            "monotonic_id_end", "metadata")


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
    return {"data_buffer_start": ring.data_buffer_start // UNIT,
            "data_buffer_end": ring.data_buffer_end // UNIT,
            "monotonic_id_start": ring.monotonic_id_start,
            "monotonic_id_end": ring.monotonic_id_end,
            "metadata": {i: a // UNIT for i, a in ring.metadata.items()}}


def replay(path: str, ring_class: Any, segments: list[str]) -> tuple[int, str | None]:
    """Steps replayed and the first divergence (None: every step matched)."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    meta = doc["#meta"]
    if meta.get("schema") != "shmref-itf/1" or meta.get("kind") != "trace":
        return 0, f"{path}: not a shmref ITF trace"
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
                    freed = list(ring.free_buf(lambda i, _buf: i in marked,
                                               UNIT * action["nbytes"]))
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
                    return steps, (f"{path}: state {k} ({name}): {field} is {got[field]!r}, "
                                   f"the trace says {want[field]!r}")
    finally:
        ring.close()
    return steps, None


class BlockOracle(importlib.abc.MetaPathFinder):
    """A foreign harness has no shmref and no refimpl."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.split(".")[0] in ("refimpl", "shmref"):
            raise ImportError(f"{name} is not available to a foreign harness")
        return None


def main() -> int:
    seed_dir, files = sys.argv[1], sys.argv[2:]
    sys.meta_path.insert(0, BlockOracle())
    sys.path.insert(0, seed_dir)
    import shmref_seed

    segments: list[str] = []
    total, divergences = 0, []
    for path in files:
        steps, divergence = replay(path, shmref_seed.SingleWriterShmRingBuffer, segments)
        total += steps
        if divergence:
            divergences.append(divergence)
    ours = sorted(m for m in sys.modules if m.split(".")[0] in ("refimpl", "shmref"))
    print(json.dumps({"files": len(files), "steps": total, "divergences": divergences,
                      "segments": segments, "modules": ours}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
