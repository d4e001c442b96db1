"""The Hypothesis profiles of shmref's suite (`$SHMREF_PROFILE` picks one).

"shmref-ci": fast and derandomized, so a CI failure replays identically
anywhere; "shmref-long": `make fuzz`, random and deep; "shmref-quick": fewer
examples, for `--quick` conformance runs; "shmref-baseline" and
"shmref-quick-baseline": the same without shrinking, for the seed's own run
beside a conformance run (only its verdicts are used, and the seed's
failures took minutes to shrink).

shmref-ci and the profiles made from it report one failure, not every distinct
one it can find
(`report_multiple_bugs=False`): with several, Hypothesis goes on generating
after the first bug until ten seconds have passed since it, so what a run
reported depended on the machine's speed, and every bug found was shrunk
in turn (shmref.session.shrinkbudget bounds shrinking in examples instead).
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

CI, LONG, QUICK = "shmref-ci", "shmref-long", "shmref-quick"
BASELINE, QUICK_BASELINE = "shmref-baseline", "shmref-quick-baseline"
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile(
    CI,
    derandomize=True,
    max_examples=150,
    stateful_step_count=50,
    deadline=None,
    print_blob=True,
    database=None,
    suppress_health_check=_SLOW_OK,
    report_multiple_bugs=False,
)
settings.register_profile(
    LONG,
    max_examples=3000,
    stateful_step_count=120,
    deadline=None,
    print_blob=True,
    suppress_health_check=_SLOW_OK,
)
settings.register_profile(QUICK, settings.get_profile(CI), max_examples=40)
_NO_SHRINK = [Phase.explicit, Phase.reuse, Phase.generate]
settings.register_profile(BASELINE, settings.get_profile(CI), phases=_NO_SHRINK)
settings.register_profile(QUICK_BASELINE, settings.get_profile(QUICK), phases=_NO_SHRINK)
KNOWN = (CI, LONG, QUICK, BASELINE, QUICK_BASELINE)


def for_run(quick: bool, shrink: bool = True) -> str:
    """The profile of a conformance run: fewer examples when quick, no
    shrinking when only the verdicts are used (the seed's own run)."""
    if quick:
        return QUICK if shrink else QUICK_BASELINE
    return CI if shrink else BASELINE
