"""shmref's pytest plugin (entry point `pytest11`: `shmref`), loaded in every
pytest session of an environment where shmref is installed.

It stays passive until asked: it adds the option `--shmref-impl MODULE` and
the markers `slow` and `tlc`. When the option (or `$SHMREF_IMPL`) is given,
it also loads the suite's Hypothesis profile and the shared-memory leak
guard, so that

    pytest --shmref-impl their.module --pyargs shmref.suite

runs the conformance suite against their module, with their own options
(`-x`, `-k`, `--lf`, `-n auto`). The suite's fixtures live in
`shmref/suite/conftest.py` and apply to the suite only.
"""

from __future__ import annotations

import os

import pytest

IMPL_ENV = "SHMREF_IMPL"
PROFILE_ENV = "SHMREF_PROFILE"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("shmref", "shmref conformance suite")
    group.addoption(
        "--shmref-impl",
        default=None,
        metavar="MODULE",
        help=f"module implementing vLLM's shm object store, judged by shmref's suite "
        f"(default: ${IMPL_ENV}, else refimpl; 'seed' builds the seed's own code, "
        "from $SHMREF_SEED)",
    )
    group.addoption(
        "--shmref-profile",
        default=None,
        metavar="NAME",
        help=f"the suite's Hypothesis profile (default: ${PROFILE_ENV}, else shmref-ci; "
        "shmref-long for deep runs, shmref-quick for few examples)",
    )


def impl_name(config: pytest.Config) -> str:
    """The module under test: --shmref-impl, else $SHMREF_IMPL, else refimpl."""
    return str(config.getoption("shmref_impl") or os.environ.get(IMPL_ENV) or "refimpl")


def active(config: pytest.Config) -> bool:
    return bool(config.getoption("shmref_impl") or os.environ.get(IMPL_ENV))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes minutes (deselect with -m 'not slow')")
    config.addinivalue_line("markers", "tlc: needs Java and the TLC jar (deselect: -m 'not tlc')")
    for marker, level in (
        ("seed_compatible", "the seed's values, exceptions, ids and bytes"),
        ("hardened", "refimpl's fixes of FINDINGS.md (optional; the seed fails them)"),
        ("protocol_safe", "replays, state machines: the spec's protocol"),
        ("seed_layout", "the seed's byte layout (optional: a claim of its own)"),
    ):
        config.addinivalue_line("markers", f"{marker}: a test of the conformance level {level}")
    if active(config):
        use_suite_settings(config)


def use_suite_settings(config: pytest.Config) -> None:
    """The leak guard and the suite's Hypothesis profile, for this session."""
    from hypothesis import settings

    from shmref.testing import profiles

    config.pluginmanager.import_plugin("shmref.testing.leaks")
    name = config.getoption("shmref_profile") or os.environ.get(PROFILE_ENV) or profiles.CI
    if name not in profiles.KNOWN:
        raise pytest.UsageError(
            f"unknown shmref profile {name!r} (--shmref-profile or ${PROFILE_ENV}); "
            f"known: {', '.join(profiles.KNOWN)}"
        )
    settings.load_profile(name)
