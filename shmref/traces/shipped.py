"""TLC's output that the oracle replays, made once from the spec and shipped
in the package (`spec/traces/`, `shmref/spec/traces/` in a wheel; made by
`make spec-traces`).

Which counterexample TLC draws for a property depends on the run: it draws
a seed and a fingerprint per run and checks liveness at moments the clock
sets, and a simulation gives as many traces as it has workers. A verdict
judged on what a user's machine drew would depend on that machine. So the
counterexamples, the simulation corpora and the allocator's state graph are
data: every machine replays the same traces, and a user's run starts no TLC
(and needs no Java) for them.

Each entry records the digest of the spec files its model reads (its cfg
and the modules its module extends or instances, transitively). An edited
spec makes exactly its models' entries stale, and a stale entry is an error
that names the model and the make target that remakes it: never a silent
TLC run at a user's run.
"""

from __future__ import annotations

import functools
import hashlib
import json
import lzma
import re
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shmref import tlc
from shmref.core.paths import SPEC_DIR
from shmref.tlc.manifest import model_files

TRACES_DIR = SPEC_DIR / "traces"
MANIFEST_NAME = "manifest.json"
REMAKE = "make spec-traces"
# Steps of a shipped covering walk at most (a tour's piece): a walk that
# diverges is shown whole, and a walk more costs a ring made and closed
WALK_STEPS = 500


class ShippedError(tlc.TlcError):
    """A shipped trace that is missing, stale or unreadable: names the
    model and the make target that remakes it."""


@dataclass(frozen=True)
class Closing:
    """Where the fixed protocol leaves a counterexample: at `step` (a state
    index of the trace) the seed's protocol gives `seed` and the fixed one
    (refimpl's, the spec with FIXED = TRUE) gives `fixed`."""

    step: int
    call: str
    seed: str
    fixed: str


@dataclass(frozen=True)
class Counterexample:
    """One shipped counterexample of a model, and how TLC made it."""

    model: str
    name: str  # e.g. "bfs", "sim-3"
    made: str  # the TLC command line's options, for people
    trace: tlc.Trace
    violation: str  # the property TLC reports violated, in TLC's words
    closing: Closing | None  # None: the fixed protocol takes every step alike (or no storage)
    path: Path

    @property
    def source(self) -> str:
        """How the report names it: the file (in the package, or a user's) and
        how TLC made it."""
        where = self.path
        if where.is_relative_to(SPEC_DIR):  # `spec/...`, in a checkout as in a wheel
            where = Path("spec") / where.relative_to(SPEC_DIR)
        return f"{where} ({self.made})"


# -- digests --------------------------------------------------------------------------

_USES = re.compile(r"\b(?:EXTENDS|INSTANCE)\b([^\n]*)")


def modules_read(tla: Path, spec_dir: Path = SPEC_DIR) -> list[Path]:
    """`tla` and every module of spec_dir it extends or instances, transitively
    (TLC's own standard modules are not in spec_dir and not listed)."""
    seen: dict[str, Path] = {}
    todo = [tla]
    while todo:
        path = todo.pop()
        if path.name in seen or not path.is_file():
            continue
        seen[path.name] = path
        for line in _USES.findall(_without_comments(path.read_text(encoding="utf-8"))):
            todo += [spec_dir / f"{name}.tla" for name in re.findall(r"\w+", line)]
    return [seen[name] for name in sorted(seen)]


def _without_comments(text: str) -> str:
    text = re.sub(r"\(\*.*?\*\)", " ", text, flags=re.DOTALL)
    return re.sub(r"\\\*[^\n]*", " ", text)


def model_digest(model: str, spec_dir: Path = SPEC_DIR) -> str:
    """A hash of what TLC reads for `model`: its cfg and its modules."""
    tla, cfg = model_files(model, spec_dir)
    digest = hashlib.sha256()
    for path in [cfg, *modules_read(tla, spec_dir)]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


# -- the manifest ---------------------------------------------------------------------


@functools.cache
def manifest(folder: Path = TRACES_DIR) -> dict[str, Any]:
    path = folder / MANIFEST_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError:
        raise ShippedError(f"{path} is missing: run `{REMAKE}`") from None
    except json.JSONDecodeError as exc:
        raise ShippedError(f"{path}: line {exc.lineno}: {exc.msg}") from None
    if not isinstance(data, dict) or data.get("schema") != 1:
        raise ShippedError(f"{path}: not a shmref spec-traces manifest (schema 1)")
    return data


def _entry(section: str, name: str, folder: Path) -> dict[str, Any]:
    entries = manifest(folder).get(section, {})
    if name not in entries:
        raise ShippedError(
            f"no shipped {section[:-1] if section.endswith('s') else section} for {name} "
            f"in {folder / MANIFEST_NAME}: run `{REMAKE}`"
        )
    entry: dict[str, Any] = entries[name]
    model = entry.get("model", name)
    if entry.get("digest") != model_digest(model, folder.parent):
        raise ShippedError(
            f"the shipped {section[:-1]} {name} is stale: spec/{model}.cfg or a module it "
            f"reads changed since it was made (run `{REMAKE}`)"
        )
    return entry


def stale(folder: Path = TRACES_DIR) -> list[str]:
    """Every shipped entry whose model's spec files changed since it was made."""
    problems = []
    for section in ("counterexamples", "corpora", "graphs"):
        for name in manifest(folder).get(section, {}):
            try:
                _entry(section, name, folder)
            except ShippedError as exc:
                problems.append(str(exc))
    return problems


