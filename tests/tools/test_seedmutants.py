"""bench.seedmutants: which places of the seed it mutates. A docstring or a
logging call is never dropped (the mutant would be equivalent by
construction and count as a survivor)."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import pytest

from bench.seedmutants import (
    FATES,
    FULL_RUN,
    TABLE,
    closing_test,
    figure,
    mutate,
    seed_compatible_run,
    sites,
    table,
)

REPO = Path(__file__).resolve().parents[2]

SOURCE = '''
class SingleWriterShmRingBuffer:
    def f(self, n):
        """doc"""
        logger.debug("n is %s", n)
        self.n = n
        return n
'''


def test_logging_calls_and_docstrings_are_not_dropped() -> None:
    tree = ast.parse(SOURCE)
    dropped = [
        ast.unparse(node.body[i])  # type: ignore[attr-defined]
        for kind, node, i in sites(tree)
        if kind.startswith("drop")
    ]
    assert dropped == ["self.n = n", "return n"]


def test_every_survivor_of_the_full_run_is_closed_or_argued() -> None:
    """Each mutant of the full run that the level let through is killed now by
    a named property or argued equivalent (bench.seedmutants.FATES)."""
    data = json.loads((REPO / FULL_RUN).read_text())
    survivors = [r["mutant"] for r in data["rows"] if not r["killed"]]
    assert [n for n in survivors if n not in FATES] == []


def test_the_mutant_table_and_the_readme_figure_are_current() -> None:
    data = json.loads((REPO / FULL_RUN).read_text())
    assert (REPO / TABLE).read_text() == table(data), "run python -m bench.seedmutants --table"
    assert figure(data) in (REPO / "README.md").read_text(), "README.md: paste figure()"


def test_the_table_names_an_unargued_survivor() -> None:
    """A survivor with no fate shows as open (the check above then fails)."""
    data = {"sites": 3, "profile": "p", "rows": [{"mutant": 1, "what": "x", "killed": False}]}
    assert "| 1 | x | open |" in table(data) and "0 of 1 killed" in figure(data)


CLOSED = sorted(n for n, (fate, _how) in FATES.items() if fate == "closed")


def _run_properties(impl: str, names: list[str], folder: Path) -> subprocess.CompletedProcess[str]:
    return seed_compatible_run(folder, impl, "shmref-baseline", "-k", " or ".join(names))


def _seed_source() -> str:
    from shmref.seed.build import SeedError
    from shmref.seed.impl import load_impl

    try:
        return Path(load_impl("seed").__file__ or "").read_text()
    except SeedError as exc:
        pytest.skip(f"the seed is not available: {exc}")


@pytest.mark.slow
def test_each_closing_property_passes_on_the_seed(tmp_path: Path) -> None:
    """A property that closes a survivor is seed-compatible: the seed passes it."""
    _seed_source()
    done = _run_properties("seed", sorted({closing_test(n) for n in CLOSED}), tmp_path)
    last = (done.stdout.strip().splitlines() or [""])[-1]
    assert done.returncode == 0 and f"{len(set(map(closing_test, CLOSED)))} passed" in last, (
        done.stdout[-3000:]
    )


@pytest.mark.slow
@pytest.mark.parametrize("number", CLOSED)
def test_a_closed_survivor_is_killed_by_its_property(number: int, tmp_path: Path) -> None:
    """FATES' "closed" is a claim: the named property fails on that mutant."""
    text, what = mutate(_seed_source(), number)
    (tmp_path / f"seedmutant_{number}.py").write_text(text)
    done = _run_properties(f"seedmutant_{number}", [closing_test(number)], tmp_path)
    last = (done.stdout.strip().splitlines() or [""])[-1]
    assert done.returncode == 1 and " failed" in last and " error" not in last, (
        f"mutant {number} ({what}) is not failed by its property:\n{done.stdout[-3000:]}"
    )


def test_a_fate_without_a_named_property_is_not_closed() -> None:
    argued = next(n for n, (fate, _how) in FATES.items() if fate == "equivalent")
    with pytest.raises(ValueError, match="not closed"):
        closing_test(argued)
