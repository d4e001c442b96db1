"""`python -m shmref.itf`: export, read, replay and validate ITF traces.

The command stays here, where users call it; the code lives in
`shmref.traces.itf_cli`."""

from __future__ import annotations

from shmref.core.extras import require_oracle_extra

if __name__ == "__main__":
    require_oracle_extra()  # one line, exit 2, when shmref[oracle] is missing
    from shmref.traces.itf_cli import main

    raise SystemExit(main())
