"""A store whose reader `get` raises KeyboardInterrupt and SystemExit (a
BaseException the oracle must not mistake for its own end)."""

import itertools

from _base import faulty_module

_calls = itertools.count()


def _fault() -> None:
    raise (KeyboardInterrupt if next(_calls) % 2 else SystemExit)("from the store")


globals().update(faulty_module(__name__, _fault))
