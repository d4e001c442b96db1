"""The findings tests' fixtures (findings_support.py holds their helpers): the
module built from the seed, once per session (skipped without the seed file),
refimpl, and `shm`, which closes every ring and storage a test made and fails
it if a segment is left in /dev/shm."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from types import ModuleType

import pytest
from findings_support import Shm


@pytest.fixture(scope="session")
def seed(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    from shmref.seed.build import build_seed_module, default_seed_path

    path = default_seed_path()
    if path is None or not path.is_file():
        pytest.skip(f"seed file absent: {path} (set $SHMREF_SEED to vLLM's doc page)")
    return build_seed_module(tmp_path_factory.mktemp("seed"), path)


@pytest.fixture(scope="session")
def ref() -> ModuleType:
    return pytest.importorskip("refimpl")


@pytest.fixture
def shm() -> Iterator[Shm]:
    made = Shm()
    yield made
    gc.collect()  # exceptions raised inside access_buf keep views alive in cycles
    made.close_all()
    assert not made.leaked(), f"segments left in /dev/shm: {made.leaked()}"
