"""bench.seedmutants: which places of the seed it mutates. A docstring or a
logging call is never dropped (the mutant would be equivalent by
construction and count as a survivor)."""

from __future__ import annotations

import ast

from bench.seedmutants import sites

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
