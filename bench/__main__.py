"""`python -m bench [--quick] [--out PATH] [--update-readme] [--only SECTION ...]`.

Every run also draws its plots (bench/plots.py): into docs/bench/ when the
results go to bench/results.json, else beside the results file.
`--plots-only` and `--report-only` measure nothing: they redraw the recorded
results' plots (and, with --update-readme, README.md's section and
docs/bench.md; `make bench-plots`)."""

from __future__ import annotations

import argparse
import datetime
import json
import math
import multiprocessing as mp
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from bench import (
    conformancebench,
    cpu,
    instructions,
    plots,
    replaybench,
    report,
    ruststore,
    store,
    stress,
    tlcbench,
)
from bench.common import BENCH_DIR, REPO, cleanup_guard, load_native, progress
from shmref.session import shmtrack

SECTIONS = ("store", "cpu", "instructions", "tlc", "replay", "mutants", "conformance", "rust")
# Minutes each (valgrind; four conformance runs): --quick runs them only when named.
SLOW_SECTIONS = {"instructions", "conformance"}

NOTES = [
    "native_store (examples/native_store) has its ring, headers, counts and copies in C "
    "and reuses refimpl's serde and HMAC signatures in Python; `cold copy` is one "
    "memcpy into memory the cache does not hold (bench/coldcopy.py).",
    "Every store is given one serializer (`refimpl.serde.MsgpackOnlySerde`, "
    "bench.common.BENCH_SERDE), so a ratio measures the ring and the store, not msgpack.",
    "put = `put` + `get_signature` (a signed handle, as vLLM hands out); get = `get` in a "
    "reader process: HMAC check, id check, deserialize, count under the reader lock.",
    "The plain copy writes the value's bytes into a segment and each reader copies "
    "them out (`bytes(view)`), over the same processes and pipes: the physical limit.",
    "cProfile's own overhead inflates Python-level steps; read the shares as where the "
    "interpreter spends its time, not as exact costs.",
    "At 1 MiB a put+get is two memcpys for refimpl, the seed and the plain copy alike "
    "(copies table), with no page fault in the steady state (faults column) and nearly "
    "the same instructions (callgrind table): their wall-time ratio there is decided by "
    "the machine's memory traffic and other load, which the quartiles of the paired "
    "ratio show; CPU time and instructions are the load-independent comparison.",
]


def _finite(value: Any) -> Any:
    """JSON has no infinity: replace non-finite floats by None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def section_dates(meta: dict[str, Any]) -> dict[str, str]:
    """section -> the day it was measured, from a run's meta (a merged run's
    date already reads "cpu 2026-12-03, store 2026-12-04")."""
    parts = [part.split(" ") for part in str(meta["date"]).split(", ")]
    if all(len(part) == 2 for part in parts):
        return {section: day for section, day in parts}
    return {section: str(meta["date"]) for section in meta["sections"]}


def merge(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs' results as one: every section, notes without repeats,
    the sections and seconds of all in `meta`."""
    merged: dict[str, Any] = {}
    for results in runs:
        for key, value in results.items():
            if key not in ("meta", "notes", "leaks"):
                merged[key] = value
    meta = dict(runs[0]["meta"])
    dates = {s: d for r in runs for s, d in section_dates(r["meta"]).items()}
    if len(set(dates.values())) > 1:  # say which section was measured when
        meta["date"] = ", ".join(f"{s} {d}" for s, d in sorted(dates.items()))
    meta["sections"] = sorted({s for r in runs for s in r["meta"]["sections"]})
    meta["seconds"] = sum(r["meta"]["seconds"] for r in runs)
    if "load_average_at_end" in runs[-1]["meta"]:
        meta["load_average_at_end"] = runs[-1]["meta"]["load_average_at_end"]
    merged["meta"] = meta
    # a later run's note on the same subject ("stress seed: ...") replaces an earlier one
    notes = {_subject(n): n for r in runs for n in r.get("notes", [])}
    merged["notes"] = list(notes.values())
    return merged


