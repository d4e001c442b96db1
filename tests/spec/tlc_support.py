"""What the tests that run TLC on the spec share: the spec folder, a skip of
the whole module where TLC cannot run, and the manifest's models by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from shmref.tlc import manifest
from shmref.tlc.java import unavailable

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "spec"


def require_tlc() -> None:
    """Skip the calling test module unless Java and TLC's jar are found."""
    missing = unavailable()
    if missing:  # pragma: no cover - depends on the machine
        pytest.skip(missing, allow_module_level=True)


def spec_models() -> dict[str, manifest.Model]:
    return {m.name: m for m in manifest.load_manifest(SPEC / "models.toml").models}
