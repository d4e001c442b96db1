"""The seed's code with one defect: a reader takes a signature given as a
tuple or as bytes (the right 32 values, not the list `get_signature`
returns), where the seed refuses any signature that is not a list with
ValueError.

The suite's malformed signatures were all wrong values, so this store passed
every level until the suite gave it the right values in another type
(shmref/suite/test_storage.py, tests/oracle/test_suite_loose_ends.py)."""

from _seedtext import edit, load_into, port_source

load_into(
    globals(),
    edit(
        port_source(),
        [("not isinstance(signature, list)", "not isinstance(signature, list | tuple | bytes)", 1)],
    ),
)
