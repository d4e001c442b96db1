"""The Hypothesis profiles of shmref's suite (`$SHMREF_PROFILE` picks one).

"shmref-ci": fast and derandomized, so a CI failure replays identically
anywhere; "shmref-long": `make fuzz`, random and deep; "shmref-baseline":
shmref-ci without shrinking, for the seed's own run beside a conformance run
(only its verdicts are used, and the seed's failures took minutes to shrink).
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

CI, LONG, BASELINE = "shmref-ci", "shmref-long", "shmref-baseline"
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
)
settings.register_profile(
    LONG,
    max_examples=3000,
    stateful_step_count=120,
    deadline=None,
    print_blob=True,
    suppress_health_check=_SLOW_OK,
)
settings.register_profile(
    BASELINE,
    settings.get_profile(CI),
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
