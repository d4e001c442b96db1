"""The house shows its architecture (DESIGN.md "Repository map"): shmref/ is
folders by job in layers, no import cycle, no lower layer importing a higher
one, every module under 400 lines and at most ten modules at the top;
the suite and the stores' processes never import the oracle that runs them
(by path, or in children), and the oracle's own process never imports the
implementation under test (only its children's entry points load it). What
the children say is declared once (shmref.oracle.events): no other module
reads an event's kind by its key, writes anything but an event, or declares
a kind of its own. The
other trees of code, refimpl/, proofs/, bench/ and vllmcheck/, keep their modules
under about 450 lines (in both, docstrings do not count: `make lint` asks for them),
and the five import one another only downward (refimpl, then shmref, then proofs,
bench and vllmcheck, which do not import each other), with no cycle anywhere.
No function of shmref/ or refimpl/ (the code the wheel ships) is over 80 lines:
a screen long (issue 51; `make lint` has ruff's view of the same bound).

Imports are read with `ast`, inside functions too (a function-level import
is an import: hiding one there does not break a cycle). Importing a.b.c also
runs the package a.b's __init__, so that is an edge too (except to the
importer's own packages, which are already loading). Each check is shown to
fail on a broken input."""

from __future__ import annotations

import ast
import importlib
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "shmref"
MAX_LINES = 400
# every tree of code: the bound on its modules' lines, and the trees it may import
TREES: dict[str, tuple[int, frozenset[str]]] = {
    "refimpl": (450, frozenset({"refimpl"})),
    "shmref": (MAX_LINES, frozenset({"refimpl", "shmref"})),
    "proofs": (450, frozenset({"refimpl", "shmref", "proofs"})),
    "bench": (450, frozenset({"refimpl", "shmref", "bench"})),
    "vllmcheck": (450, frozenset({"refimpl", "shmref", "vllmcheck"})),
}
MAX_TOP_LEVEL = 10
# a function a screen long: from `def` to its last line, decorators not counted
MAX_FUNCTION_LINES = 80
WHEEL_TREES = ("refimpl", "shmref")  # the code the wheel ships

# Lowest first: a module may import its own layer and those listed before it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("names and places", ("shmref", "shmref.core")),
    ("the written contract", ("shmref.contract",)),
    ("stores in other processes: the protocol", ("shmref.process",)),
    (
        "what a run of the suite is held to: profiles, shrink budget, leak guard",
        ("shmref.session",),
    ),
    ("TLC and the model checker", ("shmref.tlc",)),
    ("the seed, its port and mutants", ("shmref.seed",)),
    ("driving a store", ("shmref.store",)),
    ("pictures of traces: the trace format, SVG, the HTML report", ("shmref.render",)),
    ("a test's calls recorded for its picture", ("shmref.calls",)),
    ("traces: replayed, recorded, ITF", ("shmref.traces",)),
    ("machines for users' tests", ("shmref.testing",)),
    ("the bad-input fuzz", ("shmref.fuzzing",)),
    ("the oracle", ("shmref.oracle",)),
    ("document generators", ("shmref.docgen",)),
    (
        "commands and the suite",
        (
            "shmref.__main__",
            "shmref.conformance",
            "shmref.pytest_plugin",
            "shmref.suite",
        ),
    ),
)
# `python -m shmref.conformance` stays where the design card calls it: it only runs `main`
ENTRY_MODULES = {"shmref.conformance": "shmref.oracle.cli"}
# what a top-level module of shmref/ may be: the package, its commands, the contract, the plugin
TOP_LEVEL = frozenset({"__init__", "__main__", "conformance", "contract", "pytest_plugin"})

