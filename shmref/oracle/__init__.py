"""The oracle: `python -m shmref.conformance` runs the suite, recordings and
hazard replays in child processes and gives each level its verdict."""
