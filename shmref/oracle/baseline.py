"""The seed baseline: the seed's own report for the same run, beside every
property; cached in the user cache under a fingerprint of everything it depends on.

A cached baseline is kept for as long as its fingerprint holds, so it must
never keep an accident: a property that came out ERROR, CRASH or TIMEOUT is
run again (`--only`) before the report is cached, the second result is kept,
and the property's detail (and the report's `reruns`) says what the first was.
"""

from __future__ import annotations

import copy
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
from shmref.core.levels import CRASH, ERROR, NOT_RUN, SEED_ABSENT, TIMEOUT
from shmref.core.paths import PACKAGE_DIR, REFIMPL_DIR, SPEC_DIR, cache_dir
from shmref.oracle.descendants import child_env
from shmref.oracle.report import Report
from shmref.oracle.verdict import RUN_CHECKS, Check
from shmref.seed.aliases import SEED_ALIAS
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
        repeat: int = 1,
    ) -> None:
        key = fingerprint(quick and not all_groups, levels) + ("-all" if all_groups else "")
        key += f"-repeat{repeat}" if repeat > 1 else ""  # its flakes found as the run's are
        self.folder = cache_dir("seed-baseline") / key
        self.args = ["--quick"] * quick + ["--all-groups"] * all_groups
        self.args += ["--timeout", str(timeout), "--call-timeout", str(call_timeout)]
        self.args += [arg for level in levels for arg in ("--level", level)]
        self.args += ["--workers", str(workers)] if workers else []
        self.args += ["--no-progress"] + (["--repeat", str(repeat)] if repeat > 1 else [])
        self.child: subprocess.Popen[bytes] | None = None
        self.work: Path | None = None

    @staticmethod
    def command() -> list[str]:
        """The seed's own conformance run (a test puts a double in its place)."""
        return [sys.executable, "-m", "shmref.conformance", "--impl", SEED_ALIAS]

    def start(self) -> None:
        if (self.folder / "conformance.json").is_file():
            return
        seed = default_seed_path()
        if seed is None or not seed.is_file():
            raise SeedMissing(MISSING_SEED)
        self.work = Path(tempfile.mkdtemp(prefix=self.folder.name + "-", dir=self.folder.parent))
        with open(self.work / "run.log", "wb") as log:
            self.child = subprocess.Popen(
                self._seed_run(self.work),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=child_env(),
            )

    def _seed_run(self, out: Path, only: Sequence[str] = ()) -> list[str]:
        command = [*self.command(), "--no-baseline", "--no-shrink"]  # only its verdicts are used
        return [*command, "--out", str(out), *self.args, *(a for n in only for a in ("--only", n))]

    def rerun_accidents(self, made: Path) -> None:
        """Run again what came out ERROR, CRASH or TIMEOUT in the seed's report
        `made`, and keep the second result (with the first named) in it."""
        first: dict[str, Any] = json.loads(made.read_text())
        names = sorted({name for _level, name in accidents(first)})
        if not names:
            return
        assert self.work is not None
        again = self.work / "rerun"
        # a run-wide check (a process problem, pytest's collection) is no property: all again
        only = () if set(RUN_CHECKS) & set(names) else names
        with open(self.work / "rerun.log", "wb") as log:
            subprocess.run(
                self._seed_run(again, only),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=child_env(),
                check=False,
            )
        second = again / "conformance.json"
        report = kept_second(first, json.loads(second.read_text()) if second.is_file() else None)
        report.write(made.parent, page=False)

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
            self.rerun_accidents(made)
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
        check.seed = results.get((check.level, check.name), SEED_ABSENT)
    return {level: data["status"] for level, data in baseline["levels"].items()}


ACCIDENTS = (ERROR, CRASH, TIMEOUT)  # what a run may get by accident, never the seed's answer


def accidents(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(level, property) of every check of `report` that is an accident."""
    return [
        (level, c["name"])
        for level, data in report["levels"].items()
        for c in data["checks"]
        if c["status"] in ACCIDENTS
    ]


def kept_second(first: Mapping[str, Any], second: Mapping[str, Any] | None) -> Report:
    """`first` with each accident's check replaced by the re-run's (`second`;
    None: the re-run made no report), its detail saying what the first run
    gave when the two differ; the levels' statuses recomputed and every
    re-run listed in `reruns`. A run-wide check (RUN_CHECKS) is the
    re-run's: gone if the problem did not come back."""
    report = copy.deepcopy(dict(first))
    redone: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for level, data in (second or {}).get("levels", {}).items():
        for c in data["checks"]:
            redone.setdefault((level, c["name"]), []).append(c)
    reruns = []
    for level, name in dict.fromkeys(accidents(report)):
        checks = report["levels"][level]["checks"]
        before = [c for c in checks if c["name"] == name]
        after = redone.get((level, name), [])
        if second is None:  # not judged again: the first result stays, said to be one
            after = [{**c, "detail": f"the re-run made no report; {c['detail']}"} for c in before]
        elif name not in RUN_CHECKS and after:
            was = f"{before[0]['status']} ({(before[0]['detail'] or '-').splitlines()[0][:200]})"
            if after[0]["status"] != before[0]["status"]:
                note = f"first run: {was}; re-run: {after[0]['status']} (kept)"
            else:
                note = f"{was} again on a re-run"
            after = [{**after[0], "detail": "; ".join(t for t in (note, after[0]["detail"]) if t)}]
        elif name not in RUN_CHECKS:  # the re-run did not judge it: the first stays
            after = before
        at = checks.index(before[0])
        checks[:] = [*checks[:at], *after, *(c for c in checks[at:] if c not in before)]
        first_status, second_status = before[0]["status"], after[0]["status"] if after else None
        reruns.append(
            {"level": level, "name": name, "first": first_status, "second": second_status}
        )
    return recomputed(report, reruns)


class Rerun(Report):
    """A seed report whose accidents were run again (`reruns`: what each gave twice)."""

    reruns: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "reruns": self.reruns}


def recomputed(report: Mapping[str, Any], reruns: list[dict[str, Any]]) -> Report:
    """The seed's report with its level statuses (and the seed's, which are
    its own) computed again from its checks."""
    run = tuple(lv for lv, d in report["levels"].items() if d["status"] != NOT_RUN or d["checks"])
    checks = [Check(**c) for d in report["levels"].values() for c in d["checks"]]
    again = Rerun(
        report["impl"], report["quick"], checks, report["seconds"], report["not_run"], run
    )
    again.seed_levels = {lv: again.level_status(lv) for lv in report["levels"]}
    again.reruns = reruns
    return again
