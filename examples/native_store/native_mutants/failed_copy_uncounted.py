"""native_store with the C defect `failed_copy_uncounted` (build.py MUTANTS)."""

from native_store._bind import bind

bind(globals(), "failed_copy_uncounted")
