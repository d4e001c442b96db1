"""The words of a verdict: the levels (with their pytest markers), the
statuses a property gets, what a seed column says, and how many failures a
report shows. They live here, in the lowest layer, because the suite marks
its tests with them, the renderer colours and counts them, and the oracle
decides them: each of those reads this one table instead of its own copy."""

from __future__ import annotations

SEED, HARDENED, PROTOCOL, LAYOUT = "seed-compatible", "hardened", "protocol-safe", "seed-layout"
LEVELS = (SEED, HARDENED, PROTOCOL, LAYOUT)
# a level as a pytest marker of the suite's tests (registered by shmref.pytest_plugin)
LEVEL_MARKERS = {
    SEED: "seed_compatible",
    HARDENED: "hardened",
    PROTOCOL: "protocol_safe",
    LAYOUT: "seed_layout",
}
LEVEL_MEANING = {
    SEED: "the seed's behaviour through the API: values, exception types, what is "
    "cached and reclaimed (refimpl's where it fixes a documented finding)",
    HARDENED: "refimpl's fixes: clear errors for bad input and the findings each "
    "property names (optional)",
    PROTOCOL: "none of the spec's hazards: replays, state machines and a recorded run "
    "agree with the spec; no hazard counterexample returns a wrong value",
    LAYOUT: "the seed's bytes: offsets, endianness, the secret's place, its readers "
    "and writer on one segment with the implementation's (optional: a claim of its own)",
}

PASS, FAIL, SKIP, NOT_RUN, ASSUMPTION, ERROR, CRASH, TIMEOUT = (
    "pass",
    "FAIL",
    "skip",
    "not run",
    "assumption",
    "ERROR",
    "CRASH",  # the implementation's process died (a signal, or exited) during the property
    "TIMEOUT",  # the property ran past --timeout; its process was killed
)
# a property whose attempts under --repeat gave different statuses (Check.attempts)
FLAKY = "FLAKY"
STATUSES = (PASS, FAIL, SKIP, NOT_RUN, ASSUMPTION, ERROR, CRASH, TIMEOUT, FLAKY)
BAD = (FAIL, ERROR, CRASH, TIMEOUT, FLAKY)  # statuses that fail a level

# What a property's seed column says when there is no seed result to differ from.
SEED_ABSENT = "absent"  # the seed's run has no such property
NO_SEED = "no seed"  # no seed baseline ran (no seed text, or its run failed)
SEED_SILENT = ("", SEED_ABSENT, NO_SEED)

SHOWN_FAILURES = 4  # failing cases shown per property (conformance.md and its page)
