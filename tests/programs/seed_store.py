"""The seed's own code behind the process protocol (docs/protocol.md): the
seed's module, built by shmref from its text, served by the reference
program (shmref.process.serve). A quick run of it must leave nothing in
/dev/shm and report what the in-process seed's run reports, a segment its
constructor leaves when it raises included (tests/process/test_misbehaving_programs.py).

    python3 seed_store.py
"""

from __future__ import annotations

import sys

from shmref.process.serve import Server
from shmref.seed.build import build_seed_module

if __name__ == "__main__":
    seed = build_seed_module()
    out, sys.stdout = sys.stdout, sys.stderr  # the protocol on stdout; anything else on stderr
    Server(seed, ["writer", "reader"], out, sys.stdin).run()
