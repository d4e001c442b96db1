"""`make bench`: shmref's benchmarks, measured side by side in one run.

    python -m bench                    # everything (several minutes)
    python -m bench --quick            # CI smoke run: small sizes, well under a minute
    python -m bench --update-readme    # also rewrite README.md's benchmark section

Sections (each a module here): `store` (refimpl vs the seed vs a plain copy
into shared memory, with reader processes, plus a cProfile breakdown), `tlc`
(TLC per model against a trivial counter spec), `replay` (TLC traces,
the Hypothesis state machine and edge coverage replayed on real shared
memory) and `mutants` (time to first failure of each injected bug).
Contenders are interleaved and repeated, and medians and ratios reported,
because the machine is shared and noisy.
"""
