"""refimpl in the place of vLLM's `shm_object_storage`, in every interpreter
started with the driver's folder on PYTHONPATH (its `sitecustomize.py` calls
`install`, before anything imports vLLM; spawned children too).

An import finder answers for the module's name alone: the module it makes
holds refimpl's public names (`refimpl.__all__`), so vLLM's own code and its
tests, importing the module by name, get refimpl's classes and its serde."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

from vllmcheck import MODULE

SITECUSTOMIZE = '''"""Written by vllmcheck.inplace: refimpl in place of vLLM's module."""
from vllmcheck.inplace import install

install()
'''


class RefimplInPlace(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds vLLM's module name and loads refimpl's names under it."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        """refimpl's stand-in for the one name, nothing for any other."""
        if fullname != MODULE:
            return None
        return importlib.util.spec_from_loader(fullname, self, origin="refimpl")

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        """The default module object."""
        return None

    def exec_module(self, module: ModuleType) -> None:
        """refimpl's public names in `module`."""
        import refimpl

        names = list(getattr(refimpl, "__all__", ()))
        for name in names:
            setattr(module, name, getattr(refimpl, name))
        vars(module)["__all__"] = names
        module.__doc__ = "refimpl in place of vLLM's shm_object_storage (vllmcheck.inplace)"


def install() -> None:
    """Put the finder first on sys.meta_path (once)."""
    if not any(isinstance(finder, RefimplInPlace) for finder in sys.meta_path):
        sys.meta_path.insert(0, RefimplInPlace())
