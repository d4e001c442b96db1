"""`python -m shmref.fuzz`: the bad-input fuzz of every public method (hardened property).

The command stays here, where users call it; the code lives in
`shmref.fuzzing.run`."""

from __future__ import annotations

from shmref.fuzzing.run import main

if __name__ == "__main__":
    raise SystemExit(main())
