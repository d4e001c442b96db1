"""The audit's coverage: how each public name of the seed's classes was examined.

The data is docs/coverage.toml: one `[[row]]` per public method or attribute
(`Class.name`), with how it was examined (`HOWS`), the tests that did it
(pytest node ids, checked to exist) and the result (the findings it showed,
or "sound"). `python -m shmref findings` renders it into FINDINGS.md between the
`coverage` markers. The list of names is not kept by hand: `public_names`
derives it from the seed's module by introspection, and `check_names`
fails when a public name has no row or a row names nothing public, so a
name the seed gains shows up as a failure, not as silence.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from tabulate import tabulate  # type: ignore[import-untyped]

from shmref.docgen.datafiles import load_entries

CLASSES = (
    "SingleWriterShmRingBuffer",
    "SingleWriterShmObjectStorage",
    "ObjectSerde",  # the seed's third class: the serde interface every value passes through
    "ShmObjectStorageHandle",
)
HOWS = ("Hypothesis search", "TLC model", "hand probe", "not examined")
DUNDERS = ("__init__", "__del__")  # the constructor and finalizer are behaviour too
# the tests that can back a way of examining (a row claiming it must list one)
BACKED_BY = {
    "Hypothesis search": re.compile(r"tests/findings/test_seed_audit\w*\.py::"),
    "TLC model": re.compile(r"shmref/suite/test_(replay|stateful)\.py::"),
}
NODE_ID = re.compile(r"(?:tests|shmref/suite)/[\w/]+\.py::(?:Test\w+::)?test_\w+")


class CoverageError(Exception):
    """Bad coverage data or a table that does not match the seed: one clear message."""


@dataclass(frozen=True)
class Row:
    name: str  # Class.member
    how: tuple[str, ...]
    tests: tuple[str, ...]
    result: str


def _instance_attributes(cls: type) -> set[str]:
    """Public names a class's methods assign on `self` (read from its source)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return set()
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and not node.attr.startswith("_")
    }


def public_names(module: ModuleType) -> list[str]:
    """Every public method and attribute of the three classes, as `Class.name`."""
    names: set[str] = set()
    for class_name in CLASSES:
        cls = getattr(module, class_name)
        members = {n for n in vars(cls) if not n.startswith("_") or n in DUNDERS}
        if dataclasses.is_dataclass(cls):
            members |= {f.name for f in dataclasses.fields(cls)} | {"__init__"}
        else:
            members |= _instance_attributes(cls)
        names |= {f"{class_name}.{member}" for member in members}
    return sorted(names)


def load_rows(path: Path) -> list[Row]:
    """Parse and validate the data file; raise CoverageError naming what is wrong."""
    raw = load_entries(path, "row", CoverageError, "coverage data")
    rows = []
    for index, entry in enumerate(raw):
        where = f"row #{index + 1} ({entry.get('name')!r})" if isinstance(entry, dict) else ""
        if not isinstance(entry, dict) or set(entry) != {"name", "how", "tests", "result"}:
            raise CoverageError(f"{where or index}: needs exactly name, how, tests, result")
        how, tests = entry["how"], entry["tests"]
        if not isinstance(how, list) or not how or any(h not in HOWS for h in how):
            raise CoverageError(f"{where}: how must be a non-empty list of {list(HOWS)}")
        if "not examined" in how and (len(how) > 1 or tests):
            raise CoverageError(f"{where}: 'not examined' comes alone and without tests")
        if not isinstance(tests, list) or any(not NODE_ID.fullmatch(str(t)) for t in tests):
            raise CoverageError(f"{where}: tests must be node ids FILE.py::[TestClass::]test_NAME")
        if "not examined" not in how and not tests:
            raise CoverageError(f"{where}: an examined name needs the tests that examined it")
        unbacked = [
            h for h in how if h in BACKED_BY and not any(BACKED_BY[h].match(t) for t in tests)
        ]
        if unbacked:
            raise CoverageError(f"{where}: no listed test does {unbacked}")
        rows.append(Row(entry["name"], tuple(how), tuple(tests), str(entry["result"])))
    names = [r.name for r in rows]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise CoverageError(f"{path}: duplicate rows {duplicates}")
    return rows


def _defined(path: Path) -> set[str]:
    """`test_f` and `TestClass::test_f` defined in a test file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            out.add(node.name)
        elif isinstance(node, ast.ClassDef):
            out |= {
                f"{node.name}::{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef) and item.name.startswith("test_")
            }
    return out


def check_tests_exist(rows: Sequence[Row], repo: Path) -> None:
    missing = []
    cache: dict[str, set[str]] = {}
    for row in rows:
        for node in row.tests:
            file, name = node.split("::", 1)
            if file not in cache:
                cache[file] = _defined(repo / file) if (repo / file).is_file() else set()
            if name not in cache[file]:
                missing.append(f"{row.name}: {node}")
    if missing:
        raise CoverageError("coverage names tests that do not exist: " + "; ".join(missing))


def check_names(rows: Sequence[Row], names: Sequence[str]) -> None:
    """Every public name has a row, and every row is a public name."""
    have = {r.name for r in rows}
    without = sorted(set(names) - have)
    stale = sorted(have - set(names))
    if without or stale:
        raise CoverageError(
            f"coverage rows do not match the seed: no row for {without or 'none'}; "
            f"rows for names the seed does not have: {stale or 'none'}"
        )


def not_examined(rows: Sequence[Row]) -> list[str]:
    return [r.name for r in rows if "not examined" in r.how]


def table(rows: Sequence[Row]) -> str:
    """The coverage table, one row per name, in class then name order."""
    order = {c: i for i, c in enumerate(CLASSES)}

    def key(row: Row) -> tuple[int, str]:
        cls, member = row.name.split(".", 1)
        return order.get(cls, len(order)), member

    lines = [
        [
            f"`{row.name}`",
            ", ".join(row.how),
            "<br>".join(f"`{t}`" for t in row.tests) or "-",
            row.result,
        ]
        for row in sorted(rows, key=key)
    ]
    counts = {h: sum(h in r.how for r in rows) for h in HOWS}
    summary = (
        f"{len(rows)} public names: "
        + ", ".join(f"{n} by {h}" if h != "not examined" else f"{n} {h}" for h, n in counts.items())
        + "."
    )
    headers = ["name", "examined by", "tests", "result"]
    return summary + "\n\n" + str(tabulate(lines, headers, tablefmt="github"))


def seed_module() -> ModuleType | None:
    """The seed's module, or None where the seed text is not available."""
    try:
        from shmref.seed.build import build_seed_module

        return build_seed_module()
    except Exception:
        return None


def section(path: Path, repo: Path) -> str:
    """The generated coverage section; checks the rows against the seed when present."""
    rows = load_rows(path)
    check_tests_exist(rows, repo)
    module: Any = seed_module()
    if module is not None:
        check_names(rows, public_names(module))
    return table(rows)
