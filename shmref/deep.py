"""`python -m shmref.deep`: the deep models on TLC's distributed mode or by simulation.

The command stays here, where users call it; the code lives in
`shmref.tlc.deep`."""

from __future__ import annotations

from shmref.tlc.deep import main

if __name__ == "__main__":
    raise SystemExit(main())