# -- counterexamples ------------------------------------------------------------------


def counterexample_models(folder: Path = TRACES_DIR) -> list[str]:
    return sorted(manifest(folder).get("counterexamples", {}))


def counterexamples(model: str, folder: Path = TRACES_DIR) -> list[Counterexample]:
    """The model's shipped counterexamples, the first the one TLC's
    breadth-first search gives (the shortest; pictures draw it)."""
    return list(_counterexamples(model, folder))


@functools.cache
def _counterexamples(model: str, folder: Path) -> tuple[Counterexample, ...]:
    entry = _entry("counterexamples", model, folder)
    found = []
    for item in entry["traces"]:
        path = folder / item["file"]
        trace, violated = read_counterexample(path)
        closing = item.get("closing")
        found.append(
            Counterexample(
                model,
                item["name"],
                item["made"],
                trace,
                violated,
                Closing(**closing) if closing else None,
                path,
            )
        )
    return tuple(found)


def read_counterexample(path: Path) -> tuple[tlc.Trace, str]:
    """A TLC counterexample from its `-tool` output (shipped, or a user's
    file): the trace and the violated property. Bad input is one
    ShippedError naming the file (and the line where TLC's parser says)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ShippedError(f"{path}: cannot be read: {exc}") from None
    try:
        messages = tlc.parse_tool_output(text)
        trace = tlc.parse_trace(messages)
    except tlc.TlcError as exc:
        raise ShippedError(f"{path}: {exc}") from None
    if trace is None or not trace.states:
        raise ShippedError(f"{path}: TLC's output holds no counterexample (no trace states)")
    violated = next(
        (" ".join(m.body.split()) for m in messages if m.code in (2110, 2116, 2114)), ""
    )
    return trace, violated


# -- simulation corpora and state graphs -------------------------------------------------


def corpus_names(folder: Path = TRACES_DIR) -> list[str]:
    return sorted(manifest(folder).get("corpora", {}))


def corpus(name: str, folder: Path = TRACES_DIR) -> list[tlc.Trace]:
    """A shipped simulation corpus (its traces in TLC's order)."""
    return list(_corpus(name, folder))


@functools.cache
def _corpus(name: str, folder: Path) -> tuple[tlc.Trace, ...]:
    entry = _entry("corpora", name, folder)
    path = folder / entry["file"]
    traces = []
    values: dict[str, Any] = {}  # each distinct value text parsed once
    try:
        with tarfile.open(path, "r:xz") as archive:
            members = sorted(
                (m for m in archive.getmembers() if m.isfile()),
                key=lambda m: _trace_order(m.name),
            )
            for member in members:
                handle = archive.extractfile(member)
                assert handle is not None
                text = handle.read().decode("utf-8")
                traces.append(tlc.parse_simulation_text(text, f"{path}:{member.name}", values))
    except (OSError, tarfile.TarError, lzma.LZMAError, UnicodeDecodeError) as exc:
        raise ShippedError(f"{path}: cannot be read ({exc}): run `{REMAKE}`") from None
    return tuple(traces)


def _trace_order(name: str) -> tuple[str, int, int]:
    m = tlc.SIM_FILE.match(name)
    return (m.group("prefix"), int(m.group("worker")), int(m.group("k"))) if m else (name, 0, 0)


def state_graph(model: str, folder: Path = TRACES_DIR) -> tlc.StateGraph:
    """A model's whole state graph (TLC's `-dump dot,actionlabels`), shipped."""
    return read_graph(folder / _entry("graphs", model, folder)["file"])


def read_graph(path: Path) -> tlc.StateGraph:
    """A state graph file as `make spec-traces` writes it (xz-compressed dot)."""
    try:
        text = lzma.decompress(path.read_bytes()).decode("utf-8")
    except (OSError, lzma.LZMAError, UnicodeDecodeError) as exc:
        raise ShippedError(f"{path}: cannot be read ({exc}): run `{REMAKE}`") from None
    return tlc.parse_dot_text(text, str(path))


def state_graph_walks(
    model: str, folder: Path = TRACES_DIR
) -> tuple[tlc.StateGraph, list[list[tlc.Edge]]]:
    """A model's shipped state graph and the walks that take its every edge
    (tlc.covering_paths, at most WALK_STEPS long, made with the graph). The
    walks name edges by their place in the graph's edge list and carry the
    digest of the graph file they were made from."""
    entry = _entry("graphs", model, folder)
    graph = state_graph(model, folder)
    if "walks" not in entry:
        raise ShippedError(f"the shipped graph of {model} has no covering walks: run `{REMAKE}`")
    path = folder / entry["walks"]
    try:
        data = json.loads(lzma.decompress(path.read_bytes()))
        walks = [[graph.edges[i] for i in walk] for walk in data["walks"]]
        made_from = data["graph"]
    except (OSError, lzma.LZMAError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise ShippedError(f"{path}: cannot be read ({exc!r}): run `{REMAKE}`") from None
    if made_from != file_digest(folder / entry["file"]):
        raise ShippedError(f"{path} was made from another graph of {model}: run `{REMAKE}`")
    return graph, walks


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def describe(folder: Path = TRACES_DIR) -> Mapping[str, Any]:
    """The manifest, for tools that list what ships."""
    return manifest(folder)
