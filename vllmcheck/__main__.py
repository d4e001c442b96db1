"""`python -m vllmcheck` (`make vllm-check`): a vLLM release set up under
build/vllm/<VER>/, then its own tests on it and with refimpl in its place,
the oracle on it, mixed deployments, the seed-findings tests with it as the
seed; the release's entry in docs/vllm-check.json. Exit 0 when issue 48's
bar is met, 1 when the run is recorded but something falls short (each
named), 2 for bad input or a missing piece (one line)."""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

from vllmcheck import (
    BUILD,
    DEFAULT_RELEASE,
    MODULE,
    MODULE_FILE,
    RECORD,
    REPO,
    CheckError,
    release_dir,
)

FINDINGS_DOC = REPO / "FINDINGS.md"
STEPS = ("exchange", "tests", "oracle", "mixed", "findings")


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="python -m vllmcheck", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--vllm", default=DEFAULT_RELEASE, help="the release (default %(default)s)")
    parser.add_argument("--index", help="the package index (default: pip's, else the public one)")
    parser.add_argument("--build", type=Path, default=BUILD, help="where releases are set up")
    parser.add_argument("--workers", type=int, default=1, help="the oracle's processes")
    parser.add_argument(
        "--only",
        action="append",
        choices=STEPS,
        help="run only this step (repeatable): it replaces its part of the release's entry "
        "when that entry is of refimpl's current files, else the record is left alone",
    )
    parser.add_argument(
        "--write-docs", action="store_true", help="README.md's block from the record"
    )
    parser.add_argument(
        "--check-record", action="store_true", help="exit 1 unless the record is of refimpl's files"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the command; its exit status."""
    args = parse(argv)
    try:
        if args.check_record:
            from vllmcheck.ledger import problem

            said = problem()
            print(f"vllmcheck: {said}" if said else "vllmcheck: the record is of refimpl's files")
            return 1 if said else 0
        if args.write_docs:
            from vllmcheck.dropin import write

            changed = write()
            print("vllmcheck: README.md's drop-in block " + ("written" if changed else "current"))
            return 0
        return check(args)
    except CheckError as exc:
        print(f"vllmcheck: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("vllmcheck: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        print(f"vllmcheck: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


def check(args: argparse.Namespace) -> int:
    """Everything for one release (or the steps of --only), into the record."""
    from vllmcheck import fetch, venvsetup

    release = args.vllm
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)*([.+-]?[A-Za-z0-9]+)*", release):
        raise CheckError(f"{release!r} is not a release number (e.g. {DEFAULT_RELEASE})")
    folder = release_dir(release, args.build.resolve())
    started = time.monotonic()
    wheel, sdist = fetch.fetch(release, folder, args.index or fetch.configured_index())
    fetch.require_module(wheel, release)
    state = venvsetup.prepare(folder, release, wheel)
    root = fetch.unpack_tests(sdist, folder, release)
    python = venvsetup.python_of(folder)
    entry: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "python": venvsetup.python_version(python),
        "torch": venvsetup.installed_version(python, "torch"),
        "setup": state,
    }
    print(f"vllmcheck: vLLM {release} ready in {time.monotonic() - started:.0f} s", flush=True)
    from vllmcheck import ledger

    before = ledger.digests()
    steps = args.only or STEPS
    seconds: dict[str, float] = {}
    for step in steps:
        began = time.monotonic()
        entry.update(STEP_RUNNERS[step](python, folder, root, args.workers))
        seconds[step] = round(time.monotonic() - began, 1)
        print(f"vllmcheck: {step}: {seconds[step]:.0f} s", flush=True)
    after = ledger.digests()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    recorded = ledger.load().get("releases", {}).get(release)
    same_files = recorded is not None and recorded.get("refimpl_sha256") == before
    if changed or (args.only and not same_files):
        import json

        entry["seconds"] = seconds
        partial = folder / "partial.json"
        partial.write_text(json.dumps(entry, indent=1) + "\n", encoding="utf-8")
        why = (
            f"{', '.join(changed)} changed during the run"
            if changed
            else "--only, and the record has no entry of these refimpl files to update"
        )
        print(f"vllmcheck: {why}: {partial} written, the record left alone")
        return 1 if changed else 0
    if args.only and recorded is not None:  # the steps run again, into the entry they belong to
        entry = {**recorded, **entry, "seconds": {**recorded.get("seconds", {}), **seconds}}
    else:
        entry["seconds"] = seconds
    entry["short_of_bar"] = short = short_of_bar(entry)
    entry["refimpl_sha256"] = before
    ledger.store(release, entry)
    print(f"vllmcheck: recorded in {RECORD.relative_to(REPO)}")
    for line in short:
        print(f"vllmcheck: short of the bar: {line}")
    return 1 if short else 0


def run_tests(python: Path, folder: Path, root: Path, _workers: int) -> dict[str, Any]:
    """The release's tests on the release, then with refimpl in its place."""
    from vllmcheck.inplace import SITECUSTOMIZE
    from vllmcheck.suiteruns import module_seen, run_side

    inplace = folder / "inplace"
    inplace.mkdir(exist_ok=True)
    (inplace / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    sides: dict[str, Any] = {}
    for side, path in (("release", [REPO]), ("refimpl", [inplace, REPO])):
        seen = module_seen(python, path)
        expected = "refimpl" if side == "refimpl" else MODULE_FILE
        if not seen.endswith(expected):
            raise CheckError(f"{side} side: vLLM's module is not the {side}'s here ({seen})")
        result = run_side(python, root, folder / "tests" / side, path, side)
        sides[side] = {"module": seen if side == "refimpl" else MODULE, **result}
    text = FINDINGS_DOC.read_text(encoding="utf-8") if FINDINGS_DOC.is_file() else ""
    for data in sides["refimpl"]["files"].values():
        for failure in data["failures"]:
            failure["named_in_findings"] = failure["test"].rsplit("::", 1)[-1] in text
    return {"tests": sides}


def run_oracle(python: Path, folder: Path, _root: Path, workers: int) -> dict[str, Any]:
    """The oracle on the release's module alone."""
    from vllmcheck.oracleruns import conformance

    print("vllmcheck: the oracle on the release's module", flush=True)
    summary = conformance(
        python, folder / "oracle" / "release", ["--impl", MODULE], [REPO], workers
    )
    print(f"vllmcheck: oracle: {_said(summary)}", flush=True)
    return {"oracle": summary}


def run_mixed(python: Path, folder: Path, _root: Path, workers: int) -> dict[str, Any]:
    """The four mixed deployments."""
    from vllmcheck.oracleruns import MIXED, conformance

    runs = []
    for index, (deployment, serde, writer, readers) in enumerate(MIXED, 1):
        print(f"vllmcheck: mixed: {deployment}, {serde} serde", flush=True)
        args = ["--writer", writer, "--readers", readers]
        summary = conformance(python, folder / "oracle" / f"mixed-{index}", args, [REPO], workers)
        print(f"vllmcheck: mixed: {_said(summary)}", flush=True)
        runs.append(
            {"deployment": deployment, "serde": serde, "writer": writer, "readers": readers}
            | summary
        )
    return {"mixed": runs}


def run_findings(python: Path, folder: Path, _root: Path, _workers: int) -> dict[str, Any]:
    """The seed-findings tests with the release as the seed."""
    from vllmcheck.findingruns import run

    print("vllmcheck: the seed-findings tests on the release's module", flush=True)
    result = run(python, folder / "findings", [REPO])
    if "error" not in result:
        print(
            f"vllmcheck: findings reproduced on the release: {', '.join(result['reproduced'])}; "
            f"not: {', '.join(f['id'] for f in result['not_reproduced']) or 'none'}",
            flush=True,
        )
    return {"findings": result}


def run_exchange(python: Path, folder: Path, _root: Path, _workers: int) -> dict[str, Any]:
    """Every value of `vllmcheck.exchange` both ways between the release and refimpl."""
    import json
    import os
    import subprocess

    from vllmcheck import RUN_ENV

    print("vllmcheck: values exchanged with the release, both ways", flush=True)
    env = {**os.environ, **RUN_ENV, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [str(python), "-m", "vllmcheck.exchange"],
        capture_output=True,
        text=True,
        env=env,
        cwd=folder,
        timeout=1800,
    )
    lines = done.stdout.strip().splitlines()
    try:
        result: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        result = {"error": f"exit {done.returncode}: {tail}"}
    print(f"vllmcheck: exchange: {result}", flush=True)
    return {"exchange": result}


STEP_RUNNERS = {
    "exchange": run_exchange,
    "tests": run_tests,
    "oracle": run_oracle,
    "mixed": run_mixed,
    "findings": run_findings,
}


def _said(summary: dict[str, Any]) -> str:
    if "error" in summary:
        return str(summary["error"])
    return (
        f"{summary['seed_status']}/{summary['properties']} properties with the seed's status, "
        f"{len(summary['better'])} better, {len(summary['worse'])} worse, "
        f"{summary['seconds']:.0f} s"
    )


def short_of_bar(entry: dict[str, Any]) -> list[str]:
    """What falls short of issue 48's bar, one line each."""
    from vllmcheck.oracleruns import judged_alone, judged_mixed

    short = []
    exchange = entry.get("exchange", {})
    short += [f"exchange: {exchange['error']}"] if "error" in exchange else []
    short += [f"exchange: {problem}" for problem in exchange.get("problems", [])]
    for side in ("release", "refimpl"):
        for path, data in entry["tests"][side]["files"].items():
            for failure in data["failures"]:
                if side == "release" or not failure.get("named_in_findings"):
                    short.append(f"{side}: {Path(path.split(' of ')[-1]).name}::{failure['test']}")
    short += [f"the sdist has no {m}" for m in entry["tests"]["release"]["missing"]]
    short += judged_alone(entry["oracle"])
    for run in entry["mixed"]:
        short += judged_mixed(f"{run['deployment']} ({run['serde']} serde)", run)
    return short


if __name__ == "__main__":
    raise SystemExit(main())
