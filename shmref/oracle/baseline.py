"""The seed baseline: the seed's own report for the same run, beside every
property; cached in the user cache under a fingerprint of everything it depends on."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shmref import tlc
from shmref.core.paths import PACKAGE_DIR, REFIMPL_DIR, SPEC_DIR, cache_dir
from shmref.oracle.verdict import (
    Check,
)
from shmref.seed.build import MISSING_SEED, SeedError, SeedMissing, default_seed_path


def fingerprint(quick: bool, levels: Sequence[str]) -> str:
    """What a cached seed baseline depends on: the options, the oracle, the
    tests, the spec and the seed."""
    digest = hashlib.sha256(repr((quick, sorted(levels), bool(tlc.unavailable()))).encode())

    files = sorted(
        [
            *PACKAGE_DIR.glob("**/*.py"),
            *SPEC_DIR.glob("*.tla"),
            *SPEC_DIR.glob("*.cfg"),
            *REFIMPL_DIR.glob("*.py"),
            *([seed] if (seed := default_seed_path()) else []),
        ]
    )
    for path in files:
        if path.is_file():
            digest.update(str(path.relative_to(path.parent.parent)).encode() + path.read_bytes())
    return digest.hexdigest()[:16]


class SeedBaseline:
    """The seed's own report for the same run: from the user cache (keyed by
    the run's fingerprint), or made by a conformance run of the seed in a
    child process that works beside this run (2 cores: one each)."""

    def __init__(
        self,
        quick: bool,
        levels: Sequence[str],
        all_groups: bool,
        timeout: float = 300.0,
        call_timeout: float = 10.0,
        workers: int | None = None,
    ) -> None:
        key = fingerprint(quick and not all_groups, levels) + ("-all" if all_groups else "")
        self.folder = cache_dir("seed-baseline") / key
        self.args = ["--quick"] * quick + ["--all-groups"] * all_groups
        self.args += ["--timeout", str(timeout), "--call-timeout", str(call_timeout)]
        self.args += [arg for level in levels for arg in ("--level", level)]
        self.args += ["--workers", str(workers)] if workers else []
        self.args += ["--no-progress"]
        self.child: subprocess.Popen[bytes] | None = None
        self.work: Path | None = None

    def start(self) -> None:
        if (self.folder / "conformance.json").is_file():
            return
        seed = default_seed_path()
        if seed is None or not seed.is_file():
            raise SeedMissing(MISSING_SEED)
        self.work = Path(tempfile.mkdtemp(prefix=self.folder.name + "-", dir=self.folder.parent))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        command = [sys.executable, "-m", "shmref.conformance", "--impl", "seed", "--no-baseline"]
        command.append("--no-shrink")  # only its verdicts are used
        with open(self.work / "run.log", "wb") as log:
            self.child = subprocess.Popen(
                [*command, "--out", str(self.work), *self.args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            )

    def stop(self) -> None:
        """The run was interrupted: the seed's run ends with it, its work folder removed."""
        if self.child is not None and self.child.poll() is None:
            self.child.terminate()
            try:
                self.child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait()
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)

    def report(self, out: Path) -> dict[str, Any]:
        """Wait for the seed's run (if any); its report, copied to out/seed-baseline."""
        if self.child is not None and self.work is not None:
            code = self.child.wait()
            made = self.work / "conformance.json"
            if not made.is_file():
                log = (self.work / "run.log").read_text(errors="replace").strip()
                raise SeedError(f"the seed's own run exited {code}: {log[-300:]}")
            if (self.folder / "conformance.json").is_file():  # another run was first
                shutil.rmtree(self.work, ignore_errors=True)
            else:
                shutil.rmtree(self.folder, ignore_errors=True)
                os.replace(self.work, self.folder)
        shutil.copytree(self.folder, out / "seed-baseline", dirs_exist_ok=True)
        loaded: dict[str, Any] = json.loads((self.folder / "conformance.json").read_text())
        return loaded


def attach_baseline(checks: list[Check], baseline: Mapping[str, Any]) -> dict[str, str]:
    results = {
        (level, c["name"]): c["status"]
        for level, data in baseline["levels"].items()
        for c in data["checks"]
    }
    for check in checks:
        check.seed = results.get((check.level, check.name), "absent")
    return {level: data["status"] for level, data in baseline["levels"].items()}
