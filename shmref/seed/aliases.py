"""The names of the modules shmref builds (the seed's own code and its port)
and the short names users type for them (`--impl seed`, `--impl port`): one
table, so that the builder, the loader and the oracle's replay commands
agree on both."""

from __future__ import annotations

SEED_MODULE = "shmref_seed"  # the module built from the seed text (shmref.seed.build)
PORT_MODULE = "shmref_port"  # the seed with its private names renamed (shmref.seed.port)
SEED_ALIAS = "seed"
PORT_ALIAS = "port"
ALIASES = {SEED_MODULE: SEED_ALIAS, PORT_MODULE: PORT_ALIAS}


def alias_of(name: str) -> str:
    """What a user types for module `name` ("seed" for shmref_seed); other names as they are."""
    return ALIASES.get(name, name)


def is_seed(name: str) -> bool:
    """`name` is the seed's own code, by its module name or its alias."""
    return name in (SEED_MODULE, SEED_ALIAS)


def is_port(name: str) -> bool:
    """`name` is the seed's port, by its module name or its alias."""
    return name in (PORT_MODULE, PORT_ALIAS)


def built_by_shmref(module_name: str) -> bool:
    """A module that shmref writes into its cache (not one a user installed)."""
    return module_name in ALIASES
