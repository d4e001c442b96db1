"""What the audit searches of the seed's methods share (tests/findings/test_seed_audit*.py).

Each search module holds `AUDITS`: name -> (audit, strategy). An audit calls
the method under test on a fresh small store built from `mod` (the seed's
module or refimpl) with the searched arguments and returns None when the call
was clean, or the FINDINGS.md id of the defect it showed. `check_seed` and
`check_refimpl` are the two properties every search module asserts: on the
seed every defect met is a listed finding; on refimpl only findings whose
refimpl test is still xfail may show.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from multiprocessing import Lock
from types import ModuleType
from typing import Any

import pytest
from hypothesis import find, given
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from refimpl.serde import MsgpackOnlySerde
from shmref.docgen import findings
from shmref.session import leaks as shmleaks

Audit = Callable[[ModuleType, Any], "str | None"]
Audits = dict[str, tuple[Audit, st.SearchStrategy[Any]]]


def listed() -> dict[str, str]:
    """Finding id -> what refimpl does about it ('yes' / 'no' / 'partly' / 'no,')."""
    data = findings.load_findings()
    xfail = findings.xfail_map(data)
    return {f.id: findings.refimpl_closes(f, xfail).split(" ")[0] for f in data}


@pytest.fixture(scope="module")
def seed() -> ModuleType:
    try:
        from shmref.seed.build import build_seed_module

        return build_seed_module()
    except Exception as exc:  # the seed text lives outside the repo
        pytest.skip(f"seed module unavailable: {exc}")


@contextmanager
def writer_and_reader(
    mod: ModuleType, size: int = 256, max_object_size: int = 64, n_readers: int = 1
) -> Iterator[tuple[Any, Any]]:
    """A lockless writer (vLLM's sender) and one reader with the lock; closed after,
    and any segment the code under test left behind is unlinked."""
    before = shmleaks.created()
    ring = mod.SingleWriterShmRingBuffer(size, create=True)
    writer = mod.SingleWriterShmObjectStorage(
        max_object_size, n_readers, ring, serde_class=MsgpackOnlySerde, reader_lock=None
    )
    reader = None
    try:
        ring_size, name = ring.handle()
        reader = mod.SingleWriterShmObjectStorage(
            max_object_size,
            n_readers,
            mod.SingleWriterShmRingBuffer(ring_size, name=name),
            serde_class=MsgpackOnlySerde,
            reader_lock=Lock(),
        )
        yield writer, reader
    finally:
        if reader is not None:
            with suppress(Exception):
                reader.close()
        with suppress(Exception):
            ring.close()
        unlink_left_since(before)


def unlink_left_since(before: set[str]) -> list[str]:
    """Unlink the segments created since `before` that still exist (the seed
    leaks some on bad input, FINDINGS #14); returns their names."""
    left = [n.lstrip("/") for n in shmleaks.created() - before]
    leaked = [n for n in left if os.path.exists(f"/dev/shm/{n}")]
    for name in leaked:
        with suppress(FileNotFoundError):
            os.unlink(f"/dev/shm/{name}")
    return leaked


def check_seed(seed: ModuleType, audits: Audits, method: str, shown_by: Any = None) -> None:
    """The seed shows a defect of `method` (found by search; `shown_by`, a known
    example, stands in where a random profile's search misses it), and every
    defect the search meets is a listed finding."""
    audit, strategy = audits[method]
    known = listed()
    try:
        example = find(strategy, lambda args: audit(seed, args) is not None)
    except NoSuchExample:
        if shown_by is None:
            raise
        example = shown_by
    assert audit(seed, example) in known, f"unlisted defect of {method}: {example!r}"

    @given(strategy)
    def every_defect_is_listed(args: Any) -> None:
        defect = audit(seed, args)
        assert defect is None or defect in known, f"unlisted defect of {method}: {args!r}"

    every_defect_is_listed()


def check_seed_sound(seed: ModuleType, audits: Audits, method: str) -> None:
    """A method searched and found sound: no argument the search tries shows a defect."""
    audit, strategy = audits[method]

    @given(strategy)
    def no_defect(args: Any) -> None:
        assert audit(seed, args) is None, f"defect of {method}: {args!r}"

    no_defect()


def check_refimpl(audits: Audits, method: str) -> None:
    """refimpl shows only the findings its xfail tests say are still open."""
    import refimpl

    audit, strategy = audits[method]
    still_open = {fid for fid, closed in listed().items() if closed != "yes"}

    @given(strategy)
    def only_open_findings(args: Any) -> None:
        defect = audit(refimpl, args)
        assert defect is None or defect in still_open, f"refimpl: finding {defect}: {args!r}"

    only_open_findings()


def fresh_lock() -> Any:
    return Lock()
