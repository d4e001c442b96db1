"""`pip install shmref` is refimpl and the contract; the oracle is the extra
`shmref[oracle]` (shmref.core.extras). Here the extra is made missing for
real: each run is a fresh interpreter whose path starts with a folder of
packages named like the extra's modules that raise ModuleNotFoundError on
import, as an install without them would. Every entry point then says one
line naming the extra and exits 2; refimpl and the contract import without
loading any of the extra's modules; a pytest session that does not ask for
shmref is left alone. Each checker is shown to fail on a broken input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from shmref.core import extras

REPO = Path(__file__).resolve().parents[2]
# the modules of the extra's distributions and what they load (pytest's own package)
EXTRA_TOP_LEVEL = {*extras.MODULES, "_pytest"}


def without(blocked: Sequence[str], folder: Path) -> dict[str, str]:
    """An environment in which each of `blocked` does not import."""
    for name in blocked:
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "__init__.py").write_text(
            f"raise ModuleNotFoundError({f'No module named {name!r}'!r}, name={name!r})\n"
        )
    env = {k: v for k, v in os.environ.items() if k != "SHMREF_IMPL"}
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(REPO)])
    return env


def run(argv: Sequence[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def says_one_line(done: subprocess.CompletedProcess[str], missing: str) -> str | None:
    """What is wrong with `done` as the missing-extra answer (None: it is right):
    exit 2, nothing on stdout, one line on stderr naming the extra and `missing`."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    if done.returncode != 2:
        return f"exit {done.returncode}, not 2: {done.stderr[-400:]}"
    if "Traceback" in done.stderr or len(lines) != 1 or done.stdout.strip():
        return f"not one line: stdout {done.stdout[-200:]!r}, stderr {done.stderr[-400:]!r}"
    if extras.INSTALL not in lines[0] or f"missing: {missing}" not in lines[0]:
        return f"the line does not name {extras.INSTALL} and {missing}: {lines[0]}"
    return None


PLUGIN = ["-m", "pytest", "--shmref-impl", "refimpl", "--pyargs", "shmref.suite"]
COMMANDS = [
    ["-m", "shmref.conformance", "--impl", "refimpl"],
    ["-m", "shmref.conformance", "--help"],
    *(
        ["-m", "shmref", name, "--help"]
        for name in ("itf", "findings", "check", "deep", "vocabulary", "fuzz", "conformance")
    ),
    ["-m", "shmref", "render", "."],
    PLUGIN,
    ["-m", "pytest", "--pyargs", "shmref.suite", "-m", "seed_compatible"],
    ["-m", "pytest", "-n", "2", "--shmref-impl", "refimpl", "--pyargs", "shmref.suite"],
    ["-m", "pytest", str(REPO / "shmref" / "suite" / "test_ring.py")],
]


def shown(argv: list[str]) -> str:
    return " ".join(Path(word).name for word in argv[1:4])


# each command without Hypothesis; a few without jinja2 alone (the extra's module
# that only the report needs)
CASES = [(argv, "hypothesis") for argv in COMMANDS] + [
    (argv, "jinja2")
    for argv in COMMANDS
    if argv[1] in ("shmref.conformance", "shmref.render") or argv == PLUGIN
]


@pytest.mark.parametrize(
    ("argv", "blocked"), CASES, ids=lambda v: v if isinstance(v, str) else shown(v)
)
def test_an_entry_point_without_the_extra_says_one_line(
    argv: list[str], blocked: str, tmp_path: Path
) -> None:
    env = without([blocked], tmp_path / "blocked")
    if argv[1] == "pytest":
        # hypothesis's own pytest plugin goes with it in a real install without it
        argv = [*argv, "-p", "no:hypothesispytest", "-p", "no:cacheprovider"]
    problem = says_one_line(run(argv, env, tmp_path), blocked)
    assert problem is None, problem