# what serves the report's pictures, kept out of the implementers' toolkit (shmref.testing)
CALL_RECORDING = frozenset({"calltrace", "drawing"})
# The oracle runs the suite by path and stores behind the protocol in their own
# processes: these may not import it back (a loop the layers alone do not show, since
# the suite sits in the top layer beside the commands).
NOT_IMPORTING_THE_ORACLE = ("shmref.suite", "shmref.process")
ORACLE = "shmref.oracle"
# Every call into a store happens in a child (shmref/oracle/conformance_run.py): in the oracle's
# modules an implementation is loaded only inside these functions, which run in the
# children (the worker's, and the contract check's).
CHILD_ENTRY_POINTS = {"shmref.oracle.worker": "main", "shmref.oracle.checkchild": "check"}
LOADER_MODULES = frozenset({"shmref.seed.impl"})  # load_impl: a module by name
LOADER_CALLS = frozenset({"load_impl", "import_module", "__import__"})
# Each kind of event a child writes is a class of this module, made and told apart by its
# class everywhere else: the string of a kind ("e" in the stream) stays inside it.
EVENTS_MODULE = "shmref.oracle.events"
EVENT_KEY = "e"
EVENT_WRITER = "emit"  # the children's writers: worker.Events.emit, checkchild.emit
LITERALS = (ast.Constant, ast.Dict, ast.JoinedStr, ast.List, ast.Tuple)  # no event instance


# -- reading the package ----------------------------------------------------------------


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_sources(root: Path = PACKAGE) -> dict[str, str]:
    return {module_name(p, root): p.read_text() for p in sorted(root.rglob("*.py"))}


def imports_of(name: str, source: str, modules: Iterable[str], is_package: bool) -> set[str]:
    """The shmref modules `name` imports anywhere in `source` (functions
    included), with the packages whose __init__ that runs."""
    known = set(modules)
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in known else target)
    edges: set[str] = set()
    own_packages = {".".join(name.split(".")[:k]) for k in range(1, name.count(".") + 2)}
    for target in found:
        if target.split(".")[0] not in TREES:
            continue
        parts = target.split(".")
        for k in range(1, len(parts) + 1):
            prefix = ".".join(parts[:k])
            if prefix in known and prefix not in own_packages:
                edges.add(prefix)
    edges.discard(name)
    return edges


def import_graph(sources: Mapping[str, str]) -> dict[str, set[str]]:
    return {
        name: imports_of(name, text, sources, _is_package(name, sources))
        for name, text in sources.items()
    }


def _is_package(name: str, sources: Mapping[str, str]) -> bool:
    return any(other.startswith(name + ".") for other in sources)


# -- the checks ---------------------------------------------------------------------------


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One import cycle (a -> b -> ... -> a), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, (_job, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if prefix == "shmref" and module != "shmref":
                    continue
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), index)
    return None if best is None else best[1]


