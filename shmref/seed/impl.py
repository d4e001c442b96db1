"""Load an implementation of the seed's API by module name."""

from __future__ import annotations

import importlib
from types import ModuleType

from shmref.process import MIXED_PREFIX, is_program
from shmref.seed.aliases import is_port, is_seed


def load_impl(name: str) -> ModuleType:
    """Import module `name`; "seed" builds the seed's own code from
    ../shared/seed, "port" a port of it whose private names all differ;
    "exec:PROGRAM" a store program behind the process protocol
    (shmref.process, docs/protocol.md)."""
    if is_program(name):
        from shmref.process.proxy import build

        module = build(name)
        lacking = {"writer", "reader"} - module.PROGRAM.roles
        if lacking:
            raise ImportError(
                f"the program offers no {' or '.join(sorted(lacking))} role; judge it beside "
                f"another implementation: --writer/--readers (docs/protocol.md, Roles)"
            )
        return module
    if name.startswith(MIXED_PREFIX):
        from shmref.process.mixed import compose, sides
        from shmref.process.proxy import build

        writer, readers = sides(name)
        return compose(
            name,
            *(build(s) if is_program(s) else load_impl(s) for s in (writer, readers)),
        )
    if is_seed(name):
        from shmref.seed.build import build_seed_module

        return build_seed_module()
    if is_port(name):
        from shmref.seed.port import build_port_module

        return build_port_module()
    return importlib.import_module(name)