def test_a_traceback_is_not_the_one_line(tmp_path: Path) -> None:
    """The checker above fails on what the entry points did before: the
    ImportError from deep inside (and on a line that names no extra)."""
    env = without(["jinja2"], tmp_path / "blocked")
    deep = run(["-c", "import shmref.render.html"], env, tmp_path)
    assert "Traceback" in deep.stderr
    assert says_one_line(deep, "jinja2") is not None
    vague = subprocess.CompletedProcess([], 2, "", "shmref: something is missing\n")
    assert "does not name" in str(says_one_line(vague, "jinja2"))


def test_a_pytest_session_that_does_not_ask_for_shmref_is_left_alone(tmp_path: Path) -> None:
    """shmref's plugin is loaded in every pytest session (pytest11): without
    Hypothesis, an unrelated project's tests still run."""
    env = without(["hypothesis", "jinja2"], tmp_path / "blocked")
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "test_theirs.py").write_text("def test_theirs():\n    assert True\n")
    argv = ["-m", "pytest", "-q", "-p", "no:hypothesispytest", "-p", "no:cacheprovider", "."]
    done = run(argv, env, tmp_path / "project")
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr
    # the same session asking for shmref ($SHMREF_IMPL) is stopped: the check can fail
    asked = run(argv, {**env, "SHMREF_IMPL": "refimpl"}, tmp_path / "project")
    assert says_one_line(asked, "hypothesis, jinja2") is None, asked.stderr


def loaded_by(statement: str) -> set[str]:
    """The extra's modules that `statement` loads in a fresh interpreter."""
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return {name.split(".")[0] for name in json.loads(done.stdout)} & EXTRA_TOP_LEVEL


def test_refimpl_and_the_contract_load_none_of_the_extra() -> None:
    assert loaded_by("import refimpl, shmref, shmref.contract, shmref.core.extras") == set()
    assert loaded_by("import shmref.core.tables") == {"tabulate"}  # the check can fail


def test_refimpl_works_without_the_extra(tmp_path: Path) -> None:
    env = without(list(extras.MODULES), tmp_path / "blocked")
    code = (
        "import refimpl\n"
        "ring = refimpl.SingleWriterShmRingBuffer(4096, create=True)\n"
        "try:\n"
        "    store = refimpl.SingleWriterShmObjectStorage(1024, 1, ring)\n"
        "    address, monotonic_id = store.put('k', [1, 'two'])\n"
        "    assert store.get(address, monotonic_id) == [1, 'two']\n"
        "    print(store.is_cached('k'))\n"
        "finally:\n"
        "    ring.close()\n"
    )
    done = run(["-c", code], env, tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr


def extra_of(pyproject: str) -> dict[str, list[str]]:
    """Each extra's distributions, as the module names they import as."""
    found = tomllib.loads(pyproject)["project"]["optional-dependencies"]
    return {
        extra: [Requirement(r).name.lower().replace("-", "_") for r in requirements]
        for extra, requirements in found.items()
    }


def test_the_extra_and_its_module_list_agree() -> None:
    """pyproject's `oracle` extra is what shmref.core.extras checks for, the
    base dependencies are msgpack alone, and `dev` (make setup) pulls in the extra."""
    text = (REPO / "pyproject.toml").read_text()
    assert extra_of(text)["oracle"] == list(extras.MODULES)
    assert tomllib.loads(text)["project"]["dependencies"] == ["msgpack>=1.0"]
    assert "shmref[oracle]" in tomllib.loads(text)["project"]["optional-dependencies"]["dev"]
    broken = text.replace('"jinja2>=3.1,<4",', '"jinja2>=3.1,<4", "rich>=13",')
    assert extra_of(broken)["oracle"] != list(extras.MODULES)  # the check can fail


def test_the_toolkit_without_the_extra_is_an_import_error_naming_it(tmp_path: Path) -> None:
    """`import shmref.testing` (an implementer's own tests) is a library
    import: an ImportError, whose message is the one line."""
    env = without(["hypothesis"], tmp_path / "blocked")
    code = "try:\n    import shmref.testing\nexcept ImportError as exc:\n    print(exc)\n"
    done = run(["-c", code], env, tmp_path)
    assert extras.INSTALL in done.stdout and "missing: hypothesis" in done.stdout, done
