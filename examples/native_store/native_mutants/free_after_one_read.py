"""native_store with the C defect `free_after_one_read` (build.py MUTANTS)."""

from native_store._bind import bind

bind(globals(), "free_after_one_read")
