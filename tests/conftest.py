"""Shared fixtures: the implementation under test (`--impl`) and the
/dev/shm leak guard that wraps the whole session."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from shmref.contract import MissingCapability
from shmref.impl import load_impl

pytest_plugins = ["shmleaks"]  # the session's /dev/shm leak guard

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


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function):
    """A property that needs an optional capability the implementation lacks
    is `not run: missing X` (a skip with that reason), never a pass."""
    try:
        return (yield)
    except MissingCapability as exc:
        pytest.skip(str(exc))


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