def upward_imports(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Imports from a lower layer into a higher one."""
    found = []
    for module, targets in sorted(graph.items()):
        low = layer_of(module)
        for target in sorted(targets):
            high = layer_of(target)
            if low is not None and high is not None and high > low:
                found.append(f"{module} ({LAYERS[low][0]}) imports {target} ({LAYERS[high][0]})")
    return found


def tree_sources() -> dict[str, str]:
    """Every module of every tree (refimpl, shmref, proofs, bench)."""
    return {name: text for tree in TREES for name, text in package_sources(REPO / tree).items()}


def downward_between_trees(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Imports of a tree that TREES does not let it import."""
    found = []
    for module, targets in sorted(graph.items()):
        allowed = TREES[module.split(".")[0]][1]
        found += [
            f"{module} imports {t}" for t in sorted(targets) if t.split(".")[0] not in allowed
        ]
    return found


def code_lines(text: str) -> int:
    """A module's lines but its docstrings (the module's, each class's and
    function's): the bound is on code, and the docstring check in `make lint`
    asks for a docstring on every public name, which a near-full module could
    otherwise only pay for with code."""
    docstrings = 0
    for node in ast.walk(ast.parse(text)):
        kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        if isinstance(node, kinds) and ast.get_docstring(node, clean=False) is not None:
            first = node.body[0]
            docstrings += (first.end_lineno or first.lineno) - first.lineno + 1
    return len(text.splitlines()) - docstrings


def within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def imports_of_the_oracle(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Imports of shmref.oracle from the modules NOT_IMPORTING_THE_ORACLE."""
    return [
        f"{module} imports {target}"
        for module, targets in sorted(graph.items())
        if any(within(module, p) for p in NOT_IMPORTING_THE_ORACLE)
        for target in sorted(targets)
        if within(target, ORACLE)
    ]


def loads_outside_children(name: str, source: str) -> list[str]:
    """Where module `name` loads an implementation (imports the loader, or calls
    load_impl, importlib.import_module or __import__) outside its child entry
    point (CHILD_ENTRY_POINTS), i.e. in the oracle's own process."""
    tree = ast.parse(source)
    in_child: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == CHILD_ENTRY_POINTS.get(name):
            in_child.update(id(inner) for inner in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if id(node) in in_child:
            continue
        if isinstance(node, ast.ImportFrom) and node.module in LOADER_MODULES:
            found.append(f"{name}:{node.lineno} imports {node.module}")
        elif isinstance(node, ast.Import):
            found += [
                f"{name}:{node.lineno} imports {a.name}"
                for a in node.names
                if a.name in LOADER_MODULES
            ]
        elif isinstance(node, ast.Call):
            func = node.func
            called = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if called in LOADER_CALLS:
                found.append(f"{name}:{node.lineno} calls {called}")
    return found


def _is_event_key(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == EVENT_KEY


def events_outside_their_module(name: str, source: str) -> list[str]:
    """Where module `name` reads an event's kind by its key (`event["e"]`,
    `event.get("e")`), writes something other than one event (`emit` called
    with a literal, with keywords, or not with one argument), or declares a
    kind (a class with `kind=`): all of it belongs to EVENTS_MODULE alone."""
    if name == EVENTS_MODULE:
        return []
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and _is_event_key(node.slice):
            found.append((node.lineno, f"{name}:{node.lineno} reads an event's kind by its key"))
        elif isinstance(node, ast.ClassDef) and any(k.arg == "kind" for k in node.keywords):
            found.append(
                (node.lineno, f"{name}:{node.lineno} declares an event kind ({node.name})")
            )
        elif isinstance(node, ast.Call):
            func = node.func
            called = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            if called == "get" and node.args and _is_event_key(node.args[0]):
                found.append(
                    (node.lineno, f"{name}:{node.lineno} reads an event's kind by its key")
                )
            elif called == EVENT_WRITER and (
                len(node.args) != 1 or node.keywords or isinstance(node.args[0], LITERALS)
            ):
                found.append((node.lineno, f"{name}:{node.lineno} emits no event instance"))
    return [where for _, where in sorted(found)]


def too_long(sources: Mapping[str, str], limit: int = MAX_LINES) -> list[str]:
    found = []
    for name, text in sorted(sources.items()):
        lines, total = code_lines(text), len(text.splitlines())
        if lines > limit:
            note = f" ({total} with docstrings)" if total > lines else ""
            found.append(f"{name}: {lines} lines{note}")
    return found


def function_lengths(name: str, source: str) -> dict[str, int]:
    """Every function of module `name` (methods and nested ones too, each by its
    qualified name) and its lines, from `def` to its last line: a decorator is
    not the function's body, a nested function counts in its own and its host's."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualified = f"{prefix}.{child.name}"
                if not isinstance(child, ast.ClassDef):
                    found[qualified] = (child.end_lineno or child.lineno) - child.lineno + 1
                visit(child, qualified)
            else:
                visit(child, prefix)

    visit(ast.parse(source), name)
    return found


def long_functions(sources: Mapping[str, str], limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """The functions over `limit` lines, each with its length."""
    return [
        f"{function}: {lines} lines"
        for name, text in sorted(sources.items())
        for function, lines in function_lengths(name, text).items()
        if lines > limit
    ]


# -- the package --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    return package_sources()


def test_no_import_cycle(sources: dict[str, str]) -> None:
    cycle = find_cycle(import_graph(sources))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_lower_layers_never_import_higher_ones(sources: dict[str, str]) -> None:
    assert upward_imports(import_graph(sources)) == []


def test_the_suite_and_the_process_layer_never_import_the_oracle(
    sources: dict[str, str],
) -> None:
    assert imports_of_the_oracle(import_graph(sources)) == []


def test_the_oracle_process_never_imports_the_implementation(sources: dict[str, str]) -> None:
    oracle = {n: text for n, text in sources.items() if within(n, ORACLE)}
    assert set(CHILD_ENTRY_POINTS) <= set(oracle)
    assert [where for n, text in oracle.items() for where in loads_outside_children(n, text)] == []


def test_events_are_declared_once(sources: dict[str, str]) -> None:
    from shmref.oracle.events import KINDS

    assert EVENTS_MODULE in sources
    assert [w for n, text in sources.items() for w in events_outside_their_module(n, text)] == []
    assert {cls.__module__ for cls in KINDS.values()} == {EVENTS_MODULE}


def test_every_module_has_a_layer(sources: dict[str, str]) -> None:
    assert [name for name in sources if layer_of(name) is None] == []


def test_every_module_is_under_400_lines(sources: dict[str, str]) -> None:
    assert too_long(sources) == []


def test_every_module_of_every_tree_is_within_its_bound() -> None:
    for tree, (limit, _imports) in TREES.items():
        assert too_long(package_sources(REPO / tree), limit) == [], f"{tree}/ over {limit} lines"


def test_no_function_of_the_wheel_is_over_80_lines() -> None:
    sources = {n: s for tree in WHEEL_TREES for n, s in package_sources(REPO / tree).items()}
    assert long_functions(sources) == [], (
        f"split each by the steps it walks through (under {MAX_FUNCTION_LINES} lines)"
    )


def test_the_trees_import_downward_and_without_a_cycle() -> None:
    graph = import_graph(tree_sources())
    assert {m.split(".")[0] for m in graph} == set(TREES)
    assert downward_between_trees(graph) == []
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_at_most_ten_modules_at_the_top() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top


def test_commands_are_run_from_one_dispatcher_not_stubs_at_the_top() -> None:
    assert stray_top_level(PACKAGE) == []


def stray_top_level(package: Path) -> list[str]:
    """Top-level modules other than the package, its commands, the contract
    and the plugin: a new command goes in shmref/__main__.py's COMMANDS."""
    return sorted(p.name for p in package.glob("*.py") if p.stem not in TOP_LEVEL)


def test_entry_modules_only_run_main_from_their_home(sources: dict[str, str]) -> None:
    """...after asking shmref.core.extras whether shmref[oracle] is installed."""
    for entry, home in ENTRY_MODULES.items():
        tree = ast.parse(sources[entry])
        imports = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert [(n.module, [a.name for a in n.names]) for n in imports] == [
            ("__future__", ["annotations"]),
            ("shmref.core.extras", ["require_oracle_extra"]),
            (home, ["main"]),
        ], entry


def test_the_wheel_lists_every_package() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    folders = {
        module_name(p.parent / "__init__.py")
        for p in PACKAGE.rglob("__init__.py")
        if "spec" not in p.parts
    }
    assert folders - listed == set()


def stray_public_names(module: ModuleType) -> list[str]:
    """The public names of `module` outside its `__all__`: a name without a
    leading underscore that is neither a module nor `from __future__`."""
    exported = set(getattr(module, "__all__", ()))
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, ModuleType)
        and type(value).__module__ != "__future__"
        and name not in exported
    )


def call_recording_in(folder: Path) -> list[str]:
    """The call-recording modules found in `folder`."""
    return sorted(p.stem for p in folder.glob("*.py") if p.stem in CALL_RECORDING)


def test_the_toolkit_exports_only_its_documented_names() -> None:
    testing = importlib.import_module("shmref.testing")
    assert stray_public_names(testing) == []
    assert all(hasattr(testing, name) for name in testing.__all__)
    assert call_recording_in(PACKAGE / "testing") == []
    assert call_recording_in(PACKAGE / "calls") == sorted(CALL_RECORDING)


def reexports(name: str, source: str) -> list[str]:
    """Names module `name` imports from shmref (or refimpl) and never uses
    itself: what others can only be importing from it, as from a facade.
    (A package's `__init__` is its public face and is not asked.)"""
    tree = ast.parse(source)
    imported: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] in ("shmref", "refimpl")
        ):
            imported.update({a.asname or a.name: str(node.module) for a in node.names})
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    return [f"{name}: {n} (from {imported[n]})" for n in sorted(set(imported) - used)]


