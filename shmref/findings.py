"""`python -m shmref.findings`: FINDINGS.md's tables from docs/findings.toml (`--check`: current?).

The command stays here, where users call it; the code lives in
`shmref.docgen.findings`."""

from __future__ import annotations

from shmref.core.extras import require_oracle_extra

if __name__ == "__main__":
    require_oracle_extra()  # one line, exit 2, when shmref[oracle] is missing
    from shmref.docgen.findings import main

    raise SystemExit(main())
