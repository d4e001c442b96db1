"""The implementation a run of the suite was given already loaded: the
oracle's worker (shmref.oracle.worker) loads it once, for its recordings,
the suite and its hazard replays, and gives that module to the suite's
`impl` fixture (shmref.suite.conftest), which otherwise loads it by name
(a user's pytest session). Held on the pytest session's config, so that it
lasts as long as the session that was given it."""

from __future__ import annotations

from types import ModuleType

import pytest

_IMPL = pytest.StashKey[ModuleType]()


def give(config: pytest.Config, module: ModuleType) -> None:
    """The suite run by `config` judges `module`."""
    config.stash[_IMPL] = module


def given(config: pytest.Config) -> ModuleType | None:
    """The module the session was given, if any."""
    return config.stash.get(_IMPL, None)
