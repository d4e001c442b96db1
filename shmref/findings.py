"""`python -m shmref.findings`: FINDINGS.md's tables from docs/findings.toml (`--check`: current?).

The command stays here, where users call it; the code lives in
`shmref.docgen.findings`."""

from __future__ import annotations

from shmref.docgen.findings import main

if __name__ == "__main__":
    raise SystemExit(main())
