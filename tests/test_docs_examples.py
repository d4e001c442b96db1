"""The Python examples of docs/conformance.md run as written, with
`your_module` standing for refimpl, and fail when an example is wrong."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import refimpl

DOC = Path(__file__).resolve().parents[1] / "docs" / "conformance.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def run_example(source: str, module: object, folder: Path) -> None:
    sys.modules["your_module"] = module  # type: ignore[assignment]
    try:
        code = compile(source, f"{DOC.name} example", "exec")
        namespace: dict[str, object] = {"__name__": "docs_example"}
        cwd = Path.cwd()
        import os

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
    from shmref.mutants import build_mutant

    replay_example = next(e for e in EXAMPLES if "replay(" in e)
    with pytest.raises(AssertionError):
        run_example(replay_example, build_mutant("get_cached_not_counted"), tmp_path)
