"""Shared fixtures: the implementation under test (`--impl`) and the
/dev/shm leak guard that wraps the whole session."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from shmref import shmtrack
from shmref.contract import MissingCapability
from shmref.impl import load_impl

REPO = Path(__file__).resolve().parents[1]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--impl",
        default=os.environ.get("SHMREF_IMPL", "refimpl"),
        help="module implementing the seed's API to test (default: refimpl; "
        "'seed' builds the seed's own code from ../shared/seed)",
    )


@pytest.fixture(scope="session")
def impl_name(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--impl")


@pytest.fixture(scope="session")
def impl(impl_name: str) -> ModuleType:
    return load_impl(impl_name)


@pytest.fixture(scope="session")
def is_refimpl(impl: ModuleType) -> bool:
    return impl.__name__ == "refimpl"


@pytest.fixture(scope="session", autouse=True)
def no_leaked_segments():
    """Every segment the session creates must be gone at its end."""
    shmtrack.start()
    yield
    leaked = shmtrack.leaked()
    if leaked:
        blamed = "; ".join(f"{n} created by {shmtrack.creator(n)}" for n in sorted(leaked))
        pytest.fail(f"test session leaked shared-memory segments: {blamed}")


@pytest.fixture(autouse=True)
def no_segment_leaked_by_this_test(request: pytest.FixtureRequest):
    """A segment a test creates and leaves behind fails that test (and is
    then removed, so that the session's guard does not charge it to another)."""
    yield
    mine = sorted(n for n in shmtrack.leaked() if shmtrack.creator(n) == request.node.nodeid)
    if mine:
        shmtrack.remove(mine)
        pytest.fail(f"test leaked shared-memory segments: {', '.join(mine)} (removed)")


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function):
    """A property that needs an optional capability the implementation lacks
    is `not run: missing X` (a skip with that reason), never a pass."""
    try:
        return (yield)
    except MissingCapability as exc:
        pytest.skip(str(exc))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Segments are charged to the test that creates them (shmtrack.creator)."""
    shmtrack.owner = item.nodeid
    try:
        return (yield)
    finally:
        shmtrack.owner = "(outside any test)"


@pytest.fixture
def ring_factory(impl: ModuleType):
    """Make writer rings that are closed (and unlinked) after the test."""
    made = []

    def make(size: int, id_max: int | None = None):
        ring = impl.SingleWriterShmRingBuffer(size, create=True)
        made.append(ring)
        if id_max is not None:
            if not hasattr(ring, "ID_MAX"):  # an optional capability (shmref.contract)
                pytest.skip("not run: missing ring.ID_MAX")
            ring.ID_MAX = id_max
        return ring

    yield make
    for ring in made:
        ring.close()


if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


from hypothesis import HealthCheck, settings  # noqa: E402

# "ci": fast and derandomized, so a CI failure replays identically anywhere;
# "long": `make fuzz`, random and deep, failures saved in .hypothesis/.
settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=150,
    stateful_step_count=50,
    deadline=None,
    print_blob=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "long",
    max_examples=3000,
    stateful_step_count=120,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
