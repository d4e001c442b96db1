"""Deliberately broken copies of refimpl, to prove that our checkers catch bugs.

`build_mutant(name)` copies refimpl into a temporary folder (removed at exit), applies one textual
mutation and imports it as `refimpl_<name>`. Each mutation names the exact
line it changes, and building fails loudly if that line is gone, so a mutant
can never silently be the unmutated code.
"""

from __future__ import annotations

import atexit
import importlib
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType

from shmref.core.paths import REFIMPL_DIR

# name -> (file, original text, mutated text, what the bug means)
MUTATIONS: dict[str, tuple[str, str, str, str]] = {
    "free_rule_without_n_readers": (
        "storage.py",
        "owed = (self.writer_flag[id] * self.n_readers - reader_count) % 2**32",
        "owed = (self.writer_flag[id] - reader_count) % 2**32",
        "reclaims after one reader's read, whatever n_readers is",
    ),
    "get_cached_not_counted": (
        "storage.py",
        "        self.increment_writer_flag(monotonic_id)\n        self._touched.discard",
        "        self._touched.discard",
        "get_cached hands the object out again without owing another read per reader",
    ),
    "no_lap_wrap": (
        "allocator.py",
        "    if end % capacity + size > capacity:",
        "    if end % capacity + size >= capacity:",
        "a chunk that exactly fills the rest of the lap is pushed to the next lap",
    ),
    "no_reset_when_empty": (
        "allocator.py",
        "        return 0, 0",
        "        return end, end",
        "an emptied ring keeps its position instead of resetting to 0",
    ),
    "touch_ignored": (
        "storage.py",
        "        if id in self._touched:\n            return False\n",
        "",
        "touched objects are reclaimed anyway",
    ),
}


def build_mutant(name: str) -> ModuleType:
    """Import refimpl with mutation `name` applied, as module `refimpl_<name>`."""
    if name not in MUTATIONS:
        raise ValueError(f"unknown mutant {name!r}; known: {', '.join(MUTATIONS)}")
    filename, original, mutated, _meaning = MUTATIONS[name]
    package = f"refimpl_{name}"
    if package in sys.modules:
        return sys.modules[package]
    root = Path(tempfile.mkdtemp(prefix=f"shmref-mutant-{name}-"))
    atexit.register(shutil.rmtree, root, True)
    target = root / package
    shutil.copytree(REFIMPL_DIR, target, ignore=shutil.ignore_patterns("__pycache__"))
    for path in target.glob("*.py"):
        text = (
            path.read_text()
            .replace("refimpl.", f"{package}.")
            .replace("from refimpl import", f"from {package} import")
        )
        if path.name == filename:
            if text.count(original) != 1:
                raise RuntimeError(f"mutation {name}: the line to mutate is not in {filename}")
            text = text.replace(original, mutated)
        path.write_text(text)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module(package)
