"""`python -m shmref COMMAND`: every command in one dispatcher (shmref/__main__.py).
Alone or with an unknown command it lists the commands, one line each, and
exits 2; each command's module has the `main` it runs, and `--help` works
through it."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from shmref.__main__ import COMMANDS, main


def test_alone_it_lists_every_command_one_line_each_and_exits_2() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "shmref"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    for name, (_module, job) in COMMANDS.items():
        assert [line for line in done.stderr.splitlines() if line.split()[:1] == [name]] == [
            f"  {name:<{max(map(len, COMMANDS))}}  {job}"
        ]


def test_an_unknown_command_is_named_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chek"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("shmref: unknown command 'chek'")
    assert "  check " in err


def test_help_lists_the_commands_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "  conformance " in capsys.readouterr().out


def test_the_documented_commands_are_all_there() -> None:
    expected = {"conformance", "check", "deep", "findings", "fuzz", "itf", "vocabulary", "render"}
    assert set(COMMANDS) == expected


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_runs_its_modules_main_and_has_help(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    module, _job = COMMANDS[name]
    assert callable(importlib.import_module(module).main)
    try:
        code = main([name, "--help"])
    except SystemExit as leaving:  # argparse's --help
        code = int(leaving.code or 0)
    assert code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:")
    assert (f"shmref {name}" in out) or (name == "conformance" and "shmref.conformance" in out)
