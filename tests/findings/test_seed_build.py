"""Regression tests for FINDINGS.md, the module the findings are shown on: the
seed's code extracted into an importable module (shmref.seed.build).

As everywhere in tests/findings/: a `_seed` test DEMONSTRATES the defect on
the module built from the seed and a `_refimpl` test shows what refimpl does
instead (`xfail(strict=True)` where refimpl has not fixed it yet); the
fixtures they share are conftest.py's, the helpers findings_support.py's."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from findings_support import Shm, count_of

# -- the extractor itself ---------------------------------------------------------------------


def test_seedbuild_missing_seed_is_a_clear_error(tmp_path: Path) -> None:
    from shmref.seed.build import SeedError, build_seed_module

    with pytest.raises(SeedError, match="missing seed .*absent.txt does not exist"):
        build_seed_module(tmp_path / "out", tmp_path / "absent.txt")


def _spawned_read(
    handle: Any, address: int, monotonic_id: int, signature: list[int], out: Any
) -> None:
    import shmref_seed

    reader = shmref_seed.SingleWriterShmObjectStorage.create_from_handle(handle)
    try:
        out.put(reader.get(address, monotonic_id, signature, "k"))
    finally:
        reader.close()


def test_seedbuild_module_importable_in_spawned_child(seed: ModuleType, shm: Shm) -> None:
    import multiprocessing

    assert seed.__name__ == "shmref_seed" and sys.modules["shmref_seed"] is seed
    context = multiprocessing.get_context("spawn")
    writer = shm.writer(seed, n_readers=1, lock=context.Lock())
    address, monotonic_id = writer.put("k", {"a": [1, 2]})
    out = context.Queue()
    child = context.Process(
        target=_spawned_read,
        args=(writer.handle(), address, monotonic_id, writer.get_signature("k"), out),
    )
    child.start()
    try:
        value = out.get(timeout=60)
    finally:
        child.join(timeout=60)
    assert child.exitcode == 0
    assert value == {"a": [1, 2]}
    assert count_of(writer, address) == 1  # the child's read was counted
