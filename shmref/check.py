"""`python -m shmref.check`: TLC on every model of the manifest (`make check`).

The command stays here, where users call it; the code lives in
`shmref.tlc.check`."""

from __future__ import annotations

from shmref.core.extras import require_oracle_extra

if __name__ == "__main__":
    require_oracle_extra()  # one line, exit 2, when shmref[oracle] is missing
    from shmref.tlc.check import main

    raise SystemExit(main())
