"""`make check`: run every TLC model and compare it with its expected outcome.

The models are listed in `spec/models.toml` (the manifest): for each its
module and cfg, whether it must pass or which property it must violate,
whether it is in the quick profile, its bounds, the code it describes, and
its last measured distinct states, depth and time.  A must-pass model must
come out "ok"; a hazard model must FAIL on the named invariant (or, for
liveness models, on its temporal property).  The run exits 0 only if every
model did what the manifest says.

    python -m shmref check                 # every model
    python -m shmref check --quick         # small models only (tests)
    python -m shmref check --only MCRing   # one model (repeatable)
    python -m shmref check --spec-dir DIR  # e.g. a deliberately broken copy
    python -m shmref check --record        # also rewrite the measured columns (make spec-record)
                                           # and spec/README.md's models table
    python -m shmref check --jobs 1        # one model at a time, all workers each

Small models are bound by the JVM start and SANY's parse (one thread), so
`--jobs` (default: the number of cores) models run at once, each TLC with
`--workers` threads (default: cores // jobs), the longest (by the
manifest's measured time) first; results print as models finish and the
last line gives the wall-clock time.

The raw `-tool` output of each run goes to `<out>/<model>.out` (default
`build/tlc/`); the replayer reads the counterexamples from there.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TextIO

from shmref.core.paths import SPEC_DIR, cache_dir
from shmref.tlc.manifest import (
    INVARIANT,
    LIVENESS,
    PASS,
    CheckRun,
    Manifest,
    ManifestError,
    Measured,
    Model,
    load_manifest,
    record,
    record_check,
    regenerate_readme,
)
from shmref.tlc.options import parse_spec_args, spec_parser
from shmref.tlc.progress import Progress
from shmref.tlc.result import TlcRun
from shmref.tlc.runner import run_tlc
from shmref.tlc.tlavalues import TlcError

__all__ = ["INVARIANT", "LIVENESS", "MODELS", "PASS", "Model", "judge", "main"]

OUT_DIR = cache_dir("tlc", keyed_by_spec=False)  # TLC logs of `make check`
MANIFEST = SPEC_DIR / "models.toml"

try:
    MODELS: tuple[Model, ...] = load_manifest(MANIFEST).models
except ManifestError:  # reported by main(), one line
    MODELS = ()


@dataclass
class Result:
    model: Model
    verdict: str  # "PASS", "expected FAIL reproduced", "UNEXPECTED"
    run: TlcRun | None
    detail: str

    @property
    def good(self) -> bool:
        return self.verdict != "UNEXPECTED"


_PARSING = re.compile(r"^Parsing file (.+)$", re.M)
_AT_LINE = re.compile(r"at line (\d+), column (\d+)")
_SEMANTIC = re.compile(r"line (\d+), col (\d+) to line \d+, col \d+ of module (\w+)")


def locate_error(output: str, spec_dir: Path) -> str | None:
    """`file:line:col` of a TLC parse or semantic error, from its output."""
    marker = output.find("***Parse Error***")
    if marker >= 0:
        files = _PARSING.findall(output[:marker])
        where = _AT_LINE.search(output, marker)
        if files and where:
            return f"{files[-1].strip()}:{where.group(1)}:{where.group(2)}"
    where = _SEMANTIC.search(output)
    if where:
        return f"{spec_dir / (where.group(3) + '.tla')}:{where.group(1)}:{where.group(2)}"
    return None


def judge(model: Model, run: TlcRun) -> Result:
    """Compare a TLC run with the model's expected outcome."""
    if model.expect == PASS:
        if run.outcome == "ok":
            return Result(model, "PASS", run, "")
        what = run.error or f"{run.outcome} {run.violated or ''}".strip()
        return Result(model, "UNEXPECTED", run, f"must pass, got {what}")
    if model.expect == INVARIANT:
        if run.outcome == "invariant" and run.violated == model.prop:
            return Result(model, "expected FAIL reproduced", run, "")
    elif model.expect == LIVENESS:
        # TLC 2.15 does not name the violated temporal property; each
        # liveness model's cfg checks exactly one.
        if run.outcome == "liveness":
            return Result(model, "expected FAIL reproduced", run, "")
    what = run.error or f"{run.outcome} {run.violated or ''}".strip()
    return Result(model, "UNEXPECTED", run, f"must fail on {model.prop}, got {what}")


