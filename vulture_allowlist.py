"""Names `make lint`'s dead-code check (vulture, at 80% confidence, over shmref/
and refimpl/) takes for unused, that something it cannot see uses: each line
says who. Most such names are fixed where they stand instead: a pytest hook
takes only the arguments it uses (pluggy passes a hook only those it names),
a signal handler names its arguments `_signum`, `_frame` (the signal module
passes them by position). vulture reads this file as code that uses the
names; nothing imports or runs it (tests/tools/test_lint.py checks that each
entry is still needed)."""

# ruff: noqa: F821, B018 - bare names are how vulture's allow-lists use a name

# Until the next change to refimpl/ names it `_tb` (docs/vllm-check.json binds refimpl's
# files by SHA-256: a change remakes that record with `make vllm-check`, not done for this):
tb  # refimpl/readerlock.py ReaderLock.__exit__: the with statement passes it by position
