"""`python -m shmref itf`: TLC's traces exported as ITF, ITF files checked,
replayed on a module and (recordings) validated by TLC. The file format
itself is shmref/traces/itf.py; this is the command above it.

    python -m shmref itf export MCDoubleRead --out build/itf/doubleread.itf.json
    python -m shmref itf export MCStorage --simulate 5 --depth 30 --out build/itf/sim
    python -m shmref itf check FILE          # schema check, exit 2 on bad input
    python -m shmref itf replay FILE --impl refimpl   # an ITF trace on a module
    python -m shmref itf validate FILE       # a recording, by TLC (exit 0/1/2)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shmref import tlc
from shmref.core.paths import SPEC_DIR
from shmref.seed.impl import load_impl
from shmref.tlc.manifest import ManifestError, model_files
from shmref.traces import itf
from shmref.traces.itf_schema import ItfError
from shmref.traces.recording import Recording
from shmref.traces.replay import Replayer, read_constants
from shmref.traces.tracecheck import tla_value, validate_either, validate_recording


def export_model(
    model: str,
    out: Path,
    simulate: tuple[int, int, int] | None = None,
    spec_dir: Path | None = None,
) -> list[Path]:
    """Run TLC on spec/MODEL and write its counterexample, or `simulate`'s
    traces (num, depth, seed), as ITF files; returns the files written."""
    folder = spec_dir or SPEC_DIR
    try:  # the manifest names the model's module (shared by several models)
        tla, cfg = model_files(model, folder)
    except ManifestError as exc:
        raise ItfError(f"no model {model}: {exc}") from None
    if not tla.is_file() or not cfg.is_file():
        raise ItfError(f"no model {model}: {tla.name}/{cfg.name} not in {folder}")
    constants = read_constants(cfg)
    if simulate is not None:
        with tempfile.TemporaryDirectory(prefix="shmref-itf-") as tmp:
            run = tlc.run_tlc(
                tla, cfg, workers=1, simulate=simulate, simulate_dir=Path(tmp) / "traces"
            )
            if run.outcome not in ("ok", "invariant"):
                raise tlc.TlcError(f"simulating {model}: {run.summary()}")
            traces = tlc.read_simulation_traces(Path(tmp) / "traces")
        written = []
        for k, trace in enumerate(traces):
            path = Path(out) / f"{model}-{k:03d}.itf.json"
            itf.write_json(itf.trace_to_itf(trace, constants, f"{model}.tla simulation #{k}"), path)
            written.append(path)
        return written
    run = tlc.run_tlc(tla, cfg, workers=1)
    if run.trace is None:
        raise ItfError(
            f"{model}: TLC found no counterexample ({run.summary()}); "
            f"export simulation traces with --simulate NUM"
        )
    what = f"{model}.tla counterexample: {run.outcome} {run.violated or ''}".rstrip()
    itf.write_json(itf.trace_to_itf(run.trace, constants, what), Path(out))
    return [Path(out)]


def replay_file(path: Path, impl: Any, name: str | None = None) -> Any:
    """Replay an ITF trace on a Python implementation with shmref.traces.replay
    (the constants come from the file, written as a model cfg)."""
    trace, constants = itf.read_trace(path)
    with tempfile.TemporaryDirectory(prefix="shmref-itf-") as tmp:
        cfg = Path(tmp) / "constants.cfg"
        cfg.write_text("".join(f"{k} = {tla_value(v)}\n" for k, v in constants.items()))
        replayer = Replayer(impl, cfg)
    return replayer.replay(trace, name or str(path))


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m shmref itf`: export, read, replay or validate ITF traces."""
    parser = argparse.ArgumentParser(
        prog="python -m shmref itf",
        description=(itf.__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    export = sub.add_parser("export", help="TLC counterexample or simulation traces -> ITF")
    export.add_argument("model", help="a model of spec/, e.g. MCDoubleRead or MCStorage")
    export.add_argument(
        "--out", type=Path, required=True, help="the file (counterexample) or folder (--simulate)"
    )
    export.add_argument("--simulate", type=int, metavar="NUM", help="NUM simulation traces")
    export.add_argument("--depth", type=int, default=40)
    export.add_argument("--seed", type=int, default=20261202)
    check = sub.add_parser("check", help="schema-check an ITF trace or recording")
    check.add_argument("file", type=Path)
    replay = sub.add_parser("replay", help="replay an ITF trace on a Python implementation")
    replay.add_argument("file", type=Path)
    replay.add_argument("--impl", default="refimpl", help="module name, or 'seed'")
    validate = sub.add_parser("validate", help="trace-validate an ITF recording with TLC")
    validate.add_argument("file", type=Path)
    validate.add_argument("--out", type=Path, help="keep the generated module and TLC's output")
    validate.add_argument(
        "--spec",
        choices=("either", "fixed", "seed"),
        default="either",
        help="the protocol of refimpl (FIXED), of the seed, or either",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "export":
            sim = (args.simulate, args.depth, args.seed) if args.simulate else None
            for path in export_model(args.model, args.out, sim):
                print(path)
            return 0
        if args.command == "check":
            doc = itf.load_json(args.file)
            kind = doc.get("#meta", {}).get("kind") if isinstance(doc, dict) else None
            if kind == "recording":
                _constants, log, _observed = itf.recording_from_itf(doc)
                print(f"{args.file}: a valid recording of {len(log)} calls")
            else:
                trace, _constants = itf.trace_from_itf(doc)
                print(f"{args.file}: a valid trace of {len(trace.states)} states")
            return 0
        if args.command == "replay":
            try:
                module = load_impl(args.impl)
            except ImportError as exc:
                raise ItfError(f"--impl {args.impl}: cannot import: {exc}") from None
            report = replay_file(args.file, module)
            print(report.table())
            return 0 if report.ok else 1
        recording = Recording.load(args.file)
        if args.spec == "either":
            result = validate_either(recording, out_dir=args.out)
        else:
            result = validate_recording(
                recording, switches={"FIXED": args.spec == "fixed"}, out_dir=args.out
            )
        print(result.explain())
        return 0 if result.accepted else 1
    except ItfError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except tlc.TlcError as exc:
        print(f"TLC: {exc}", file=sys.stderr)
        return 2
