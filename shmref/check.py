"""`python -m shmref.check`: TLC on every model of the manifest (`make check`).

The command stays here, where users call it; the code lives in
`shmref.tlc.check`."""

from __future__ import annotations

from shmref.tlc.check import main

if __name__ == "__main__":
    raise SystemExit(main())
