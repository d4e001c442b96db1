"""Files written whole or not at all: a reader (a browser on the report, a
child importing the seed's module, a second run sharing the cache) sees the
old file or the new one, never half of one."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_atomically(path: Path, data: str | bytes, encoding: str = "utf-8") -> None:
    """Write `data` to a temporary file beside `path` (a name of its own, so
    that two processes writing the same path never share one), then rename it
    over `path`; the file gets the permissions a plain write gives it. An
    OSError is raised as it came, with no temporary file left."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(temporary, "xb") as out:
            out.write(data.encode(encoding) if isinstance(data, str) else data)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
