"""native_store with the C defect `unchecked_address` (build.py MUTANTS)."""

from native_store._bind import bind

bind(globals(), "unchecked_address")
