"""The suite's fixtures: the implementation under test (`--shmref-impl`,
shmref.pytest_plugin) and rings that are closed after each test; and each
test's level as a marker (`-m seed_compatible`, `-m hardened`,
`-m protocol_safe`), from the conformance groups (shmref.core.suitegroups,
the table the oracle reads too: the suite never imports the oracle)."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Generator, Iterator
from types import ModuleType
from typing import Any

import pytest

from shmref import pytest_plugin
from shmref.calls import calltrace
from shmref.contract import MissingCapability
from shmref.core.levels import LEVEL_MARKERS
from shmref.core.paths import SUITE_DIR
from shmref.core.suitegroups import TEST_GROUPS, group_of
from shmref.seed.build import SeedMissing
from shmref.seed.impl import load_impl
from shmref.session import given
from shmref.store.readers import close_despite_cycles
from shmref.suite.stores import Writer


@pytest.fixture(scope="session")
def impl_name(request: pytest.FixtureRequest) -> str:
    return pytest_plugin.impl_name(request.config)


@pytest.fixture(scope="session")
def impl(request: pytest.FixtureRequest, impl_name: str) -> ModuleType:
    """The module under test: the one the oracle's worker loaded and gave
    this session (shmref.session.given), else loaded here by its name."""
    module = given.given(request.config) or load_impl(impl_name)
    calltrace.instrument(module)  # a report's run: failing tests leave their calls drawn
    return module


@pytest.fixture(scope="session")
def is_refimpl(impl: ModuleType) -> bool:
    return impl.__name__ == "refimpl"


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call() -> Iterator[Any]:  # pluggy passes only the arguments named: none
    """A property that needs an optional capability the implementation lacks
    is `not run: missing X` (a skip with that reason), never a pass."""
    try:
        return (yield)
    except MissingCapability as exc:
        pytest.skip(str(exc))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A test that needs the seed's code where no seed file is given (in a
    fixture or in the test) is `not run: missing seed (...)`, never a failure."""
    report = yield
    if call.excinfo is not None and call.excinfo.errisinstance(SeedMissing):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, str(call.excinfo.value))
    elif report.when == "call" and report.failed and call.excinfo is not None:
        calltrace.save_failure(calltrace.case_name(item), call.excinfo.exconly().splitlines()[0])
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """No test of the suite runs TLC: the traces it replays ship in the
    package (shmref.traces.shipped), so it needs no Java."""
    calltrace.RECORDER.reset(calltrace.case_name(item))


@pytest.fixture
def ring_factory(impl: ModuleType) -> Iterator[Callable[..., Any]]:
    """Make writer rings that are closed (and unlinked) after the test."""
    made: list[Any] = []

    def make(size: int, id_max: int | None = None) -> Any:
        ring = impl.SingleWriterShmRingBuffer(size, create=True)
        made.append(ring)
        if id_max is not None:
            if not hasattr(ring, "ID_MAX"):  # an optional capability (shmref.contract)
                pytest.skip("not run: missing ring.ID_MAX")
            ring.ID_MAX = id_max
        return ring

    yield make
    for ring in made:  # a refused call's traceback may hold a view: freed by the collector
        close_despite_cycles(ring.close)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent != SUITE_DIR:
            continue
        group = group_of(calltrace.case_name(item), TEST_GROUPS)
        if group is not None:
            item.add_marker(LEVEL_MARKERS[group.level])


# -- the storage tests' writers and readers ------------------------------------------


@pytest.fixture
def reader_lock():
    return mp.get_context("spawn").Lock()


@pytest.fixture
def store_factory(impl, ring_factory):
    """Writer storages (no lock, as vLLM builds them) whose rings are cleaned
    up by ring_factory."""
    made: list[Writer] = []

    def make(
        buffer_size=1024, max_object_size=256, n_readers=1, id_max=None, lock=None, serde=None
    ):
        ring = ring_factory(buffer_size, id_max)
        extra = {} if serde is None else {"serde_class": serde}
        writer = Writer(
            impl.SingleWriterShmObjectStorage(
                max_object_size, n_readers, ring, reader_lock=lock, **extra
            ),
            ring,
        )
        made.append(writer)
        return writer

    yield make
    for writer in made:
        writer.close_segment()


@pytest.fixture
def attach(impl):
    """In-process readers attached through the writer's handle, with a lock."""
    readers = []

    def make(writer):
        reader = impl.SingleWriterShmObjectStorage.create_from_handle(writer.reader_handle())
        readers.append(reader)
        return reader

    yield make
    for reader in readers:
        close_despite_cycles(reader.close)
