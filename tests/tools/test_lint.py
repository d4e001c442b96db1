"""Two of `make lint`'s checks shown failing on broken inputs (issue 51): ruff's
bound on a function's statements and branches (PLR0915, PLR0912, with
pyproject.toml's thresholds, on shmref/ and refimpl/ only), and vulture's
dead-code check, run as `make -n lint` expands it. The house's exact bound on a
function, 80 lines, is tests/tools/test_architecture.py's."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.tools.makelint import lint_command

REPO = Path(__file__).resolve().parents[2]
ALLOWLIST = "vulture_allowlist.py"
SIZE_RULES = ("PLR0912", "PLR0915")


def run(command: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=REPO, input=stdin, capture_output=True, text=True, timeout=120
    )


# -- ruff: statements and branches ----------------------------------------------------


def ruff_lint() -> dict[str, Any]:
    """pyproject.toml's [tool.ruff.lint]."""
    config: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text())
    return dict(config["tool"]["ruff"]["lint"])


def ruff_on(path: str, source: str) -> subprocess.CompletedProcess[str]:
    """ruff's size rules on `source` as if it were the checkout's file `path` (so
    pyproject.toml's settings and per-file-ignores apply), nothing written."""
    select = ",".join(SIZE_RULES)
    command = [sys.executable, "-m", "ruff", "check", f"--select={select}", "--no-cache"]
    return run([*command, "--output-format=concise", f"--stdin-filename={path}", "-"], source)


def statements(n: int) -> str:
    """A function of `n` statements (its def is not one of them)."""
    return "def walk() -> None:\n" + "".join(f"    x{k} = {k}\n" for k in range(n))


def branches(n: int) -> str:
    """A function of `n` branches (an if/elif chain; the def and return are not)."""
    arms = [f"    {'if' if k == 0 else 'elif'} x == {k}:\n        y = {k}\n" for k in range(n)]
    return "def pick(x: int) -> int:\n    y = 0\n" + "".join(arms) + "    return y\n"


def test_the_settings_are_the_argued_ones() -> None:
    """pyproject.toml argues these two numbers: a change says why, there."""
    assert ruff_lint()["pylint"] == {"max-statements": 50, "max-branches": 20}
    assert set(SIZE_RULES) <= set(ruff_lint()["select"])


@pytest.mark.parametrize(
    ("make", "limit", "rule"),
    [(statements, "max-statements", "PLR0915"), (branches, "max-branches", "PLR0912")],
)
def test_ruff_fails_a_function_over_the_limit_in_the_wheels_code(
    make: Callable[[int], str], limit: str, rule: str
) -> None:
    bound = ruff_lint()["pylint"][limit]
    for path in ("shmref/oracle/new.py", "refimpl/new.py"):
        fits = ruff_on(path, make(bound))
        assert fits.returncode == 0, fits.stdout + fits.stderr
        over = ruff_on(path, make(bound + 1))
        assert over.returncode == 1, over.stdout + over.stderr
        assert rule in over.stdout and path in over.stdout, over.stdout
    # the other trees are not held to it (pyproject.toml says why)
    assert ruff_on("tests/test_new.py", make(bound + 1)).returncode == 0


def test_no_module_of_the_wheel_is_let_off_the_size_rules() -> None:
    """The only per-file-ignore of the size rules is everything outside
    shmref/ and refimpl/ (tests tell one scenario each, top to bottom)."""
    ignores = dict(ruff_lint()["per-file-ignores"])
    assert ignores.pop("!{shmref,refimpl}/**") == list(SIZE_RULES)
    assert all(not set(rules) & set(SIZE_RULES) for rules in ignores.values())


# -- vulture: dead code -----------------------------------------------------------------


def dead_code_check() -> list[str]:
    return lint_command("-m vulture", "dead-code check")


def options_and_paths(command: list[str]) -> tuple[list[str], list[str]]:
    """The command up to its paths, and the paths (every option takes one value)."""
    start = command.index("vulture") + 1
    while start < len(command) and command[start].startswith("-"):
        start += 2
    return command[:start], command[start:]


def test_the_check_reads_the_wheels_code_at_80_percent_with_the_allowlist() -> None:
    options, paths = options_and_paths(dead_code_check())
    assert options[-2:] == ["--min-confidence", "80"]
    assert paths == ["shmref", "refimpl", ALLOWLIST]


def test_there_is_no_dead_code() -> None:
    done = run(dead_code_check())
    assert done.returncode == 0, done.stdout + done.stderr


def test_each_allowed_name_is_needed_and_says_who_uses_it() -> None:
    """Without the allow-list, vulture names each of its names (an entry no
    longer needed goes); each entry's comment says who uses the name."""
    options, paths = options_and_paths(dead_code_check())
    source = (REPO / ALLOWLIST).read_text()
    names = [
        node.value.id
        for node in ast.parse(source).body
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Name)
    ]
    assert names, "an empty allow-list: remove it and its mention in the Makefile"
    for line in source.splitlines():
        if line.split("#")[0].strip() in names:
            assert "#" in line and len(line.split("#", 1)[1].strip()) > 20, line
    done = run([*options, *(p for p in paths if p != ALLOWLIST)])
    assert done.returncode == 3, done.stdout + done.stderr  # vulture: dead code found
    for name in names:
        assert f"'{name}'" in done.stdout, f"{name} is no longer needed in {ALLOWLIST}"


def test_dead_code_fails_the_check(tmp_path: Path) -> None:
    options, _paths = options_and_paths(dead_code_check())
    module = tmp_path / "module.py"
    module.write_text("import os\n\n\ndef f(x: int, unused: int) -> int:\n    return x\n")
    done = run([*options, str(module)])
    assert done.returncode == 3, done.stdout + done.stderr
    assert "unused import 'os'" in done.stdout and "unused variable 'unused'" in done.stdout
    module.write_text("def f(x: int) -> int:\n    return x\n    print(x)\n")
    done = run([*options, str(module)])
    assert done.returncode == 3 and "unreachable code after 'return'" in done.stdout, done.stdout
    module.write_text("def f(x: int) -> int:\n    return x\n")
    assert run([*options, str(module)]).returncode == 0


def test_an_unused_function_is_below_the_checks_confidence(tmp_path: Path) -> None:
    """What 80% leaves to a sweep by hand (`--min-confidence 60`): an unused
    function, which vulture is only 60% sure of (pytest, Hypothesis, a getattr or
    a template may call it by name)."""
    options, _paths = options_and_paths(dead_code_check())
    module = tmp_path / "module.py"
    module.write_text("def never_called() -> int:\n    return 1\n")
    assert run([*options, str(module)]).returncode == 0
    done = run([*options[:-1], "60", str(module)])
    assert done.returncode == 3 and "unused function 'never_called'" in done.stdout, done.stdout
