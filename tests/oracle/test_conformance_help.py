"""`python -m shmref.conformance --help`, docs/conformance.md and README.md
state the oracle's defaults as its code has them (issue 35): every default
that the help or the docs' option table states is the parser's (or, for
`--out`, what `default_out` makes), and the two report folders are named
the same everywhere. The check is shown to fail on a help and a table
that disagree with the code."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from shmref.oracle import cli

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "conformance.md"
# "(default 900: ...)", "(default 10)", "default: all)", "(default ./x/<module>; ...)"
STATED = re.compile(r"default:? ([^);:]+)")


class _Captured(Exception):
    pass


def the_parser(monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The parser `main` builds, taken as it parses (nothing runs)."""
    seen: list[argparse.ArgumentParser] = []

    def capture(self: argparse.ArgumentParser, *_args: object, **_kw: object) -> None:
        seen.append(self)
        raise _Captured

    monkeypatch.setattr(cli.OneLineParser, "parse_args", capture)
    with pytest.raises(_Captured):
        cli.main([])
    return seen[0]


def code_defaults(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each option's default as the code has it, written as the help writes it."""
    found = {}
    for action in parser._actions:
        option = max(action.option_strings, key=len, default="")
        if option == "--out":
            found[option] = f"./{cli.OUT_INSTALLED}/<module>"
        elif option == "--level":
            assert action.default is None  # main runs every level then
            found[option] = "all"
        elif option == "--workers":
            assert action.default is None  # default_workers(): one per core then
            found[option] = "one per core"
        elif option == "--shrink-budget":
            assert action.default is None  # main picks the budget by --quick then
            found[option] = f"{cli.DEFAULT_SHRINK_BUDGET}, with --quick {cli.QUICK_SHRINK_BUDGET}"
        elif isinstance(action.default, float):
            found[option] = f"{action.default:g}"
        elif isinstance(action.default, str) and action.choices:
            found[option] = action.default
        elif isinstance(action.default, int) and not isinstance(action.default, bool):
            found[option] = str(action.default)
    return found


def help_defaults(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each option's default as its --help line states it."""
    stated = {}
    for action in parser._actions:
        option = max(action.option_strings, key=len, default="")
        match = STATED.search(action.help or "")
        if match:
            stated[option] = match.group(1).strip("` ")
    return stated


def docs_defaults(text: str) -> dict[str, str]:
    """Each option's default as docs/conformance.md's option table states it."""
    stated = {}
    for line in text.splitlines():
        row = re.match(r"\| `(--[a-z-]+)[^`]*` \| (.*) \|$", line)
        if row:
            match = STATED.search(row.group(2))
            if match:
                stated[row.group(1)] = match.group(1).strip("` ")
    return stated


def disagreements(code: dict[str, str], stated: dict[str, str], where: str) -> list[str]:
    """A stated default that is not the code's, or an option whose default is not stated."""
    return [
        f"{where}: {option} says default {stated.get(option)!r}, the code has {value!r}"
        for option, value in sorted(code.items())
        if stated.get(option) != value
    ] + [f"{where}: {option} states a default the code lacks" for option in stated.keys() - code]


def test_help_states_the_code_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = the_parser(monkeypatch)
    code = code_defaults(parser)
    assert {"--out", "--timeout", "--call-timeout", "--level"} <= code.keys()
    assert disagreements(code, help_defaults(parser), "--help") == []


def test_docs_state_the_code_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    code = code_defaults(the_parser(monkeypatch))
    stated = docs_defaults(DOCS.read_text(encoding="utf-8"))
    code.pop("--level")  # the docs' table says "run only the checks of one level"
    assert disagreements(code, stated, "docs/conformance.md") == []


def test_the_report_folder_is_named_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    installed, in_checkout = f"{cli.OUT_INSTALLED}/<module>", f"{cli.OUT_IN_CHECKOUT}/<module>"
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    shown = capsys.readouterr().out
    # the description names no folder of its own: only --out's help does, once each
    assert shown.count(installed) == 1 and shown.count(in_checkout) == 1, shown
    docs = DOCS.read_text(encoding="utf-8")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert f"`./{installed}`; `{in_checkout}` in a shmref checkout" in docs
    for text in (docs, readme):  # examples run from the user's own repository
        for folder in re.findall(r"report[^\n]*?(\S*conformance/your_module)", text):
            assert folder.lstrip("./") == f"{cli.OUT_INSTALLED}/your_module", folder
    # what main does without --out
    assert cli.default_out("m") == REPO / cli.OUT_IN_CHECKOUT / "m"
    monkeypatch.setattr(cli, "checkout", lambda: None)
    monkeypatch.chdir(tmp_path)
    assert cli.default_out("m") == tmp_path / cli.OUT_INSTALLED / "m"


def test_a_wrong_default_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = the_parser(monkeypatch)
    code = code_defaults(parser)
    broken = parser.format_help()  # the parser's own help, one default changed
    for action in parser._actions:
        if "--timeout" in action.option_strings:
            action.help = (action.help or "").replace(f"default {code['--timeout']}", "default 300")
    assert broken != parser.format_help()
    assert disagreements(code, help_defaults(parser), "--help") == [
        f"--help: --timeout says default '300', the code has '{code['--timeout']}'"
    ]
    table = "| `--out DIR` | where (default `build/conformance/<module>`) |\n"
    assert disagreements({"--out": code["--out"]}, docs_defaults(table), "docs") == [
        f"docs: --out says default 'build/conformance/<module>', the code has '{code['--out']}'"
    ]
    assert disagreements({}, {"--quick": "1"}, "docs") == [
        "docs: --quick states a default the code lacks"
    ]
