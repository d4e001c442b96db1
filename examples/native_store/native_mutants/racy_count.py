"""native_store with the C defect `racy_count` (build.py MUTANTS)."""

from native_store._bind import bind

bind(globals(), "racy_count")
