"""The words a property looks for in a refusal's message are part of the
written contract (shmref.contract.REFUSAL_WORDS, shown in docs/conformance.md):
every `pytest.raises(..., match=...)` of the suite that runs on any store is
in that table, and every entry of the table is used. A store written from the
docs alone (examples/js_store) met four such words only by reading the tests."""

from __future__ import annotations

import ast
from pathlib import Path

from shmref.contract import REFUSAL_WORDS

SUITE = Path(__file__).resolve().parents[2] / "shmref" / "suite"
# Properties kept for refimpl (skipped on any other module): their words are refimpl's own.
REFIMPL_ONLY = {("test_storage_readers.py", "outer"), ("test_stateful.py", "counts")}


def matched_words(source: str) -> set[str]:
    """The `match=` patterns of every `pytest.raises(...)` call in `source`."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "pytest.raises":
            for keyword in node.keywords:
                if keyword.arg == "match" and isinstance(keyword.value, ast.Constant):
                    found.add(str(keyword.value.value))
    return found


def suite_words() -> set[str]:
    return {
        word
        for path in sorted(SUITE.glob("test_*.py"))
        for word in matched_words(path.read_text())
        if (path.name, word) not in REFIMPL_ONLY
    }


def test_every_word_a_property_matches_is_in_the_contract() -> None:
    assert suite_words() - REFUSAL_WORDS.keys() == set()


def test_every_word_of_the_contract_is_matched_by_a_property() -> None:
    assert REFUSAL_WORDS.keys() - suite_words() == set()


def test_an_unlisted_word_is_found() -> None:
    source = "def test_x():\n    with pytest.raises(ValueError, match='frobnicated'):\n        f()"
    assert matched_words(source) == {"frobnicated"}
    assert matched_words(source) - REFUSAL_WORDS.keys() == {"frobnicated"}
