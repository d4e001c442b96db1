"""The seed's code with one defect: `handle()` leaves out the readers' lock
(`reader_lock=None`), so a reader made from a writer's own handle, as vLLM's
tests make them, cannot be built ("Lock must be provided for readers").

The suite's other readers get a lock set into a copy of the handle, so this
store passed every level until the suite attached one from the handle as it
is (shmref/suite/test_storage.py, tests/oracle/test_suite_loose_ends.py)."""

from _seedtext import edit, load_into, port_source

load_into(
    globals(),
    edit(
        port_source(),
        [("reader_lock=self._port__reader_lock)", "reader_lock=None)", 1)],
    ),
)
