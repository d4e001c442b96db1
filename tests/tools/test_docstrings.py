"""Every public name of refimpl, shmref.contract, shmref.testing and the commands
has a docstring (issue 43): `make lint` runs ruff's pydocstyle rules for a
missing one on the paths the Makefile lists in DOCUMENTED. These tests run
that very command, as `make -n lint` expands it, and show it failing, naming
the name, on a copy of a module with one docstring taken out."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from tests.tools.makelint import lint_command

REPO = Path(__file__).resolve().parents[2]
RULES = "D100,D101,D102,D103,D104,D106"  # missing docstrings; D105, D107: see the Makefile


def docstring_check() -> list[str]:
    return lint_command("--select=D1", "docstring check")


def options_and_paths(command: list[str]) -> tuple[list[str], list[str]]:
    """The command up to its paths, and the paths (every option is `--name=value`)."""
    start = command.index("check") + 1
    while start < len(command) and command[start].startswith("-"):
        start += 1
    return command[:start], command[start:]


def run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)


def test_the_check_selects_missing_docstrings_on_existing_paths() -> None:
    """The rules are the missing-docstring ones; every listed path exists (ruff
    only warns about a missing one and passes), and the three packages are listed."""
    options, paths = options_and_paths(docstring_check())
    assert f"--select={RULES}" in options
    missing = [p for p in paths if not (REPO / p).exists()]
    assert not missing, f"the Makefile's DOCUMENTED names paths that do not exist: {missing}"
    for package in ("refimpl", "shmref/contract.py", "shmref/testing"):
        assert package in paths, f"{package} is not in the Makefile's DOCUMENTED"


def test_every_public_name_is_documented() -> None:
    done = run(docstring_check())
    assert done.returncode == 0, done.stdout + done.stderr


def without_docstring(source: str, dotted: str) -> str:
    """`source` with the docstring of the class or function `dotted` taken out
    (`...` in its place when it was the whole body)."""
    scope: ast.AST = ast.parse(source)
    for part in dotted.split("."):
        scope = next(
            node
            for node in ast.iter_child_nodes(scope)
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == part
        )
    assert isinstance(scope, (ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(scope)
    doc = scope.body[0]
    assert doc.end_lineno is not None
    lines = source.splitlines(keepends=True)
    body = [" " * doc.col_offset + "...\n"] if len(scope.body) == 1 else []
    return "".join(lines[: doc.lineno - 1] + body + lines[doc.end_lineno :])


@pytest.mark.parametrize(
    ("module", "name", "rule", "shown"),
    [
        ("refimpl/handle.py", "sign", "D103", "def sign("),
        ("refimpl/handle.py", "ShmObjectStorageHandle", "D101", "class ShmObjectStorageHandle"),
        ("shmref/contract.py", "Storage.put", "D102", "def put("),
    ],
)
def test_a_missing_docstring_fails_naming_the_name(
    tmp_path: Path, module: str, name: str, rule: str, shown: str
) -> None:
    options, _paths = options_and_paths(docstring_check())
    copy = tmp_path / Path(module).name
    copy.write_text((REPO / module).read_text())
    assert run([*options, str(copy)]).returncode == 0, "the copy as it is passes"
    copy.write_text(without_docstring((REPO / module).read_text(), name))
    done = run([*options, str(copy)])
    assert done.returncode == 1, done.stdout + done.stderr
    assert rule in done.stdout and shown in done.stdout and str(copy) in done.stdout, done.stdout
