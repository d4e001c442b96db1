"""`python -m shmref.fuzz`: the bad-input fuzz of every public method (hardened property).

The command stays here, where users call it; the code lives in
`shmref.fuzzing.run`."""

from __future__ import annotations

from shmref.core.extras import require_oracle_extra

if __name__ == "__main__":
    require_oracle_extra()  # one line, exit 2, when shmref[oracle] is missing
    from shmref.fuzzing.run import main

    raise SystemExit(main())
