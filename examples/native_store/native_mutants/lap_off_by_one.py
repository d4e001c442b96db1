"""native_store with the C defect `lap_off_by_one` (build.py MUTANTS)."""

from native_store._bind import bind

bind(globals(), "lap_off_by_one")
