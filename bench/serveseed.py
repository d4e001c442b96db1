"""The seed's own code behind the process protocol, for the bench's
comparison at the store's own pace (bench/ruststore.py): the reference
program (shmref.process.serve) on the seed module shmref builds from its
text, so that the seed answers the bench request with the same loop in
Python (shmref.process.benchloop) that a program runs in its language.

    python -m bench.serveseed
"""

from __future__ import annotations

import sys

from shmref.process.serve import Server
from shmref.seed.impl import load_impl


def main() -> int:
    """Serve the seed until stdin closes (the protocol on stdout, its prints on stderr)."""
    out = sys.stdout
    sys.stdout = sys.stderr
    Server(load_impl("seed"), ["writer", "reader"], out, sys.stdin).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
