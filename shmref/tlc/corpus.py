"""TLC simulation corpora of any parameters (shmref.testing.simulate, the
repository's tests and benchmarks), made on demand and kept in the user cache
(shmref.core.paths). The corpora and the state graph the conformance suite
replays are not made here: they ship in the package (shmref.traces.shipped).

A corpus is the traces of `-simulate num=K -depth D -seed S` on one model,
with one TLC worker, so that K is the number of traces on every machine and
the same seed gives the same traces; the cache key includes a hash of the
spec files, so an edited spec never replays stale traces.
"""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

from shmref import tlc
from shmref.core.paths import SPEC_DIR, cache_dir, cache_lock, spec_digest
from shmref.tlc.manifest import model_files


def simulation_corpus(
    model: str, num: int, depth: int, seed: int, spec_dir: Path = SPEC_DIR
) -> list[tlc.Trace]:
    """`num` traces of at most `depth` states of `model` (one TLC worker)."""
    folder = (
        cache_dir("corpus", keyed_by_spec=False)
        / f"{model}-{num}x{depth}-s{seed}-w1-{spec_digest(spec_dir)}"
    )
    done = folder / "DONE"
    with cache_lock("corpus", folder.name):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            tla, cfg = model_files(model, spec_dir)  # the module may be shared
            traces = folder / "traces"
            run = tlc.run_tlc(tla, cfg, workers=1, simulate=(num, depth, seed), simulate_dir=traces)
            if run.outcome != "ok":
                raise tlc.TlcError(f"simulating {model} failed: {run.summary()}")
            done.write_text(run.summary() + "\n")
        return _parsed(folder)


def _parsed(folder: Path) -> list[tlc.Trace]:
    """The corpus's traces, parsed once: TLA+ values take seconds to parse, a
    pickle of them (in the user's own cache, made by this code) a fraction."""
    kept = folder / "traces.pickle"
    if kept.is_file():
        try:
            traces: list[tlc.Trace] = pickle.loads(kept.read_bytes())
            return traces
        except Exception:  # made by another version of shmref: parse again
            kept.unlink()
    traces = tlc.read_simulation_traces(folder / "traces")
    partial = kept.with_suffix(".partial")
    partial.write_bytes(pickle.dumps(traces))
    partial.replace(kept)
    return traces
