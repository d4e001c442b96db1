"""`make check`: run every TLC model and compare it with its expected outcome.

Each model in `MODELS` is a pair `spec/<name>.tla` + `spec/<name>.cfg`.  A
must-pass model must come out "ok"; a hazard model must FAIL on the named
invariant (or, for liveness models, on its temporal property).  The run
exits 0 only if every model did what the table says.

    python -m shmref.check                 # every model (< 10 min on 2 cores)
    python -m shmref.check --quick         # small models only (tests)
    python -m shmref.check --only MCRing   # one model (repeatable)
    python -m shmref.check --spec-dir DIR  # e.g. a deliberately broken copy

The raw `-tool` output of each run goes to `<out>/<model>.out` (default
`build/tlc/`); the replayer reads the counterexamples from there.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from shmref.tlc import TlcError, TlcRun, find_jar, find_java, run_tlc

ROOT = Path(__file__).resolve().parents[1]
SPEC_DIR = ROOT / "spec"
OUT_DIR = ROOT / "build" / "tlc"

PASS = "pass"
INVARIANT = "invariant"
LIVENESS = "liveness"


@dataclass(frozen=True)
class Model:
    """One TLC model and what it must do."""

    name: str
    expect: str  # PASS, INVARIANT or LIVENESS
    prop: str | None  # the invariant / temporal property that must fail
    quick: bool  # part of --quick
    what: str  # one line: what the model checks

    @property
    def expected_text(self) -> str:
        return "pass" if self.expect == PASS else f"FAIL {self.prop}"


MODELS: tuple[Model, ...] = (
    # allocator
    Model("MCRing", PASS, None, False, "allocator, whole graph dumpable"),
    Model("MCRingLarge", PASS, None, False, "allocator, N = 5, sizes 1 and 3"),
    Model(
        "MCRingIdCollision",
        INVARIANT,
        "IdRangeUnambiguous",
        True,
        "H-IdCollision in the ring: ID_MAX live chunks",
    ),
    Model("MCRingFixed", PASS, None, True, "F1 closes H-IdCollision in the ring"),
    # storage, must pass
    Model("MCStorage", PASS, None, False, "seed protocol under A1-A3 (main model)"),
    Model("MCStorageSmall", PASS, None, True, "seed protocol under A1-A3, forged handles"),
    Model("MCStorageFixed", PASS, None, False, "FIXED, clear at any time, ID_MAX < N"),
    Model("MCStorageFixedSmall", PASS, None, True, "FIXED, small (for --quick)"),
    Model("MCDoubleReadFixed", PASS, None, False, "FIXED survives double reads (atomic get_end)"),
    Model("MCLive", PASS, None, False, "EveryPutReclaimable under A1-A3"),
    Model("MCCopyFailFixed", PASS, None, False, "F3: failed copies still release"),
    # storage, hazards
    Model("MCIdCollision", INVARIANT, "LiveIdsDistinct", True, "H-IdCollision"),
    Model("MCIdWrap", INVARIANT, "ReadsReturnPutValue", True, "H-IdWrap (ABA), even FIXED"),
    Model("MCDoubleRead", INVARIANT, "ReadsReturnPutValue", True, "H-DoubleRead: foreign value"),
    Model(
        "MCDoubleReadCount",
        INVARIANT,
        "CountsSound",
        False,
        "H-DoubleRead: late increment inflates a new chunk",
    ),
    Model("MCClearInFlight", INVARIANT, "ReadsReturnPutValue", False, "H-ClearInFlight"),
    Model(
        "MCClearDrain",
        INVARIANT,
        "ReadsReturnPutValue",
        True,
        "H-ClearDrain: pending read begins between clear and reuse",
    ),
    Model(
        "MCEndWindow",
        INVARIANT,
        "CountsSound",
        True,
        "H-EndWindow: writer step between F2's re-check and the increment",
    ),
    Model(
        "MCEndWindowClear",
        INVARIANT,
        "CountsSound",
        True,
        "H-EndWindow: clear while draining, FIXED, A1",
    ),
    Model("MCLostReader", LIVENESS, "EveryPutReclaimable", True, "H-LostReader: dropped delivery"),
    Model(
        "MCCopyFail",
        LIVENESS,
        "EveryPutReclaimable",
        False,
        "H-LostReader: deserialize failure pins",
    ),
)


@dataclass
class Result:
    model: Model
    verdict: str  # "PASS", "expected FAIL reproduced", "UNEXPECTED"
    run: TlcRun | None
    detail: str

    @property
    def good(self) -> bool:
        return self.verdict != "UNEXPECTED"


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


def check_model(
    model: Model, spec_dir: Path, out_dir: Path, workers: int, timeout: float | None
) -> Result:
    spec = spec_dir / f"{model.name}.tla"
    cfg = spec_dir / f"{model.name}.cfg"
    started = time.monotonic()

    def progress(line: str) -> None:
        print(
            f"    [{model.name} {time.monotonic() - started:.0f}s] {line}",
            file=sys.stderr,
            flush=True,
        )

    try:
        run = run_tlc(
            spec,
            cfg,
            workers=workers,
            extra_args=("-deadlock",),  # bounded models stop; 2.15 has no CHECK_DEADLOCK
            timeout=timeout,
            progress=progress,
            log_path=out_dir / f"{model.name}.out",
        )
    except TlcError as exc:
        return Result(model, "UNEXPECTED", None, str(exc))
    return judge(model, run)


def select(names: Sequence[str] | None, quick: bool) -> list[Model]:
    models = [m for m in MODELS if m.quick] if quick else list(MODELS)
    if names:
        known = {m.name: m for m in MODELS}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise SystemExit(f"unknown model(s): {', '.join(unknown)}; known: {', '.join(known)}")
        models = [known[n] for n in names]
    return models


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shmref.check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="small models only")
    parser.add_argument(
        "--only", action="append", metavar="MODEL", help="run only this model (repeatable)"
    )
    parser.add_argument(
        "--spec-dir",
        type=Path,
        default=SPEC_DIR,
        help="folder with the .tla/.cfg files (default: spec/)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=OUT_DIR,
        help="folder for the raw TLC output (default: build/tlc/)",
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--timeout", type=float, default=None, help="seconds per model before giving up"
    )
    args = parser.parse_args(argv)

    try:
        find_java()
        find_jar()
    except TlcError as exc:
        print(f"check: {exc}", file=sys.stderr)
        return 2

    models = select(args.only, args.quick)
    spec_dir = args.spec_dir.resolve()
    out_dir = args.out.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"TLC models in {spec_dir} ({len(models)}), raw output in {out_dir}", flush=True)
    print(_row(HEADER, WIDTHS), flush=True)
    results: list[Result] = []
    t0 = time.monotonic()
    for model in models:
        res = check_model(model, spec_dir, out_dir, args.workers, args.timeout)
        print_result(res)
        results.append(res)
    bad = [r for r in results if not r.good]
    total = time.monotonic() - t0
    if bad:
        print(
            f"check: {len(bad)} of {len(results)} model(s) UNEXPECTED "
            f"({', '.join(r.model.name for r in bad)}), {total:.0f}s",
            flush=True,
        )
        return 1
    print(f"check: all {len(results)} model(s) as expected, {total:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
