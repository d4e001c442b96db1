"""Build a fixture store from the seed's text at import time: the port's
source (shmref.seed.port: the seed with its private names renamed), edited by
exact text substitutions, executed into the fixture module's namespace.
Nothing of the seed is committed: only the edits."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shmref.seed.build import build_seed_module
from shmref.seed.port import render


def port_source() -> str:
    """The port's source, rendered from the seed module that seedbuild writes."""
    seed = build_seed_module()
    source, _names = render(Path(seed.__file__ or "").read_text(encoding="utf-8"))
    return source


def edit(source: str, edits: Sequence[tuple[str, str, int]]) -> str:
    """Apply (old, new, count) substitutions; each `old` must occur exactly
    `count` times, so that a seed that changed under us fails loudly rather
    than giving a store that is not what its docstring says."""
    for old, new, count in edits:
        found = source.count(old)
        if found != count:
            raise RuntimeError(
                f"expected {count} occurrence(s) of {old!r} in the port, found {found}"
            )
        source = source.replace(old, new)
    return source


def load_into(namespace: dict[str, Any], source: str) -> None:
    """Execute `source` as the body of the module whose globals are
    `namespace` (its classes get that module's name, so that handles and
    serde classes pickle by reference to it)."""
    doc = namespace.get("__doc__")
    code = compile(source, f"<{namespace['__name__']}: edited seed port>", "exec")
    exec(code, namespace)  # noqa: S102 - the seed's code, edited for a fixture
    namespace["__doc__"] = doc  # the fixture's docstring, not the generated one
