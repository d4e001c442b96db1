"""The repository's tests share the suite's fixtures (shmref/suite/conftest.py)
and always run with the leak guard and the suite's Hypothesis profile."""

from __future__ import annotations

import pytest

from shmref import pytest_plugin
from shmref.suite.conftest import (  # noqa: F401 - fixtures and a hook, shared
    impl,
    impl_name,
    is_refimpl,
    pytest_pyfunc_call,
    ring_factory,
)


def pytest_configure(config: pytest.Config) -> None:
    pytest_plugin.use_suite_settings(config)
