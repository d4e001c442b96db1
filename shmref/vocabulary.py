"""`python -m shmref.vocabulary`: the table of names checked against the
spec and the Driver (`--check`), or DESIGN.md's tables (`--markdown`).

The command stays here, where users call it; the code lives in
`shmref.docgen.vocabulary_doc`."""

from __future__ import annotations

from shmref.docgen.vocabulary_doc import main

if __name__ == "__main__":
    raise SystemExit(main())
