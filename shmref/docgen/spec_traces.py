"""`make spec-traces`: TLC's counterexamples, simulation corpora and state
graph that the oracle replays, made once from the spec into
`spec/traces/` (read by shmref.traces.shipped).

Each hazard (and picture) model gets the counterexample of TLC's
breadth-first search with one worker (the shortest; stable for a safety
property) and SIMULATED more from `-simulate` runs with fixed seeds that
reach the violation, so a store is judged on several distinct
counterexamples, never on the one a machine happened to draw. For a storage
model, each counterexample also records where the fixed protocol (the spec
with FIXED = TRUE, refimpl's) leaves it: the first step whose outcome
differs, asked of TLC by trace validation (TraceShmObjectStorage.tla) with
the counterexample's calls and no results.

Run from a checkout (it writes into the package's spec folder). Slow only
for TLC: about a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import io
import json
import lzma
import re
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shmref import tlc
from shmref.core.paths import SPEC_DIR, checkout
from shmref.docgen.pictures import PICTURES
from shmref.oracle.hazards import HAZARDS
from shmref.tlc.manifest import model_files
from shmref.traces.recording import Recording
from shmref.traces.replay import describe, read_constants
from shmref.traces.shipped import (
    MANIFEST_NAME,
    TRACES_DIR,
    WALK_STEPS,
    file_digest,
    model_digest,
    read_graph,
)
from shmref.traces.tracecheck import call_of, run_log

SIMULATED = 5  # counterexamples from -simulate per model, besides the BFS one
SIM_DEPTH = 30
SIM_NUM = 2000  # traces per seed before a seed is given up
SEEDS = range(1, 60)
TIMEOUT = 600.0
# Trace messages kept from TLC's -tool output: the violation, the states, the lasso.
KEPT_CODES = (2110, 2114, 2116, 2121, 2122, 2217, 2218, 2264)
# Counterexamples TLC drew elsewhere and a user's cache kept (tests/data/), shipped
# beside the ones made here: a verdict must hold on them too.
SAVED: dict[str, tuple[tuple[str, str, str], ...]] = {
    "MCCopyFail": (
        (
            "saved-lasso",
            "tests/data/MCCopyFail-short-lasso.out",
            "BFS, fp 7, 1 worker, drawn on a loaded machine (2026-12-06)",
        ),
    ),
}


@dataclass(frozen=True)
class Corpus:
    name: str
    model: str
    num: int  # traces per TLC worker
    depth: int
    seed: int
    workers: int = 2  # each worker draws its own traces from the seed: part of the corpus


# The corpora the suite replayed when TLC made them on a user's 2-core machine: the
# same traces now ship (one worker draws other ones: fewer reach the free steps that
# tell MCStorageWide's units from MCStorage's, tests/oracle/test_layout_claim.py).
CORPORA = (
    Corpus("MCRing", "MCRing", 100, 40, 20261202),
    Corpus("MCStorage", "MCStorage", 150, 40, 20261202),
    Corpus("MCStorageWide", "MCStorageWide", 150, 40, 20261202),
    Corpus("MCStorage-seeded", "MCStorage", 60, 30, 7),
)
GRAPHS = ("MCRing",)
# The actions spec/TraceShmObjectStorage.tla performs (its Perform): a fixed path ends
# before any other.
# A closing step's "fixed" outcome where the fixed protocol cannot take that step at all
# (no store outcome is ever this).
NOT_TAKEN = "(no such step)"
PERFORMED = frozenset(
    "put get_cached touch release_touches free_unused clear get_begin get_copy get_end".split()
)


def counterexample_models() -> list[str]:
    return sorted({h.model for h in HAZARDS} | {p.model for p in PICTURES})


# -- counterexamples --------------------------------------------------------------------


def trimmed(output: str, header: str) -> str:
    """TLC's -tool output cut to the messages a counterexample needs, under a
    header line (text outside messages, which the parser skips)."""
    kept = [f"shmref: {header}\n"]
    for message in tlc.parse_tool_output(output):
        if message.code in KEPT_CODES:
            kept.append(
                f"@!@!@STARTMSG {message.code}:{message.severity} @!@!@\n"
                f"{message.body}\n@!@!@ENDMSG {message.code} @!@!@\n"
            )
    return "".join(kept)


def shape(trace: tlc.Trace) -> tuple[Any, ...]:
    """What makes two counterexamples distinct: their steps and their lasso."""
    steps = tuple(repr(sorted(s.vars.items())) for s in trace.states)
    return (steps, trace.back_to, trace.stuttering)


def draw(model: str, say: Any, simulated: int = SIMULATED) -> list[tuple[str, str, str]]:
    """(name, how it was made, trimmed output) per distinct counterexample."""
    files = model_files(model, SPEC_DIR)
    made: list[tuple[str, str, str]] = []
    seen: set[tuple[Any, ...]] = set()
    run = tlc.run_tlc(*files, workers=1, extra_args=("-deadlock",), timeout=TIMEOUT)
    if run.trace is None:
        raise tlc.TlcError(f"{model}: TLC found no counterexample: {run.summary()}")
    how = "TLC breadth-first search, 1 worker, -deadlock"
    made.append(("bfs", how, trimmed(run.output, f"{model}, {how}")))
    seen.add(shape(run.trace))
    for seed in SEEDS:
        if len(made) > simulated:
            break
        run = tlc.run_tlc(
            *files,
            workers=1,
            simulate=(SIM_NUM, SIM_DEPTH, seed),
            extra_args=("-deadlock",),
            timeout=TIMEOUT,
        )
        if run.trace is None or shape(run.trace) in seen:
            continue
        seen.add(shape(run.trace))
        how = f"TLC -simulate num={SIM_NUM} -depth {SIM_DEPTH} -seed {seed}, 1 worker"
        made.append((f"sim-{seed}", how, trimmed(run.output, f"{model}, {how}")))
    if len(made) <= simulated:
        say(f"{model}: only {len(made)} distinct counterexamples in seeds {SEEDS}")
    return made


def closing(model: str, trace: tlc.Trace) -> dict[str, Any] | None:
    """Where the fixed protocol leaves the counterexample: TLC, by trace
    validation, performs its calls (arguments only; a copy's failure is the
    environment's, so kept) with FIXED = TRUE; the first step whose outcome
    differs from the counterexample's is the closing step."""
    constants = read_constants(SPEC_DIR / f"{model}.cfg")
    if "Readers" not in constants or "key_index" not in trace.states[0].vars:
        return None  # the ring's models and MCHotKey: no trace validation spec
    readers = sorted(constants["Readers"])
    steps, log = [], []
    for state in trace.states[1:]:
        action = dict(state.vars["last_action"])
        if action["name"] not in PERFORMED:
            break  # the trace validation spec performs no other action
        entry = call_of(action)
        if "reader" in entry:
            entry["reader"] = readers.index(entry["reader"])
        if action["name"] == "get_copy":
            entry["outcome"] = action["outcome"]
        steps.append((state.index, action))
        log.append(entry)
    switches = {k: constants[k] for k in ("CLEAR_WHEN", "A1", "A3", "LOSSY", "COPY_FAIL")}
    switches["FIXED"] = True
    recording = Recording(
        {
            "N": constants["N"],
            "ID_MAX": constants["ID_MAX"],
            "MAX_OBJ": constants["MAX_OBJ"],
            "R": len(readers),
        },
        log,
    )
    fixed = fixed_outcomes(recording, switches)
    for (index, action), outcome in zip(steps, fixed, strict=False):
        if outcome != action["outcome"]:
            return {
                "step": index,
                "call": describe(call_of(action)),
                "seed": action["outcome"],
                "fixed": outcome,
            }
    if len(fixed) < len(steps):
        index, action = steps[len(fixed)]
        return {
            "step": index,
            "call": describe(call_of(action)),
            "seed": action["outcome"],
            "fixed": NOT_TAKEN,
        }
    return None


def fixed_outcomes(recording: Recording, switches: dict[str, Any]) -> list[str]:
    """The outcome of each call the fixed protocol can perform in order."""
    log = recording.log
    run = run_log(recording, switches, None, TIMEOUT)
    if run.outcome != "invariant":  # TraceIncomplete holds: log[depth] cannot be performed
        log = log[: min(max((run.depth or 1) - 1, 0), len(log) - 1)]
        run = run_log(Recording(recording.constants, log), switches, None, TIMEOUT)
    if run.outcome != "invariant" or run.trace is None:
        raise tlc.TlcError(f"trace validation of the fixed protocol: {run.summary()}")
    states = run.trace.states
    outcomes = []
    for j, entry in enumerate(log, start=1):
        before, after = states[j - 1].vars, states[j].vars
        if {k: v for k, v in before.items() if k != "i"} == {
            k: v for k, v in after.items() if k != "i"
        }:  # a no-op the spec leaves out (TraceShmObjectStorage's NoOp)
            outcomes.append("KeyError" if entry["name"] == "get_cached" else "ok")
        else:
            outcomes.append(str(after["last_action"]["outcome"]))
    return outcomes


# -- corpora and graphs ----------------------------------------------------------------------


def make_corpus(corpus: Corpus, path: Path) -> int:
    """The simulation's trace files, as TLC wrote them, in one tar.xz."""
    work = Path(tempfile.mkdtemp(prefix="shmref-corpus-"))
    try:
        run = tlc.run_tlc(
            *model_files(corpus.model, SPEC_DIR),
            workers=corpus.workers,
            simulate=(corpus.num, corpus.depth, corpus.seed),
            simulate_dir=work,
            timeout=TIMEOUT,
        )
        if run.outcome != "ok":
            raise tlc.TlcError(f"simulating {corpus.model} failed: {run.summary()}")
        files = sorted(
            (p for p in work.iterdir() if tlc.SIM_FILE.match(p.name)),
            key=lambda p: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", p.name)],
        )
        with tarfile.open(path, "w:xz", preset=9) as archive:
            for file in files:
                # the module line names the temporary folder: made neutral
                text = re.sub(r"MODULE \S+", f"MODULE {file.name}", file.read_text(), count=1)
                data = text.encode("utf-8")
                info = tarfile.TarInfo(file.name)
                info.size, info.mtime, info.mode = len(data), 0, 0o644
                archive.addfile(info, io.BytesIO(data))
        return len(files)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def make_graph(model: str, path: Path) -> int:
    work = Path(tempfile.mkdtemp(prefix="shmref-graph-"))
    try:
        dot = work / "graph.dot"
        run = tlc.run_tlc(*model_files(model, SPEC_DIR), dump_dot=dot, timeout=TIMEOUT)
        if run.outcome != "ok":
            raise tlc.TlcError(f"the state graph of {model}: {run.summary()}")
        path.write_bytes(lzma.compress(dot.read_bytes(), preset=9))
        return run.distinct_states or 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- the command ---------------------------------------------------------------------------


def make_all(
    folder: Path, only: Sequence[str] = (), say: Any = print, root: Path | None = None
) -> None:
    """Remake the entries of `only` (default: every one) and the manifest."""
    path = folder / MANIFEST_NAME
    old: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    manifest: dict[str, Any] = {
        "schema": 1,
        "about": "made by `make spec-traces` (shmref.docgen.spec_traces); read by "
        "shmref.traces.shipped; digest: the model's cfg and the modules it reads",
        "counterexamples": dict(old.get("counterexamples", {})),
        "corpora": dict(old.get("corpora", {})),
        "graphs": dict(old.get("graphs", {})),
    }
    wanted = set(only)
    root = root or checkout() or Path.cwd()

    def save() -> None:  # after each entry: an interrupted run keeps what it made
        text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
        path.write_text(text, encoding="utf-8")

    for model in counterexample_models():
        if wanted and model not in wanted:
            continue
        entries = counterexample_entries(model, folder, say, root)
        manifest["counterexamples"][model] = {
            "digest": model_digest(model),
            "traces": entries,
        }
        save()
        say(f"{model}: {len(entries)} counterexamples")
    for corpus in CORPORA:
        if wanted and corpus.name not in wanted:
            continue
        manifest["corpora"][corpus.name] = corpus_entry(corpus, folder)
        save()
        say(f"corpus {corpus.name}: {manifest['corpora'][corpus.name]['traces']} traces")
    for model in GRAPHS:
        if wanted and model not in wanted:
            continue
        manifest["graphs"][model] = graph_entry(model, folder)
        save()
        say(f"graph {model}: {manifest['graphs'][model]['states']} states")


def counterexample_entries(model: str, folder: Path, say: Any, root: Path) -> list[dict[str, Any]]:
    """A hazard model's counterexamples made anew in folder/counterexamples/MODEL
    (TLC's and the kept ones), each with its manifest entry."""
    target = folder / "counterexamples" / model
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    made = draw(model, say)
    for name, saved, how in SAVED.get(model, ()):
        text = (root / saved).read_text(encoding="utf-8")
        made.append((name, how, trimmed(text, f"{model}, {how}, kept in {saved}")))
    entries = []
    for name, how, text in made:
        file = target / f"{name}.out"
        file.write_text(text, encoding="utf-8")
        trace = tlc.parse_trace(tlc.parse_tool_output(text))
        assert trace is not None
        entries.append(
            {
                "name": name,
                "file": str(file.relative_to(folder)),
                "made": how,
                "states": len(trace.states),
                "closing": closing(model, trace),
            }
        )
    return entries


def corpus_entry(corpus: Corpus, folder: Path) -> dict[str, Any]:
    """A simulation corpus made anew in folder/corpora, and its manifest entry."""
    (folder / "corpora").mkdir(parents=True, exist_ok=True)
    file = folder / "corpora" / f"{corpus.name}.tar.xz"
    n = make_corpus(corpus, file)
    return {
        "model": corpus.model,
        "digest": model_digest(corpus.model),
        "file": str(file.relative_to(folder)),
        "made": f"TLC -simulate num={corpus.num} -depth {corpus.depth} "
        f"-seed {corpus.seed}, {corpus.workers} workers",
        "traces": n,
    }


def graph_entry(model: str, folder: Path) -> dict[str, Any]:
    """A model's state graph made anew in folder/graphs, and its manifest entry."""
    (folder / "graphs").mkdir(parents=True, exist_ok=True)
    file = folder / "graphs" / f"{model}.dot.xz"
    states = make_graph(model, file)
    return {
        "digest": model_digest(model),
        "file": str(file.relative_to(folder)),
        "made": "TLC -dump dot,actionlabels",
        "states": states,
        "walks": make_walks(model, file),
    }


def make_walks(model: str, graph_file: Path) -> str:
    """The walks that cover every edge of the graph in `graph_file`, beside it
    (its name relative to the traces folder): edge indices, and the graph's digest."""
    graph = read_graph(graph_file)
    index = {edge: i for i, edge in enumerate(graph.edges)}
    walks = [
        [index[edge] for edge in walk] for walk in tlc.covering_paths(graph, max_length=WALK_STEPS)
    ]
    data = {"graph": file_digest(graph_file), "walks": walks}
    file = graph_file.with_name(f"{model}.walks.json.xz")
    file.write_bytes(lzma.compress(json.dumps(data, separators=(",", ":")).encode(), preset=9))
    return str(file.relative_to(graph_file.parent.parent))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shmref.docgen.spec_traces", description=__doc__
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="remake only this model, corpus or graph (repeatable)",
    )
    args = parser.parse_args(argv)
    known = set(counterexample_models()) | {c.name for c in CORPORA} | set(GRAPHS)
    unknown = sorted(set(args.only) - known)
    if unknown:
        parser.error(f"unknown name(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    try:
        make_all(TRACES_DIR, args.only)
    except tlc.TlcError as exc:
        print(f"spec-traces: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
