"""`python -m shmref.itf`: export, read, replay and validate ITF traces.

The command stays here, where users call it; the code lives in
`shmref.traces.itf_cli`."""

from __future__ import annotations

from shmref.traces.itf_cli import main

if __name__ == "__main__":
    raise SystemExit(main())
