"""Load an implementation of the seed's API by module name."""

from __future__ import annotations

import importlib
from types import ModuleType

SEED_NAMES = ("seed", "shmref_seed")
PORT_NAMES = ("port", "shmref_port")


def load_impl(name: str) -> ModuleType:
    """Import module `name`; "seed" builds the seed's own code from
    ../shared/seed, "port" a port of it whose private names all differ."""
    if name in SEED_NAMES:
        from shmref.seed.build import build_seed_module

        return build_seed_module()
    if name in PORT_NAMES:
        from shmref.seed.port import build_port_module

        return build_port_module()
    return importlib.import_module(name)
