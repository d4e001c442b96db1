"""`python -m shmref.deep`: the deep models on TLC's distributed mode or by simulation.

The command stays here, where users call it; the code lives in
`shmref.tlc.deep`."""

from __future__ import annotations

from shmref.core.extras import require_oracle_extra

if __name__ == "__main__":
    require_oracle_extra()  # one line, exit 2, when shmref[oracle] is missing
    from shmref.tlc.deep import main

    raise SystemExit(main())
