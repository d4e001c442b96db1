"""Read counts through the API alone, for a store whose bytes are not the
seed's or that declares no count reader: after a hazard's trace, each live chunk is read
until one read short of what it is owed, and free_unused must keep it; a
chunk freed one read early carried a count that no read naming it made.
This is how a black-box checker sees a misplaced count: from the history of
calls and what they returned, never from the implementation's memory."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shmref.store.driver import Driver
from shmref.store.values import UNIT
from shmref.traces.replay import Replayer


def count_probe(
    driver: Driver,
    replayer: Replayer,
    reads: Mapping[tuple[int, int], list[Any]],
    owed: Mapping[tuple[int, int], int],
    stage: Mapping[Any, Any],
    rows: list[Any],
    step: Any,
    index: int,
) -> str | None:
    """The read counts through the API, for a store whose bytes are not the
    seed's: oldest live chunk first (free_unused frees in FIFO order), read
    it until one read short of what it is owed (n_readers per handle
    issued), free: it must stay; one more read, free: it goes, and the next
    chunk is probed. A chunk freed one read early carried a count that no
    read naming it made (the hazard MCDoubleReadCount's misplaced count)."""
    idle = [r for r in replayer.readers if replayer.reader(r) not in stage]
    if not idle:
        return None  # every reader is inside a read: no read to probe with
    reader = idle[0]

    def do(action: dict[str, Any]) -> str | None:
        nonlocal index
        index += 1
        problem: str | None = step(index - 1, action, "(count probe)")
        return problem

    def read(handle: tuple[Any, ...]) -> str | None:
        return (
            do({"name": "get_begin", "reader": reader, "handle": handle})
            or do({"name": "get_copy", "reader": reader})
            or do({"name": "get_end", "reader": reader, "handle": handle})
        )

    def kept(chunk_id: int, address: int) -> bool:
        return bool(driver.observe().get("metadata", {}).get(chunk_id) == address)

    if problem := do({"name": "release_touches"}):
        return problem
    live = driver.observe().get("metadata", {})
    for chunk_id, address in sorted(live.items(), key=lambda item: _fifo(driver, item)):
        entry = reads.get((chunk_id, address))
        if entry is None:
            return None  # a chunk no put of this replay placed: nothing to compare
        key, named = entry
        handle = (key, address, chunk_id)
        short = owed.get((chunk_id, address), 1) * len(replayer.readers) - named - 1
        for _ in range(max(short, 0)):
            if problem := read(handle):
                return problem
        if problem := do({"name": "free_unused"}):
            return problem
        if short >= 0 and not kept(chunk_id, address):
            problem = (
                f"chunk id {chunk_id} at {address} was freed after {named + short} of the "
                f"{named + short + 1} reads it was owed: it carried a count that no read "
                "naming it made"
            )
            rows.append((index, "(count probe)", "", "", "VIOLATION: " + problem))
            return problem
        if short >= 0 and ((problem := read(handle)) or (problem := do({"name": "free_unused"}))):
            return problem
        if kept(chunk_id, address):
            return None  # still kept (pinned, or a read lost): not this probe's hazard
    return None


def _fifo(driver: Driver, item: tuple[int, int]) -> int:
    """A live chunk's place in allocation order (driver.placed keeps it)."""
    order = [(chunk_id, address) for address, chunk_id in driver.placed.values()]
    chunk_id, address = item
    where = (chunk_id, UNIT * address)
    return order.index(where) if where in order else len(order)
