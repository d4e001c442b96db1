"""The environment carries only what a user sets: the SHMREF_* names in the
code and docs are exactly those of docs/conformance.md's table
"Environment variables", and that table lists each with what it does and
its default. Everything else a run needs goes through its configuration
(shmref.core.runconfig). Each check is shown to fail on a broken input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
USER_SET = (
    "SHMREF_SEED",
    "SHMREF_IMPL",
    "SHMREF_CACHE_DIR",
    "SHMREF_PROFILE",
    "SHMREF_EXEC_TIMEOUT",
)
PREFIX = "SHMREF" + "_"  # spelled apart so that this file names no variable by accident
# a name, or the prefix alone (a name built at run time); `SHMREF_*` is the family, no name
MENTION = re.compile(re.escape(PREFIX) + r"(?!\*)[A-Za-z0-9_]*")
TREES = ("shmref", "refimpl", "proofs", "bench", "vllmcheck", "tests", "examples", ".ci", "docs")
FILES = ("Makefile", "README.md", "DESIGN.md", "pyproject.toml")
SKIPPED = {".git", "__pycache__", "build", "target", "node_modules", ".venv", "traces"}
TEXT = {".py", ".md", ".toml", ".cfg", ".ini", ".sh", ".yml", ".yaml", ".txt", ".rs", ".js"}
TEXT |= {".c", ".h", ".json", ".html", ".j2", ".tla", ""}
TABLE_START = "<!-- environment variables:"
TABLE_END = "<!-- end of environment variables -->"


def files(repo: Path) -> list[Path]:
    found = [repo / name for name in FILES if (repo / name).is_file()]
    for tree in TREES:
        for path in sorted((repo / tree).rglob("*")):
            parts = set(path.relative_to(repo).parts)
            if path.is_file() and path.suffix in TEXT and not parts & SKIPPED:
                found.append(path)
    return found


def unknown_names(repo: Path) -> list[str]:
    """Every mention of a SHMREF_* name no user sets, as `path:line: NAME`
    (the prefix alone, as in a name built at run time, counts too)."""
    problems = []
    for path in files(repo):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if PREFIX not in text:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for name in MENTION.findall(line):
                if name not in USER_SET:
                    problems.append(f"{path.relative_to(repo)}:{number}: {name}")
    return sorted(problems)


def table_rows(text: str) -> dict[str, list[str]]:
    """docs/conformance.md's table: variable -> (what it does, default)."""
    table = text.split(TABLE_START)[1].split(TABLE_END)[0]
    rows = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| `"):
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_no_other_shmref_variable_is_mentioned() -> None:
    assert unknown_names(REPO) == []


def test_a_variable_of_the_wiring_is_caught(tmp_path: Path) -> None:
    """The broken input: a module that reads a variable no user sets."""
    (tmp_path / "shmref").mkdir()
    module = tmp_path / "shmref" / "sink.py"
    module.write_text(f'import os\nwhere = os.environ.get("{PREFIX}TRACE_DIR")\n')
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(f"set `{PREFIX}SEED` and f'{PREFIX}{{x}}'\n")
    assert unknown_names(tmp_path) == [
        f"docs/page.md:1: {PREFIX}",
        f"shmref/sink.py:2: {PREFIX}TRACE_DIR",
    ]


def test_the_docs_table_lists_every_variable_a_user_sets() -> None:
    rows = table_rows((REPO / "docs" / "conformance.md").read_text())
    assert sorted(rows) == sorted(USER_SET)
    for name, (what, default) in rows.items():
        assert what and default, name
    code = "\n".join(p.read_text() for p in (REPO / "shmref").rglob("*.py"))
    for name in USER_SET:  # each is read somewhere, not only listed
        assert f'"{name}"' in code, name


def test_a_table_missing_a_variable_is_caught() -> None:
    text = (REPO / "docs" / "conformance.md").read_text()
    broken = "\n".join(line for line in text.splitlines() if "`SHMREF_PROFILE`" not in line)
    with pytest.raises(AssertionError):
        assert sorted(table_rows(broken)) == sorted(USER_SET)


def test_the_readme_links_to_the_table() -> None:
    assert "docs/conformance.md#environment-variables" in (REPO / "README.md").read_text()


# -- the run's configuration: the one way a child learns what the run asks ----------------------


def test_a_run_configuration_goes_through_its_file(tmp_path: Path) -> None:
    from shmref.core.runconfig import RunConfig, current_run, running

    config = RunConfig(trace_dir="t", calls_file="c", trace_passed=True, max_line=1024)
    assert RunConfig.read(config.write(tmp_path / "run.json")) == config
    assert current_run() is None  # outside a run
    with running(config):
        assert current_run() == config
    assert current_run() is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "not JSON"),
        ("[1]", "a JSON object, not list"),
        ('{"trace_dir": "t", "colour": 1}', "unknown field(s) in a run configuration: colour"),
        ('{"max_line": 0}', "max_line must be a positive number, not 0"),
        ('{"hello_timeout": "30"}', "hello_timeout must be a positive number, not '30'"),
        ('{"trace_passed": "yes"}', "trace_passed must be true or false"),
    ],
)
def test_a_bad_run_configuration_is_one_line(tmp_path: Path, text: str, says: str) -> None:
    from shmref.core.runconfig import RunConfig, RunConfigError

    path = tmp_path / "run.json"
    path.write_text(text)
    with pytest.raises(RunConfigError) as caught:
        RunConfig.read(path)
    assert says in str(caught.value) and str(path) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_pytest_refuses_a_bad_run_file_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "run.json").write_text('{"max_stderr": -1}')
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--shmref-run"]
        + [str(tmp_path / "run.json"), str(tmp_path / "test_x.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "--shmref-run: " in proc.stderr and "max_stderr must be a positive number" in proc.stderr
    assert "Traceback" not in proc.stderr


# a program that answers its hello with a line that is not JSON
NOT_JSON = "import sys; sys.stdout.write('hello?\\n'); sys.stdout.flush(); sys.stdin.read()"
HOOKED = """import sys
from pathlib import Path
from shmref.oracle.worker import Events
from shmref.process import channel
events = Events(Path(sys.argv[1]))
if sys.argv[2] == "hook":
    channel.on_failure(events.program_failed)
channel.Program([sys.executable, "-c", {program!r}], "exec:bad")
"""


@pytest.mark.parametrize("hook", ["hook", "none"])
def test_a_program_failure_leaves_through_the_workers_events(tmp_path: Path, hook: str) -> None:
    """The process layer hands a failure to the worker's hook; the worker's
    Events writes it as a ProgramFailed event (the only writer of that file)
    and the exit code repeats the status. Without the hook (the broken input) it is raised
    and nothing is written."""
    import subprocess
    import sys

    from shmref.oracle.events import ProgramFailed, parse
    from shmref.process.channel import ERROR_EXIT

    events = tmp_path / "events.jsonl"
    code = HOOKED.format(program=NOT_JSON)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(events), hook], capture_output=True, text=True, timeout=60
    )
    lines = [parse(line) for line in events.read_text().splitlines()]
    if hook == "hook":
        assert proc.returncode == ERROR_EXIT, proc.stderr
        [failed] = lines
        assert isinstance(failed, ProgramFailed) and failed.status == "ERROR"
        assert failed.detail.startswith("shmref.process: ERROR: exec:bad: ")
    else:
        assert proc.returncode == 1 and "ProtocolError" in proc.stderr
        assert lines == []
