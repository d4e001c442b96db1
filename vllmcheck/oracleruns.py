"""The oracle in the release's venv, each run from an empty folder: on the
release's module alone, and on mixed deployments of the release and refimpl
(the release's writer beside refimpl's readers, and the reverse), once with
the release's serde on both sides and once with each side decoding with its
own module's serde (vllmcheck.sides). A run is summed up from its
conformance.json: how many properties got the seed's status, and which did
better or worse than the seed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from vllmcheck import MODULE, RUN_ENV

# a status's badness, to say "worse than the seed": a pass, then what was not
# judged, then a failure, then a run that broke
RANK = {
    "pass": 0,
    "skip": 1,
    "not run": 1,
    "assumption": 1,
    "FAIL": 2,
    "FLAKY": 2,
    "ERROR": 3,
    "CRASH": 3,
    "TIMEOUT": 3,
}
SIDES = "vllmcheck.sides"
# seconds one call into a store may take: the release's MsgpackSerde() imports vLLM's
# multimodal inputs and msgpack encoder (and PIL) on first use, which took over the
# oracle's default 10 s on a loaded 2-core machine (a TIMEOUT that was no hang)
CALL_TIMEOUT = 60
# (name, serde, writer, readers): the mixed deployments
WRITER_RELEASE, WRITER_REFIMPL = (
    "release writer, refimpl readers",
    "refimpl writer, release readers",
)
RELEASE_SERDE, OWN_SERDE = "the release's", "each side its own"
MIXED = (
    (WRITER_RELEASE, RELEASE_SERDE, MODULE, "refimpl"),
    (WRITER_REFIMPL, RELEASE_SERDE, f"{SIDES}.refimpl_release_serde", MODULE),
    (WRITER_RELEASE, OWN_SERDE, f"{SIDES}.release_to_refimpl", "refimpl"),
    (WRITER_REFIMPL, OWN_SERDE, f"{SIDES}.refimpl_to_release", MODULE),
)


def summarize(report: dict[str, Any]) -> dict[str, Any]:
    """A report's figures: properties, how many got the seed's status, those
    better and worse than the seed's, each level's status beside the seed's."""
    checks = [
        (level, check) for level, data in report["levels"].items() for check in data["checks"]
    ]
    same, better, worse, unknown = 0, [], [], []
    for level, check in checks:
        name, mine, seed = f"{level}: {check['name']}", check["status"], check["seed"]
        if mine == seed:
            same += 1
        elif seed not in RANK or mine not in RANK:
            unknown.append(f"{name} ({mine}; seed: {seed or 'none'})")
        elif RANK[mine] > RANK[seed]:
            worse.append(f"{name} ({mine}; seed: {seed})")
        elif RANK[mine] < RANK[seed]:
            better.append(f"{name} ({mine}; seed: {seed})")
        else:
            unknown.append(f"{name} ({mine}; seed: {seed})")
    return {
        "properties": len(checks),
        "seed_status": same,
        "better": better,
        "worse": worse,
        "other": unknown,
        "levels": {
            level: {"status": data["status"], "seed": data["seed"]}
            for level, data in report["levels"].items()
        },
        "ok": bool(report["ok"]),
        "quick": bool(report["quick"]),
        "seconds": report["seconds"],
    }


def conformance(
    python: Path, folder: Path, args: list[str], pythonpath: list[Path], workers: int
) -> dict[str, Any]:
    """One oracle run from the empty folder `folder`/cwd; its summary, or
    the error line it ended with."""
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "cwd").mkdir(parents=True)
    out = folder / "report"
    env = {**os.environ, **RUN_ENV, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    command = [str(python), "-m", "shmref.conformance", *args, "--out", str(out)]
    command += ["--no-progress", "--workers", str(workers), "--call-timeout", str(CALL_TIMEOUT)]
    log = folder / "oracle.log"
    with log.open("w", encoding="utf-8") as sink:
        done = subprocess.run(
            command, cwd=folder / "cwd", env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    report = out / "conformance.json"
    if done.returncode not in (0, 1) or not report.is_file():
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        return {"error": f"exit {done.returncode}: {lines[-1] if lines else 'no output'}"}
    summary = summarize(json.loads(report.read_text(encoding="utf-8")))
    summary["exit"] = done.returncode
    summary["call_timeout"] = CALL_TIMEOUT
    return summary


def judged_alone(summary: dict[str, Any]) -> list[str]:
    """What falls short for the release alone: every property the seed's status."""
    if "error" in summary:
        return [f"the oracle on the release: {summary['error']}"]
    missed = summary["properties"] - summary["seed_status"]
    return [f"the oracle on the release: {missed} properties without the seed's status"] * (
        missed > 0
    )


def judged_mixed(name: str, summary: dict[str, Any]) -> list[str]:
    """What falls short for a mixed run: seed-compatible and seed-layout
    pass, and no property worse than the seed's status."""
    if "error" in summary:
        return [f"{name}: {summary['error']}"]
    short = [
        f"{name}: {level} {summary['levels'].get(level, {}).get('status', 'not run')}"
        for level in ("seed-compatible", "seed-layout")
        if summary["levels"].get(level, {}).get("status") != "pass"
    ]
    if summary["worse"]:
        short.append(f"{name}: {len(summary['worse'])} properties worse than the seed's")
    return short