def _fmt_int(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


HEADER = ("model", "expected", "result", "violated", "distinct", "depth", "time")
WIDTHS = (20, 26, 25, 20, 11, 5, 7)


def print_result(res: Result) -> None:
    run = res.run
    violated = "-"
    if run is not None:
        violated = run.violated or ("(temporal)" if run.outcome == LIVENESS else "-")
    cells = (
        res.model.name,
        res.model.expected_text,
        res.verdict,
        violated,
        _fmt_int(run.distinct_states if run else None),
        _fmt_int(run.depth if run else None),
        f"{run.seconds:.1f}s" if run else "-",
    )
    print(_row(cells, WIDTHS), flush=True)
    if res.detail:
        print(f"    {res.detail}", flush=True)


def _missing(spec_dir: Path, model: Model) -> str | None:
    for name in (model.tla_file, model.cfg_file):
        if not (spec_dir / name).is_file():
            return f"{spec_dir / name}: no such file (model {model.name})"
    return None


def check_model(
    model: Model,
    spec_dir: Path,
    out_dir: Path,
    workers: int,
    timeout: float | None,
    shown: Progress | None = None,
) -> Result:
    missing = _missing(spec_dir, model)
    if missing:
        return Result(model, "UNEXPECTED", None, missing)
    started = time.monotonic()
    if shown is not None:
        shown.start(model.name)
    summary = f"TLC {model.tla_file}:"  # run_tlc's last line: the finished line says it

    def progress(line: str) -> None:
        if shown is not None:
            if not line.startswith(summary):
                shown.note(model.name, line)
            return
        print(
            f"    [{model.name} {time.monotonic() - started:.0f}s] {line}",
            file=sys.stderr,
            flush=True,
        )

    try:
        run = run_tlc(
            spec_dir / model.tla_file,
            spec_dir / model.cfg_file,
            workers=workers,
            short=model.quick,
            # only where the manifest says why (bounded models stop; 2.15 has
            # no CHECK_DEADLOCK)
            extra_args=("-deadlock",) if model.deadlock else (),
            timeout=timeout,
            progress=progress,
            log_path=out_dir / f"{model.name}.out",
        )
    except TlcError as exc:
        return Result(model, "UNEXPECTED", None, str(exc))
    where = locate_error(run.output, spec_dir) if run.outcome == "error" else None
    if where:
        return Result(model, "UNEXPECTED", run, f"{where}: {run.error}")
    return judge(model, run)


def select(models: Sequence[Model], names: Sequence[str] | None, quick: bool) -> list[Model]:
    chosen = [m for m in models if m.quick] if quick else [m for m in models if not m.deep]
    if names:
        known = {m.name: m for m in models}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise SystemExit(
                f"check: unknown model(s): {', '.join(unknown)} "
                f"(not in spec/models.toml; known: {', '.join(known)})"
            )
        chosen = [known[n] for n in names]
    return chosen


def _record(manifest: Manifest, results: Sequence[Result], run: CheckRun | None) -> None:
    """Measured columns (and a full run's wall time) into the manifest, the
    table into spec/README.md."""
    runs = [
        (r.model.name, Measured(r.run.distinct_states, r.run.depth, r.run.seconds))
        for r in results
        if r.good and r.run is not None
    ]
    updated = record(manifest, runs)
    if run is not None:
        updated = record_check(updated, run)
    regenerate_readme(manifest.path.parent / "README.md", updated.models, updated.check)
    print(f"check: recorded {len(runs)} model(s) in {manifest.path.name} and README.md", flush=True)


def write_measured(path: Path, results: Sequence[Result], total: float) -> None:
    """What this run measured, under build/ (not the tracked manifest: a
    plain `make check` leaves the checkout as it found it; `make
    spec-record` writes them into spec/models.toml and spec/README.md)."""
    measured = {
        r.model.name: {
            "verdict": r.verdict,
            "distinct": r.run.distinct_states if r.run else None,
            "depth": r.run.depth if r.run else None,
            "seconds": round(r.run.seconds, 1) if r.run else None,
        }
        for r in results
    }
    path.write_text(json.dumps({"seconds": round(total, 1), "models": measured}, indent=1) + "\n")
    print(f"check: measured in {path} (`make spec-record` records them)", flush=True)


def run_models(
    models: Sequence[Model],
    spec_dir: Path,
    out_dir: Path,
    jobs: int,
    workers: int | None,
    timeout: float | None,
    stream: TextIO | None = None,
) -> list[Result]:
    """Every model, `jobs` at a time (longest first); results in manifest order.
    Progress goes to `stream` (default stderr): a bar on a terminal, else a
    line per finished model; the results table to stdout."""
    jobs = max(1, jobs)
    per_model = workers or max(1, (os.cpu_count() or 1) // jobs)
    order = sorted(models, key=lambda m: -(m.measured.seconds or 0.0))
    done: dict[str, Result] = {}
    shown = Progress(len(order), stream or sys.stderr)
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [
                pool.submit(check_model, m, spec_dir, out_dir, per_model, timeout, shown)
                for m in order
            ]
            for future in as_completed(futures):
                res = future.result()
                shown.above(partial(print_result, res))
                states, seconds = (
                    (res.run.distinct_states, res.run.seconds) if res.run else (None, None)
                )
                shown.finish(res.model.name, res.verdict, states, seconds)
                done[res.model.name] = res
    finally:
        shown.close()
    return [done[m.name] for m in models]


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m shmref check`: TLC on the manifest's models, each against its expected result."""
    parser = spec_parser("check", __doc__)
    parser.add_argument("--quick", action="store_true", help="small models only")
    parser.add_argument(
        "--only", action="append", metavar="MODEL", help="run only this model (repeatable)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=OUT_DIR,
        help="folder for the raw TLC output (default: build/tlc/)",
    )
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="models run at once (default: cores)"
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="TLC workers per model (default: cores // jobs)"
    )
    parsed = parse_spec_args(parser, argv, "check")
    if parsed is None:
        return 2
    args, manifest = parsed
    spec_dir = args.spec_dir

    models = select(manifest.models, args.only, args.quick)
    out_dir = args.out.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"TLC models in {spec_dir} ({len(models)}), raw output in {out_dir}", flush=True)
    print(_row(HEADER, WIDTHS), flush=True)
    t0 = time.monotonic()
    results = run_models(models, spec_dir, out_dir, args.jobs, args.workers, args.timeout)
    bad = [r for r in results if not r.good]
    total = time.monotonic() - t0
    write_measured(out_dir / "measured.json", results, total)
    if args.record:
        full = not args.only and not args.quick and not bad
        jobs = max(1, args.jobs)
        run = CheckRun(len(results), total, jobs, os.cpu_count() or 1) if full else None
        _record(manifest, results, run)
    if bad:
        print(
            f"check: {len(bad)} of {len(results)} model(s) UNEXPECTED "
            f"({', '.join(r.model.name for r in bad)}), {total:.0f}s",
            flush=True,
        )
        return 1
    print(f"check: all {len(results)} model(s) as expected, {total:.0f}s", flush=True)
    return 0