def _subject(note: str) -> str:
    head, sep, _ = note.partition(": ")
    return head if sep and len(head) < 60 else note


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small sizes and iterations: checks the benchmark runs (CI)",
    )
    parser.add_argument(
        "--reduced",
        action="store_true",
        help="the store section at the full sizes with one reader and few repetitions "
        "(a check on a shared machine, not the published numbers)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=BENCH_DIR / "results.json",
        help="results file, or a folder to write results.json into",
    )
    parser.add_argument(
        "--update-readme",
        action="store_true",
        help="replace README.md's section between the bench markers",
    )
    parser.add_argument(
        "--only", action="append", choices=SECTIONS, help="run only this section (repeatable)"
    )
    parser.add_argument(
        "--report-only",
        type=Path,
        nargs="+",
        metavar="RESULTS_JSON",
        help="measure nothing: print (and with --update-readme, put in "
        "README.md) the tables of earlier runs' results (several: their "
        "sections merged, e.g. a run of --only conformance beside one of the rest)",
    )
    parser.add_argument(
        "--plots-only",
        action="store_true",
        help="measure nothing: draw the plots of bench/results.json (or of --report-only's "
        "files) into --plots",
    )
    parser.add_argument(
        "--plots",
        type=Path,
        default=None,
        metavar="DIR",
        help="folder for the SVG plots (default: docs/bench/ for bench/results.json, "
        "else the results file's folder; --update-readme: always docs/bench/)",
    )
    args = parser.parse_args(argv)
    if args.report_only is not None or args.plots_only:
        return _from_recorded(args)
    sections = set(args.only or SECTIONS)
    if args.quick and not args.only:
        sections -= SLOW_SECTIONS
    out = args.out / "results.json" if args.out.is_dir() else args.out

    started = time.monotonic()
    results: dict[str, Any] = {
        "meta": {
            "quick": args.quick,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "date": datetime.date.today().isoformat(),
            "sections": sorted(sections),
            "load_average_at_start": os.getloadavg()[0],
        }
    }
    notes = list(NOTES)
    if sections & SLOW_SECTIONS != SLOW_SECTIONS and args.quick:
        notes.append("--quick leaves out " + ", ".join(sorted(SLOW_SECTIONS - sections)) + ".")
    try:
        with cleanup_guard():
            seed = None
            if {"store", "cpu"} & sections:
                try:
                    from shmref.seed.build import SeedError, build_seed_module

                    seed = build_seed_module()
                except SeedError as exc:
                    notes.append(f"seed not measured: {exc}")
            if "store" in sections:
                config = store.QUICK if args.quick else store.FULL
                if args.quick:
                    notes.append("--quick: the largest value is 64 KiB, not 1 MiB.")
                if args.reduced:
                    config = store.REDUCED
                    notes.append(
                        "--reduced: one reader, 5 repetitions of one round, at most "
                        "500 objects a round: a check on a shared machine."
                    )
                _native, why_not = load_native()
                if why_not is not None:
                    notes.append(f"native_store not measured: {why_not}")
                results["store"] = store.run(config, seed)
            if "cpu" in sections:
                results["cpu"] = cpu.run(args.quick, seed)
            if "instructions" in sections:
                results["instructions"] = instructions.run(args.quick)
            stress.bench_section(results, notes, args.quick, sections)  # issue 19's load
            if "tlc" in sections:
                results["tlc"] = tlcbench.run(args.quick)
            if {"replay", "mutants"} & sections:
                config_r = replaybench.QUICK if args.quick else replaybench.FULL
                if args.quick:
                    notes.append(
                        "--quick: edge coverage uses a smaller allocator model "
                        "(bench/MCRingQuick.cfg) and stops after "
                        f"{config_r.edge_seconds:g} s of replay."
                    )
                found = replaybench.run(config_r, sections)
                if found:
                    results["replay"] = found
            if "conformance" in sections:
                results["conformance"] = conformancebench.run()
            if "rust" in sections:
                results["rust"] = ruststore.run(args.quick)
    except KeyboardInterrupt:
        progress("interrupted: segments and reader processes cleaned up")
        return 130
    finally:
        leaked = sorted(shmtrack.leaked())
        children = [p.pid for p in mp.active_children()]
        if leaked or children:
            print(f"bench: LEAKED segments {leaked}, processes {children}", file=sys.stderr)

    results["meta"]["seconds"] = time.monotonic() - started
    results["meta"]["load_average_at_end"] = os.getloadavg()[0]
    results["notes"] = notes
    results["leaks"] = {
        "segments": leaked,
        "processes": children,
        "segments_created": len(shmtrack.created()),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(_finite(results), indent=1) + "\n", encoding="utf-8")
    print(report.markdown(results))
    progress(f"results written to {out}")
    if args.update_readme:
        written = report.publish(results, REPO)
        progress("updated: " + ", ".join(str(p.relative_to(REPO)) for p in written))
    else:
        default = out.resolve() == (BENCH_DIR / "results.json").resolve()
        folder = args.plots or (plots.PLOTS_DIR if default else out.parent)
        svgs = plots.write(results, folder)
        progress("plots: " + ", ".join(str(p) for p in svgs))
    return 1 if leaked or children else 0


def _from_recorded(args: argparse.Namespace) -> int:
    """--report-only / --plots-only: tables, plots and pages from recorded results."""
    paths = args.report_only or [BENCH_DIR / "results.json"]
    try:
        results = merge([json.loads(p.read_text("utf-8")) for p in paths])
        if not args.plots_only:
            print(report.markdown(results))
        if args.update_readme:  # README links the plots in docs/bench/: all three together
            written = report.publish(results, REPO)
        else:
            written = plots.write(results, args.plots or plots.PLOTS_DIR)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        what = " ".join(map(str, paths))
        print(f"bench: cannot draw from {what}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    progress("written: " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
