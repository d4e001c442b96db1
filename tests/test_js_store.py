"""The JavaScript store (examples/js_store), written from docs/protocol.md alone, is judged.

Why: issue 32's last bar is that a store in another language, written by a new user from
the protocol's documentation, can be judged without changes to shmref. This runs the
oracle on it (seed-compatible, --quick) and checks that the run judged it: no protocol
error, no crash, nothing left in /dev/shm, and the level it claims (seed-compatible) passes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STORE = ROOT / "examples" / "js_store" / "store.js"
NODE = shutil.which("node")

if NODE is None:
    pytest.skip("node not found: the JS store is not judged", allow_module_level=True)

# What the oracle says when a program broke the protocol (docs/protocol.md, "Messages").
PROTOCOL_BROKEN = re.compile(r"schema|not JSON|in_reply_to|protocol|before .?hello", re.IGNORECASE)


def _ours() -> set[str]:
    """The segments and lock files js_store makes (its own name prefixes)."""
    shm = {p.name for p in Path("/dev/shm").glob("psm_js*")}
    locks = {p.name for p in Path(tempfile.gettempdir()).glob("shmref-js-*.lock")}
    return shm | locks


@pytest.mark.slow
def test_js_store_is_judged_seed_compatible(tmp_path: Path) -> None:
    before = _ours()
    out = tmp_path / "report"
    cmd = [
        sys.executable,
        "-m",
        "shmref.conformance",
        "--impl",
        f"exec:{NODE} {STORE}",
        "--quick",
        "--level",
        "seed-compatible",
        "--no-baseline",
        "--no-progress",
        "--out",
        str(out),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode in (0, 1), run.stdout + run.stderr
    report = json.loads((out / "conformance.json").read_text())
    checks = [c for level in report["levels"].values() for c in level["checks"]]
    assert checks, "the run judged no property"
    for c in checks:
        assert c["status"] != "CRASH", f"{c['name']}: the store crashed: {c['detail']}"
        broken = c["status"] == "ERROR" and PROTOCOL_BROKEN.search(c["detail"] or "")
        assert not broken, f"{c['name']}: the store broke the protocol: {c['detail']}"
    level = report["levels"]["seed-compatible"]
    failing = [c["name"] for c in level["checks"] if c["status"] not in ("pass", "skip")]
    assert level["status"] == "pass", f"seed-compatible: {failing}"
    assert _ours() - before == set(), "js_store left segments or lock files behind"
