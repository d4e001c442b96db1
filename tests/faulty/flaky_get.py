"""A store that is wrong once: the first reader `get` in the suite test
FLAKY_TEST (when none has left the marker file $FLAKY_GET_MARK yet: this store's
own variable, as a user's store reads its own)
raises, every later one works.
Run twice, a property that reads gets two statuses: FLAKY under --repeat
(tests/oracle/test_repeat.py)."""

import os
from pathlib import Path

from _base import faulty_module

FLAKY_TEST = "test_storage.py::test_reads_count_and_reclaim_fifo"


def once() -> None:
    if FLAKY_TEST not in os.environ.get("PYTEST_CURRENT_TEST", ""):
        return
    mark = Path(os.environ["FLAKY_GET_MARK"])
    try:
        mark.touch(exist_ok=False)
    except FileExistsError:
        return
    raise RuntimeError("flaky_get: the first get of this run goes wrong")


globals().update(faulty_module(__name__, once))
