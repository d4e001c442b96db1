"""native_store with the C defect `stale_accepted` (build.py MUTANTS)."""

from native_store._bind import bind

bind(globals(), "stale_accepted")
