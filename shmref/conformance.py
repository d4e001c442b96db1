"""`python -m shmref.conformance`: judge an implementation, level by level (the oracle).

The command stays here, where users call it; the code lives in
`shmref.oracle.cli`."""

from __future__ import annotations

from shmref.core.extras import require_oracle_extra

if __name__ == "__main__":
    require_oracle_extra()  # one line, exit 2, when shmref[oracle] is missing
    from shmref.oracle.cli import main

    raise SystemExit(main(own_process=True))
