"""The Python examples of docs/conformance.md run as written, with
`your_module` standing for refimpl, and fail when an example is wrong."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

import refimpl

DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def run_example(source: str, module: object, folder: Path) -> None:
    sys.modules["your_module"] = module  # type: ignore[assignment]
    try:
        code = compile(source, f"{DOC.name} example", "exec")
        namespace: dict[str, object] = {"__name__": "docs_example"}
        cwd = Path.cwd()
        os.chdir(folder)
        try:
            exec(code, namespace)
        finally:
            os.chdir(cwd)
    finally:
        del sys.modules["your_module"]


def test_the_doc_has_the_three_building_block_examples():
    joined = "\n".join(EXAMPLES)
    assert len(EXAMPLES) >= 3
    for name in ("machine_for", "replay", "record", "validate"):
        assert name in joined, name


@pytest.mark.tlc
@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_example_runs_on_refimpl(index, tmp_path):
    run_example(EXAMPLES[index], refimpl, tmp_path)


@pytest.mark.tlc
def test_an_example_fails_on_a_broken_store(tmp_path):
    """The replay example is not vacuous: on a mutant of refimpl it fails."""
    from shmref.seed.mutants import build_mutant

    replay_example = next(e for e in EXAMPLES if "replay(" in e)
    with pytest.raises(AssertionError):
        run_example(replay_example, build_mutant("get_cached_not_counted"), tmp_path)


# The commands the README and docs/conformance.md show, as CI runs them on the
# installed wheel (.ci/wheel-check) with `your_module` replaced (by refimpl or the seed).
SHOWN = (
    "python -m shmref.conformance --impl your_module",
    "pytest --shmref-impl your_module --pyargs shmref.suite",
    "pytest --shmref-impl seed --pyargs shmref.suite -m seed_compatible",
)


def runs(command: str, script: str) -> bool:
    """Every word of `command` (but `python`) in one `"$py" ...` invocation of the script."""
    words = [w for w in command.split() if w != "python"]
    return any(all(w in chunk.split() for w in words) for chunk in script.split('"$py"')[1:])


def test_readme_and_docs_show_the_commands_ci_runs_on_the_wheel():
    root = DOC.parents[1]
    script = " ".join((root / ".ci" / "wheel-check").read_text().replace("\\\n", " ").split())
    assert not runs("pytest --shmref-impl refimpl --pyargs shmref.nothing", script)  # can fail
    for command in SHOWN:
        assert any(  # on refimpl, or on the seed, whose verdict has both outcomes
            runs(command.replace("your_module", module), script) for module in ("refimpl", "seed")
        ), f"CI does not run {command}"
        for doc in (root / "README.md", DOC):
            assert command in " ".join(doc.read_text().split()), f"{doc.name} lacks: {command}"


def install_lines(text: str) -> list[str]:
    """The `pip install` commands of a document or script, whitespace joined."""
    return re.findall(r"pip (?:--python \S+ )?install[^\n`]*", text.replace("\\\n", " "))


def installs_as_shown(doc: str, script: str) -> list[str]:
    """What a document or CI gets wrong about the two installs: the oracle's
    commands need `shmref[oracle]`, refimpl alone needs `pip install shmref`."""
    problems = []
    doc_installs = install_lines(doc)
    if not any("[oracle]" in line for line in doc_installs):
        problems.append("the document installs the oracle without its extra [oracle]")
    if any(".whl" in line and "[oracle]" not in line for line in doc_installs):
        problems.append("the document installs the wheel without [oracle] before the oracle")
    if "pip install shmref" not in " ".join(doc.split()).replace("`", ""):
        problems.append("the document does not say `pip install shmref` is refimpl alone")
    ci = install_lines(script)
    if not any('"$wheel[oracle]"' in line for line in ci):
        problems.append('CI does not install "$wheel[oracle]"')
    if not any(line.split()[-1] == '"$wheel"' for line in ci):
        problems.append('CI does not install "$wheel" alone (refimpl without the extra)')
    return problems


def test_readme_and_docs_install_what_ci_installs():
    root = DOC.parents[1]
    script = (root / ".ci" / "wheel-check").read_text()
    for doc in (root / "README.md", DOC):
        assert installs_as_shown(doc.read_text(), script) == [], doc.name
    # the check can fail: the install as it was before the extra
    before = "pip install dist/shmref-0.1.0-py3-none-any.whl  # into your environment\n"
    assert len(installs_as_shown(before, script.replace("[oracle]", ""))) == 4
