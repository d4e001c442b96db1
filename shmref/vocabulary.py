"""`python -m shmref.vocabulary`: the table of names checked against the
spec and the Driver (`--check`), or DESIGN.md's tables (`--markdown`).

The command stays here, where users call it; the code lives in
`shmref.docgen.vocabulary_doc`."""

from __future__ import annotations

from shmref.core.extras import require_oracle_extra

if __name__ == "__main__":
    require_oracle_extra()  # one line, exit 2, when shmref[oracle] is missing
    from shmref.docgen.vocabulary_doc import main

    raise SystemExit(main())
