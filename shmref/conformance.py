"""`python -m shmref.conformance`: judge an implementation, level by level (the oracle).

The command stays here, where users call it; the code lives in
`shmref.oracle.cli`."""

from __future__ import annotations

from shmref.oracle.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
