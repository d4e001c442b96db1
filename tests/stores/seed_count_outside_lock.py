"""The seed's code with one defect: in `get`, a reader's count is
incremented after the readers' lock is released instead of under it (the
lock is still taken, and let go at once). Two readers then both read the
count and both write back the same count plus one: a read is lost, and the
object is pinned for good.

The race is the classic defect of a single-writer, multi-reader store in
shared memory. The oracle caught this store in 0 of 20 runs of
`test_storage_readers.py::test_concurrent_reader_threads_count_exactly`
when the property hoped for a collision; it must catch it in every run
(docs/conformance.md, "Races")."""

from _seedtext import edit, load_into, port_source

INCREMENT = "self._port_increment_reader_flag(data_view[:self._port_flag_bytes])"
LOCKED = "with self._port__reader_lock:\n" + " " * 20 + INCREMENT
UNLOCKED = "with self._port__reader_lock:\n" + " " * 20 + "pass\n" + " " * 16 + INCREMENT

load_into(globals(), edit(port_source(), [(LOCKED, UNLOCKED, 1)]))