def test_no_module_re_exports_what_it_imports(sources: dict[str, str]) -> None:
    """Import a name from its home: no module passes on another's names."""
    found = [
        line
        for name, source in sorted(sources.items())
        if not _is_package(name, sources)
        for line in reexports(name, source)
    ]
    assert found == []


def test_a_re_export_is_found() -> None:
    facade = (
        "from shmref.core.levels import FAIL, PASS\n"
        "from shmref.core.levels import LEVELS as ALL\n"
        "__all__ = ['FAIL', 'ALL']\n"
        "def ok(status: str) -> bool:\n"
        "    return status == PASS\n"
    )
    assert reexports("shmref.oracle.verdict", facade) == [
        "shmref.oracle.verdict: ALL (from shmref.core.levels)",
        "shmref.oracle.verdict: FAIL (from shmref.core.levels)",
    ]


TOOLKIT = "shmref.testing"


def toolkit_plumbing(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """What makes shmref.testing more than the implementers' toolkit: a module
    of it that its `__init__` does not reach (plumbing for someone else), or
    one the oracle or the suite-run plumbing (shmref.session) imports."""
    reached, todo = set(), [TOOLKIT]
    while todo:
        module = todo.pop()
        for target in graph.get(module, ()):
            if within(target, TOOLKIT) and target not in reached:
                reached.add(target)
                todo.append(target)
    stray = [
        f"{m} is not reached from {TOOLKIT}'s __init__"
        for m in sorted(graph)
        if within(m, TOOLKIT) and m != TOOLKIT and m not in reached
    ]
    return stray + [
        f"{m} imports {target}"
        for m, targets in sorted(graph.items())
        if within(m, "shmref.oracle") or within(m, "shmref.session")
        for target in sorted(targets)
        if within(target, TOOLKIT)
    ]


def test_the_toolkit_holds_the_toolkit_only(sources: dict[str, str]) -> None:
    assert toolkit_plumbing(import_graph(sources)) == []


def test_plumbing_in_the_toolkit_is_found() -> None:
    graph = {
        TOOLKIT: {"shmref.testing.machine"},
        "shmref.testing.machine": set(),
        "shmref.testing.shrinkbudget": set(),
        "shmref.oracle.worker": {"shmref.testing.shrinkbudget"},
    }
    assert toolkit_plumbing(graph) == [
        "shmref.testing.shrinkbudget is not reached from shmref.testing's __init__",
        "shmref.oracle.worker imports shmref.testing.shrinkbudget",
    ]


def is_dunder(path: Path) -> bool:
    return path.stem.startswith("__") and path.stem.endswith("__")


def top_names_below(package: Path) -> list[str]:
    """Names at the top of `package` (its modules and folders) that a module
    or folder below it also has: `shmref.findings` beside
    `shmref.docgen.findings` says neither which is which nor which to run."""
    top = {p.stem for p in package.glob("*.py") if not is_dunder(p)}
    top |= {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}
    below: dict[str, str] = {}
    for path in sorted(package.glob("*/**/*.py")):
        if path.name == "__init__.py":
            if path.parent.parent == package:
                continue  # a folder at the top: one of `top`
            name = path.parent.name
        elif is_dunder(path):
            continue
        else:
            name = path.stem
        below.setdefault(name, str(path.relative_to(package.parent)))
    return sorted(f"{name}: {below[name]}" for name in top & set(below))


def names_used_thrice(roots: Iterable[Path]) -> list[str]:
    """File names (dunder files excepted: __init__.py, __main__.py are
    Python's own) that three or more modules of the trees share."""
    where: dict[str, list[str]] = {}
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if not is_dunder(path):
                where.setdefault(path.name, []).append(str(path.relative_to(root.parent)))
    return sorted(f"{name}: {', '.join(paths)}" for name, paths in where.items() if len(paths) > 2)


def test_no_module_at_the_top_shares_its_name_with_one_below() -> None:
    assert top_names_below(PACKAGE) == []


def test_no_file_name_is_used_three_times() -> None:
    assert names_used_thrice(REPO / tree for tree in TREES) == []


# -- each check fails on a broken input --------------------------------------------------


def test_a_cycle_is_found() -> None:
    graph = {"shmref.a": {"shmref.b"}, "shmref.b": {"shmref.c"}, "shmref.c": {"shmref.a"}}
    assert find_cycle(graph) == ["shmref.a", "shmref.b", "shmref.c", "shmref.a"]
    assert find_cycle({"shmref.a": {"shmref.b"}, "shmref.b": set()}) is None


def test_a_function_level_import_is_an_import() -> None:
    modules = ["shmref", "shmref.core", "shmref.core.vocabulary", "shmref.store.driver"]
    source = (
        "from shmref.core import vocabulary\n"
        "def check():\n"
        "    from shmref.store.driver import Driver\n"
        "    return Driver\n"
    )
    edges = imports_of("shmref.core.paths", source, modules, is_package=False)
    assert edges == {"shmref.core.vocabulary", "shmref.store.driver"}
    graph = {"shmref.core.paths": edges, "shmref.store.driver": {"shmref.core.paths"}}
    assert find_cycle(graph) is not None


def test_importing_a_submodule_runs_its_package() -> None:
    modules = ["shmref", "shmref.session", "shmref.session.profiles", "shmref.oracle.worker"]
    edges = imports_of(
        "shmref.oracle.worker",
        "from shmref.session import profiles\n",
        modules,
        is_package=False,
    )
    assert edges == {"shmref.session", "shmref.session.profiles"}


def test_an_upward_import_is_found() -> None:
    graph = {"shmref.core.vocabulary": {"shmref.store.driver"}, "shmref.store.driver": set()}
    assert upward_imports(graph) == [
        "shmref.core.vocabulary (names and places) imports shmref.store.driver (driving a store)"
    ]
    assert upward_imports({"shmref.store.driver": {"shmref.core.vocabulary"}}) == []


def test_a_long_module_is_found() -> None:
    assert too_long({"shmref.big": "x = 1\n" * 401, "shmref.small": "x = 1\n"}) == [
        "shmref.big: 401 lines"
    ]
    documented = '"""A module\n\nsaid at length."""\n' + "def f() -> None:\n    'f.'\n" * 199
    assert too_long({"shmref.documented": documented}) == []  # 401 lines, 202 of docstrings
    code = "def f() -> None:\n    x = 1\n" * 201  # the same shape without docstrings
    assert too_long({"shmref.code": code}) == ["shmref.code: 402 lines"]
    assert too_long({"shmref.both": documented + code}) == [
        "shmref.both: 601 lines (803 with docstrings)"
    ]


def test_a_long_function_is_found() -> None:
    def function(name: str, lines: int, indent: str = "") -> str:
        body = "".join(f"{indent}    x = {k}\n" for k in range(lines - 1))
        return f"{indent}def {name}() -> None:\n{body}"

    assert long_functions({"shmref.a": function("fits", 80)}) == []
    assert long_functions({"shmref.a": function("long", 81)}) == ["shmref.a.long: 81 lines"]
    decorated = "@functools.cache\n@other\n" + function("fits", 80)  # decorators not counted
    assert long_functions({"shmref.a": decorated}) == []
    method = "class Server:\n" + function("handle", 81, "    ")
    assert long_functions({"shmref.b": method}) == ["shmref.b.Server.handle: 81 lines"]
    # a nested function is one of its own, and its lines are its host's too
    nested = "def host() -> None:\n" + function("inner", 81, "    ")
    assert long_functions({"shmref.c": nested}) == [
        "shmref.c.host: 82 lines",
        "shmref.c.host.inner: 81 lines",
    ]
    assert long_functions({"shmref.d": function("short", 20)}, limit=19) == [
        "shmref.d.short: 20 lines"
    ]


def test_a_tree_importing_upward_or_a_long_module_elsewhere_is_found() -> None:
    graph = {
        "refimpl.ring": {"shmref.core.paths"},
        "bench.store": {"proofs.steps", "shmref.core"},
        "proofs.steps": {"refimpl.allocator"},
    }
    assert downward_between_trees(graph) == [
        "bench.store imports proofs.steps",
        "refimpl.ring imports shmref.core.paths",
    ]
    modules = ["bench", "bench.store", "bench.common", "refimpl", "refimpl.ring"]
    source = "from bench.common import load\nimport refimpl.ring\n"
    edges = imports_of("bench.store", source, modules, is_package=False)
    assert edges == {"bench.common", "refimpl", "refimpl.ring"}  # its own package is loading
    cycle = find_cycle({"bench.a": {"bench.b"}, "bench.b": {"bench.a"}})
    assert cycle == ["bench.a", "bench.b", "bench.a"]
    assert too_long({"bench.big": "x = 1\n" * 451}, TREES["bench"][0]) == ["bench.big: 451 lines"]
    assert too_long({"bench.ok": "x = 1\n" * 450}, TREES["bench"][0]) == []


def test_the_suite_or_the_process_layer_importing_the_oracle_is_found() -> None:
    modules = [
        "shmref",
        "shmref.oracle",
        "shmref.oracle.testgroups",
        "shmref.core",
        "shmref.core.suitegroups",
        "shmref.suite.conftest",
        "shmref.process.channel",
    ]
    graph = {
        "shmref.suite.conftest": imports_of(
            "shmref.suite.conftest",
            "from shmref.core.suitegroups import TEST_GROUPS\n"
            "def marks():\n"
            "    from shmref.oracle.testgroups import group_of\n",
            modules,
            is_package=False,
        ),
        "shmref.process.channel": imports_of(
            "shmref.process.channel", "from shmref import oracle\n", modules, is_package=False
        ),
    }
    assert imports_of_the_oracle(graph) == [
        "shmref.process.channel imports shmref.oracle",
        "shmref.suite.conftest imports shmref.oracle",
        "shmref.suite.conftest imports shmref.oracle.testgroups",
    ]
    assert imports_of_the_oracle({"shmref.suite.conftest": {"shmref.core.suitegroups"}}) == []
    assert imports_of_the_oracle({"shmref.pytest_plugin": {"shmref.oracle.expectations"}}) == []


def test_an_implementation_loaded_in_the_oracles_process_is_found() -> None:
    child = (
        "def main(argv):\n"
        "    from shmref.seed.impl import load_impl\n"
        "    impl = load_impl(argv[0])\n"
    )
    assert loads_outside_children("shmref.oracle.worker", child) == []
    # the same entry point in a module the oracle's process runs, and a loader elsewhere
    assert loads_outside_children("shmref.oracle.hazardcheck", child) == [
        "shmref.oracle.hazardcheck:2 imports shmref.seed.impl",
        "shmref.oracle.hazardcheck:3 calls load_impl",
    ]
    source = (
        "import importlib\n"
        "from shmref.seed.impl import load_impl\n"
        "def judge(name):\n"
        "    return importlib.import_module(name), __import__(name)\n"
        "def main(argv):\n"
        "    return 0\n"
    )
    assert loads_outside_children("shmref.oracle.worker", source) == [
        "shmref.oracle.worker:2 imports shmref.seed.impl",
        "shmref.oracle.worker:4 calls import_module",
        "shmref.oracle.worker:4 calls __import__",
    ]


def test_an_event_kind_outside_the_events_module_is_found() -> None:
    typed = (
        "from shmref.oracle.events import Beat, Finished, parse\n"
        "def poll(events, line):\n"
        "    events.emit(Beat())\n"
        "    event = parse(line)\n"
        "    events.emit(event)\n"
        "    if isinstance(event, Finished):\n"
        "        return {'e': 1}.get('f')\n"
    )
    assert events_outside_their_module("shmref.oracle.isolation", typed) == []
    untyped = (
        "def poll(events, event):\n"
        "    events.emit('case', node='t', status='pass')\n"
        "    emit({'e': 'beat'})\n"
        "    if event['e'] == 'finish' or event.get('e') == 'start':\n"
        "        events.emit()\n"
        "class Mine(Event, kind='mine'):\n"
        "    pass\n"
    )
    assert events_outside_their_module("shmref.oracle.progress", untyped) == [
        "shmref.oracle.progress:2 emits no event instance",
        "shmref.oracle.progress:3 emits no event instance",
        "shmref.oracle.progress:4 reads an event's kind by its key",
        "shmref.oracle.progress:4 reads an event's kind by its key",
        "shmref.oracle.progress:5 emits no event instance",
        "shmref.oracle.progress:6 declares an event kind (Mine)",
    ]
    assert events_outside_their_module(EVENTS_MODULE, untyped) == []


def test_a_kind_declared_twice_is_refused() -> None:
    from dataclasses import dataclass

    from shmref.oracle.events import KINDS, Event

    with pytest.raises(TypeError, match="'beat' is declared twice"):

        @dataclass(frozen=True)
        class Again(Event, kind="beat"):
            pass

    assert KINDS["beat"].__name__ == "Beat"


def test_a_stray_public_name_or_call_recording_in_the_toolkit_is_found(tmp_path: Path) -> None:
    module = ModuleType("toolkit")
    exec("from __future__ import annotations\nimport os\nfrom pathlib import Path\n", vars(module))
    module.__all__ = ["machine_for"]  # type: ignore[attr-defined]
    module.machine_for = lambda: None  # type: ignore[attr-defined]
    module._private = 1  # type: ignore[attr-defined]
    assert stray_public_names(module) == ["Path"]
    (tmp_path / "machine.py").write_text("")
    assert call_recording_in(tmp_path) == []
    (tmp_path / "calltrace.py").write_text("")
    assert call_recording_in(tmp_path) == ["calltrace"]


def test_a_stub_at_the_top_is_found(tmp_path: Path) -> None:
    for name in ("__init__", "__main__", "conformance", "contract", "pytest_plugin"):
        (tmp_path / f"{name}.py").write_text("")
    assert stray_top_level(tmp_path) == []
    (tmp_path / "findings.py").write_text("from shmref.docgen.findings import main\n")
    assert stray_top_level(tmp_path) == ["findings.py"]


def test_a_top_name_below_or_a_name_used_thrice_is_found(tmp_path: Path) -> None:
    top = tmp_path / "pkg"
    for path in ("__init__.py", "__main__.py", "cli.py", "a/__init__.py", "a/__main__.py"):
        (top / path).parent.mkdir(parents=True, exist_ok=True)
        (top / path).write_text("")
    (top / "b" / "deep").mkdir(parents=True)
    (top / "b" / "__init__.py").write_text("")
    (top / "b" / "deep" / "__init__.py").write_text("")
    (top / "b" / "run.py").write_text("")
    assert top_names_below(top) == []
    (top / "b" / "deep" / "cli.py").write_text("")
    assert top_names_below(top) == ["cli: pkg/b/deep/cli.py"]
    (top / "a" / "b.py").write_text("")
    assert top_names_below(top) == ["b: pkg/a/b.py", "cli: pkg/b/deep/cli.py"]
    (top / "b" / "deep" / "a").mkdir()
    (top / "b" / "deep" / "a" / "__init__.py").write_text("")
    assert top_names_below(top)[0] == "a: pkg/b/deep/a/__init__.py"

    other = tmp_path / "other"
    other.mkdir()
    (other / "__init__.py").write_text("")
    (other / "run.py").write_text("")
    assert names_used_thrice([top, other]) == []  # __init__.py, __main__.py: Python's own
    (top / "a" / "run.py").write_text("")
    assert names_used_thrice([top, other]) == ["run.py: pkg/a/run.py, pkg/b/run.py, other/run.py"]
