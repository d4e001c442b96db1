"""bench.seedmutants: which places of the seed it mutates. A docstring or a
logging call is never dropped (the mutant would be equivalent by
construction and count as a survivor)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from bench.seedmutants import FATES, FULL_RUN, TABLE, figure, sites, table

REPO = Path(__file__).resolve().parents[1]

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
