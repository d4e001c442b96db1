"""`python -m proofs` (`make proofs`): CrossHair on the allocator contracts,
then the differential check against the seed.

    python -m proofs                      # contracts + differential (a few minutes)
    python -m proofs --quick              # smaller budgets
    python -m proofs --broken             # the broken variants must be refuted
    python -m proofs --only contracts|diff

Exit status: 0 when no contract has a counterexample, no CrossHair run
errs and the seed's arithmetic agrees with the allocator's (or the seed
file is absent: the differential is then skipped, and says so);
1 otherwise. With `--broken`: 0 when every broken variant is refuted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

REPO = Path(__file__).resolve().parents[1]

# Every function with a PEP 316 contract, one CrossHair run each.
CONTRACT_TARGETS = (
    "refimpl.allocator.place",
    "refimpl.allocator.next_id",
    "refimpl.allocator.reclaim",
    "refimpl.allocator.lap_correct",
    "refimpl.allocator.freed_ids",
    "proofs.steps.allocate_any",
    "proofs.steps.allocate_bounds",
    "proofs.steps.allocate_step",
    "proofs.steps.allocate_ids",
    "proofs.steps.reclaim_any",
    "proofs.steps.reclaim_step",
    "proofs.steps.lap_step",
    "proofs.steps.freed_list",
    "proofs.steps.free_ids",
)

# Each must get at least one counterexample.
BROKEN_TARGETS = (
    "proofs.broken.place_straddle",
    "proofs.broken.place_early_wrap",
    "proofs.broken.place_overcommit",
    "proofs.broken.allocate_any_overcommit",
)

# (seed side, refimpl side) pairs for `crosshair diffbehavior`.
DIFF_PAIRS = (
    ("proofs.seeddiff.seed_allocate_diff", "proofs.seeddiff.ref_allocate_diff"),
    ("proofs.seeddiff.seed_free_diff", "proofs.seeddiff.ref_free_diff"),
)
BROKEN_DIFF_PAIRS = (
    ("proofs.seeddiff.seed_allocate_diff", "proofs.broken.ref_allocate_straddle_diff"),
)

_LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+): (?P<level>info|error|warning): (?P<msg>.*)$")


@dataclass
class Result:
    """One CrossHair run: a contract target or a diffbehavior pair."""

    name: str
    seconds: float
    returncode: int
    rows: list[tuple[str, str]] = field(default_factory=list)  # (condition, verdict)
    output: str = ""

    @property
    def counterexamples(self) -> int:
        return sum(verdict.startswith("COUNTEREXAMPLE") for _, verdict in self.rows)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _crosshair(args: Sequence[str], timeout: float) -> tuple[int, str, float]:
    began = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "crosshair", *args],
            cwd=REPO,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        code, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        code, output = 2, f"wall-clock timeout after {timeout:.0f} s\n{exc.stdout or ''}"
    return code, output, time.monotonic() - began


def _condition_text(path: str, line: int) -> str:
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()[line - 1].strip()
    except (OSError, IndexError):
        return f"{path}:{line}"


def check_target(target: str, per_condition: float) -> Result:
    """`crosshair check` on one function; one row per condition."""
    args = [
        "check",
        "--analysis_kind=PEP316",
        f"--per_condition_timeout={per_condition:g}",
        "--report_all",
        target,
    ]
    code, output, seconds = _crosshair(args, timeout=60 + 20 * per_condition)
    result = Result(target, seconds, code, output=output)
    for raw in output.splitlines():
        match = _LINE.match(raw)
        if not match:
            continue
        condition = _condition_text(match["path"], int(match["line"]))
        if not condition.startswith(("post", "pre", "inv")):
            condition = "(no post:) runs without raising under its pre:"
        msg = match["msg"]
        if match["level"] == "error":
            verdict = "COUNTEREXAMPLE: " + msg
        elif msg.startswith("Confirmed over all paths"):
            verdict = "proved (all paths)"
        elif msg.startswith("Not confirmed"):
            verdict = f"no counterexample in {per_condition:g} s"
        else:
            verdict = msg
        result.rows.append((condition, verdict))
    return result


def diff_pair(seed_fn: str, ref_fn: str, per_condition: float) -> Result:
    """`crosshair diffbehavior` on one pair."""
    args = ["diffbehavior", f"--per_condition_timeout={per_condition:g}", seed_fn, ref_fn]
    code, output, seconds = _crosshair(args, timeout=60 + 4 * per_condition)
    name = f"{seed_fn} vs {ref_fn}"
    result = Result(name, seconds, code, output=output)
    lines = [line for line in output.splitlines() if line.strip()]
    if code == 0:
        result.rows.append(("same behaviour", lines[0] if lines else "no differences found"))
    elif code == 1:
        result.rows.append(("same behaviour", "COUNTEREXAMPLE: " + " | ".join(lines[:3])))
    else:
        result.rows.append(("same behaviour", "ERROR: " + " | ".join(lines[-3:])))
    return result


def _run_all(jobs: list[Callable[[], Result]], workers: int) -> list[Result]:
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(lambda job: job(), jobs))


def _print_result(result: Result) -> None:
    print(f"\n{result.name}  ({result.seconds:.1f} s, crosshair exit {result.returncode})")
    for condition, verdict in result.rows:
        if len(verdict) <= 28:
            print(f"    {verdict:<28s}  {condition}")
        else:
            print(f"    {condition}\n      -> {verdict}")
    if not result.rows:
        print("    (no conditions reported)\n" + _indent(result.output))


def _indent(text: str, limit: int = 20) -> str:
    return "\n".join("      " + line for line in text.splitlines()[-limit:])


def _seed_available() -> bool:
    from proofs.seedring import _seed_text_path

    return _seed_text_path().is_file()


def run_contracts(per_condition: float, workers: int) -> bool:
    print(f"== CrossHair contracts (PEP 316, --per_condition_timeout={per_condition:g})")
    jobs = [lambda t=t: check_target(t, per_condition) for t in CONTRACT_TARGETS]
    results = _run_all(jobs, workers)
    ok = True
    for result in results:
        _print_result(result)
        failed = result.returncode != 0 or result.counterexamples > 0 or not result.rows
        ok = ok and not failed
    proved = sum(v.startswith("proved") for r in results for _, v in r.rows)
    bounded = sum(v.startswith("no counterexample") for r in results for _, v in r.rows)
    bad = sum(r.counterexamples for r in results)
    print(
        f"\ncontracts: {proved} proved over all paths, {bounded} without counterexample "
        f"within the budget, {bad} counterexamples"
    )
    return ok


def run_differential(per_condition: float, examples: int, workers: int) -> bool:
    print("\n== Differential: the seed's allocate_buf/free_buf vs refimpl.allocator")
    if not _seed_available():
        print("SKIPPED: seed text not found (set $SHMREF_SEED)")
        return True
    jobs = [lambda p=p: diff_pair(*p, per_condition) for p in DIFF_PAIRS]
    results = _run_all(jobs, workers)
    ok = True
    for result in results:
        _print_result(result)
        ok = ok and result.returncode == 0
    from proofs.lockstep import hypothesis_differential

    began = time.monotonic()
    divergence = hypothesis_differential(examples)
    seconds = time.monotonic() - began
    print(
        f"\nHypothesis: {examples} random op sequences (<= 30 ops, capacity 9..48 bytes, "
        f"id_max 2**31 or just above the most chunks that fit), {seconds:.1f} s"
    )
    if divergence is None:
        print("    no divergence; invariants held after every step")
    else:
        print("    DIVERGENCE\n" + _indent(str(divergence)))
        ok = False
    return ok


def run_broken(per_condition: float, workers: int, with_diff: bool) -> bool:
    print("== Broken variants: CrossHair must refute each")
    jobs = [lambda t=t: check_target(t, per_condition) for t in BROKEN_TARGETS]
    if with_diff and _seed_available():
        # a search for one input, not a proof: give it room (found in 30-130 s)
        budget = max(per_condition, 120.0)
        jobs += [lambda p=p: diff_pair(*p, budget) for p in BROKEN_DIFF_PAIRS]
    ok = True
    for result in _run_all(jobs, workers):
        _print_result(result)
        refuted = result.counterexamples > 0 and result.returncode == 1
        print(f"    => {'refuted, as it must be' if refuted else 'NOT REFUTED'}")
        ok = ok and refuted
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m proofs", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--per-condition-timeout",
        type=float,
        default=20.0,
        help="CrossHair CPU seconds per condition (default 20)",
    )
    parser.add_argument(
        "--diff-timeout",
        type=float,
        default=30.0,
        help="CrossHair CPU seconds per diffbehavior pair (default 30)",
    )
    parser.add_argument(
        "--examples",
        type=int,
        default=2000,
        help="Hypothesis op sequences in the differential (default 2000)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 2,
        help="CrossHair runs in parallel (default: CPU count)",
    )
    parser.add_argument("--quick", action="store_true", help="budgets 5 s / 10 s / 300 examples")
    parser.add_argument("--only", choices=("contracts", "diff"))
    parser.add_argument(
        "--broken", action="store_true", help="check that the broken variants are refuted instead"
    )
    parser.add_argument(
        "--write-record",
        action="store_true",
        help="when the run passes at the default budgets, write proofs/record.json (make proofs)",
    )
    parser.add_argument(
        "--check-record",
        action="store_true",
        help="run nothing: exit 0 if proofs/record.json is of these files, else 1 (CI)",
    )
    args = parser.parse_args(argv)
    if args.check_record:
        return check_record()
    full = all(
        getattr(args, budget) >= parser.get_default(budget)
        for budget in ("per_condition_timeout", "diff_timeout", "examples")
    )
    if args.write_record and (args.quick or args.only or args.broken or not full):
        parser.error("--write-record records the whole run at the default budgets or more")
    if args.quick:
        args.per_condition_timeout, args.diff_timeout, args.examples = 5.0, 10.0, 300

    if args.write_record:
        if not _seed_available():
            parser.error("--write-record needs the seed text: the differential is recorded too")
        shown = _Tee(sys.stdout)
        with contextlib.redirect_stdout(shown):
            code = _run(args)
        if code == 0:
            from proofs import record
            from proofs.seedring import _seed_text_path

            budgets = {
                "per_condition_timeout": args.per_condition_timeout,
                "diff_timeout": args.diff_timeout,
                "examples": args.examples,
            }
            lines = [line.strip() for line in shown.text().splitlines()]
            summary = [line for line in lines if line.startswith(_SUMMARY_STARTS)]
            print(f"recorded: {record.write(summary, budgets, _seed_text_path())}")
        return code
    return _run(args)


# the lines of a run's output that the record keeps
_SUMMARY_STARTS = (
    "contracts:",
    "proofs.seeddiff.",
    "-> No differences",
    "Hypothesis:",
    "no divergence",
)


class _Tee(io.StringIO):
    """Standard output, kept as well (the record's summary lines)."""

    def __init__(self, out: TextIO) -> None:
        super().__init__()
        self.out = out

    def write(self, text: str) -> int:
        self.out.write(text)
        return super().write(text)

    def text(self) -> str:
        return self.getvalue()


def check_record() -> int:
    """`--check-record`: the full-budget record stands for these files."""
    from proofs import record
    from proofs.seedring import _seed_text_path

    seed = _seed_text_path()
    problem = record.problem(seed if seed.is_file() else None)
    if problem:
        print(f"proofs: {problem}", file=sys.stderr)
        return 1
    data = json.loads(record.RECORD.read_text(encoding="utf-8"))
    said = "" if seed.is_file() else " (no seed file here: its digest not compared)"
    print(f"proofs/record.json ({data['made']}) stands for these files{said}:")
    for line in data["summary"]:
        print(f"    {line}")
    return 0


def _run(args: argparse.Namespace) -> int:
    began = time.monotonic()
    if args.broken:
        ok = run_broken(args.per_condition_timeout, args.jobs, with_diff=args.only != "contracts")
    else:
        ok = True
        if args.only in (None, "contracts"):
            ok = run_contracts(args.per_condition_timeout, args.jobs) and ok
        if args.only in (None, "diff"):
            ok = run_differential(args.diff_timeout, args.examples, args.jobs) and ok
    print(f"\n{'OK' if ok else 'FAILED'} in {time.monotonic() - began:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
