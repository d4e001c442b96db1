"""The quick models (spec/models.toml) that a test of `make test` already
checks through `make check`'s own runner, verdict and measured states both
(tests/spec/test_deep_properties.py's `run`): the slow run of every quick model
(tests/spec/test_check.py::test_quick_models_match_the_manifest) leaves them out,
so that CI checks each model once."""

from __future__ import annotations

CHECKED_IN_MAKE_TEST = {
    "MCIndRing": "test_strengthened_live_disjoint_is_inductive",
    "MCIndRingWeak": "test_weakened_invariant_is_not_inductive",
    "MCCopyWindowClear": "test_copy_window_closed_and_its_broken_variant_fails",
    "MCHotKey": "test_hot_key_starves_put_and_renew_ends_it",
    "MCHotKeyRenew": "test_hot_key_starves_put_and_renew_ends_it",
}
