"""`make check-deep`: the deep profiles on TLC's own distributed mode, or by simulation.

Distributed mode (tla2tools.jar's `TLCServer` + `TLCWorker`, Java RMI): this
process starts the server on the spec and `--workers` local workers (one
thread each) that connect to it. The same server accepts workers from other
machines: start it with `--workers 0 --host THIS_HOST` and run, on each other
machine, the worker command it prints. The deep profiles are the manifest's
models with `deep = true` (not part of `make check`); `--only` picks any model.

    python -m shmref deep                       # deep models, 2 local workers
    python -m shmref deep --only MCRingFixed --workers 3
    python -m shmref deep --simulate --depth 60 --num 20000   # fast alternative

`--simulate` runs `tlc2.TLC -simulate` (random behaviours up to `--depth`
states, fixed `--seed`): no proof, but deep traces in seconds.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from shmref.core.paths import cache_dir
from shmref.tlc.check import Result, judge, print_result, select
from shmref.tlc.java import find_jar, find_java
from shmref.tlc.manifest import (
    Measured,
    Model,
    record,
    regenerate_readme,
)
from shmref.tlc.options import parse_spec_args, spec_parser
from shmref.tlc.result import TlcRun
from shmref.tlc.runner import run_tlc
from shmref.tlc.tlavalues import TlcError

LOG_DIR = cache_dir("tlc", keyed_by_spec=False)  # <model>.deep.out: the server's output
_DISTINCT = re.compile(r"([\d,]+) states generated, ([\d,]+) distinct states found")
_DEPTH = re.compile(r"depth of the complete state graph search is (\d+)")
_INVARIANT = re.compile(r"Invariant (\w+) is violated")


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def parse_server_output(text: str, seconds: float, exit_code: int) -> TlcRun:
    """A TlcRun from TLCServer's plain output (it has no -tool mode)."""
    counts = _DISTINCT.findall(text)
    depth = _DEPTH.search(text)
    invariant = _INVARIANT.search(text)
    if "No error has been found" in text:
        outcome, violated = "ok", None
    elif invariant:
        outcome, violated = "invariant", invariant.group(1)
    elif "The behavior up to this point is" in text:
        # TLCServer 2.15 does not name the violated invariant: only a model
        # whose cfg checks one invariant gets a name (see cfg_invariants)
        outcome, violated = "invariant", None
    elif "Temporal properties were violated" in text:
        outcome, violated = "liveness", None
    elif "Deadlock reached" in text:
        outcome, violated = "deadlock", None
    else:
        outcome, violated = "error", None
    last = text.strip().splitlines()[-1] if text.strip() else "no output"
    return TlcRun(
        exit_code=exit_code,
        outcome=outcome,
        violated=violated,
        distinct_states=_int(counts[-1][1]) if counts else None,
        generated_states=_int(counts[-1][0]) if counts else None,
        depth=int(depth.group(1)) if depth else None,
        seconds=seconds,
        trace=None,
        output=text,
        messages=[],
        error=None if outcome != "error" else f"TLCServer: {last}",
    )


def free_port() -> int:
    """A TCP port nobody listens on now (for the server's RMI registry)."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def _follow(server: subprocess.Popen[str], log_path: Path, name: str, started: float) -> str:
    """The server's output, copied to `log_path` as it comes; progress lines echoed."""
    lines: list[str] = []
    assert server.stdout is not None
    with log_path.open("w") as log:
        for line in server.stdout:
            lines.append(line)
            log.write(line)
            log.flush()
            if line.startswith("Progress(") or "distinct states found" in line:
                elapsed = time.monotonic() - started
                print(f"    [{name} {elapsed:.0f}s] {line.strip()}", file=sys.stderr, flush=True)
    return "".join(lines)


def run_distributed(
    model: Model,
    spec_dir: Path,
    workers: int,
    host: str,
    timeout: float,
    extra_args: Sequence[str] = (),
    log_dir: Path | None = None,
    port: int | None = None,
) -> Result:
    """Server + `workers` local workers on one model; the server's verdict."""
    java, jar = find_java(), str(find_jar())
    # a port of its own: on the default one, a worker of another run on this
    # machine joins whichever server registered first
    port_property = f"-Dtlc2.tool.distributed.TLCServer.port={port or free_port()}"
    tmp = Path(tempfile.mkdtemp(prefix="shmref-deep-"))
    server_cmd = [
        java,
        "-XX:+UseParallelGC",
        f"-Djava.io.tmpdir={tmp}",
        "-cp",
        jar,
        f"-Djava.rmi.server.hostname={host}",
        port_property,
        "tlc2.tool.distributed.TLCServer",
        "-metadir",
        str(tmp / "meta"),
        *(["-deadlock"] if model.deadlock else []),
        *extra_args,
        "-config",
        model.cfg_file,
        model.tla_file,
    ]
    worker_cmd = [
        java,
        "-Dtlc2.tool.distributed.TLCWorker.threadCount=1",
        port_property,
        "-cp",
        jar,
        "tlc2.tool.distributed.TLCWorker",
        host,
    ]
    print(f"    [{model.name}] more workers: {' '.join(worker_cmd)}", file=sys.stderr, flush=True)
    log_path = (log_dir or tmp) / f"{model.name}.deep.out"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    local: list[subprocess.Popen[bytes]] = []
    server = subprocess.Popen(
        server_cmd, cwd=spec_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    timer = threading.Timer(timeout, server.kill)
    timer.start()
    try:
        time.sleep(2)  # the server registers with RMI before workers may connect
        local = [
            subprocess.Popen(worker_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(workers)
        ]
        output = _follow(server, log_path, model.name, started)
        server.wait()
        if not timer.is_alive() and server.returncode != 0:
            output += f"\ntimed out after {timeout:.0f} s"
    finally:
        timer.cancel()
        for proc in local:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    run = parse_server_output(output, time.monotonic() - started, server.returncode)
    invariants = cfg_invariants(spec_dir / model.cfg_file)
    if run.outcome == "invariant" and run.violated is None and len(invariants) == 1:
        run.violated = invariants[0]
    return judge(model, run)


def cfg_invariants(cfg: Path) -> list[str]:
    """The names after INVARIANT(S) in a TLC cfg."""
    names: list[str] = []
    collecting = False
    for raw in cfg.read_text().splitlines():
        line = raw.split("\\*", 1)[0].strip()
        if not line:
            continue
        word = line.split()[0]
        if word in ("INVARIANT", "INVARIANTS"):
            collecting = True
            names += line.split()[1:]
        elif word.isupper():
            collecting = False
        elif collecting:
            names += line.split()
    return names


def run_simulation(model: Model, spec_dir: Path, depth: int, num: int, seed: int) -> Result:
    """`model` checked by `num` random behaviours of up to `depth` states (`make check-sim`)."""
    try:
        run = run_tlc(
            spec_dir / model.tla_file,
            spec_dir / model.cfg_file,
            workers=1,
            simulate=(num, depth, seed),
            extra_args=("-deadlock",) if model.deadlock else (),
        )
    except TlcError as exc:
        return Result(model, "UNEXPECTED", None, str(exc))
    return judge(model, run)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m shmref deep`: the deep models on TLC's distributed mode, or by simulation."""
    parser = spec_parser("deep", __doc__)
    parser.add_argument("--only", action="append", metavar="MODEL")
    parser.add_argument("--workers", type=int, default=2, help="local TLCWorkers (default 2)")
    parser.add_argument("--host", default="localhost", help="the server's host name for workers")
    parser.add_argument(
        "--port", type=int, default=None, help="the server's RMI port (default: a free one)"
    )
    parser.add_argument("--simulate", action="store_true", help="tlc2.TLC -simulate instead")
    parser.add_argument("--depth", type=int, default=60)
    parser.add_argument("--num", type=int, default=20000)
    parser.add_argument(
        "--fpmem", type=float, default=None, help="TLCServer -fpmem (fingerprint memory share)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parsed = parse_spec_args(parser, argv, "deep")
    if parsed is None:
        return 2
    args, manifest = parsed
    spec_dir = args.spec_dir
    deep = [m for m in manifest.models if m.deep]
    models = select(manifest.models, args.only, False) if args.only else deep
    results = []
    for model in models:
        if args.simulate:
            res = run_simulation(model, spec_dir, args.depth, args.num, args.seed)
        else:
            extra = ("-fpmem", str(args.fpmem)) if args.fpmem is not None else ()
            res = run_distributed(
                model, spec_dir, args.workers, args.host, args.timeout, extra, LOG_DIR, args.port
            )
        print_result(res)
        results.append(res)
    if args.record and not args.simulate:
        runs = [
            (
                r.model.name,
                Measured(r.run.distinct_states, r.run.depth, r.run.seconds, args.workers),
            )
            for r in results
            if r.good and r.run is not None
        ]
        updated = record(manifest, runs)
        regenerate_readme(spec_dir / "README.md", updated.models, updated.check)
        print(f"deep: recorded {len(runs)} model(s) in models.toml and README.md", flush=True)
    bad = [r.model.name for r in results if not r.good]
    print(
        f"deep: {len(results) - len(bad)} of {len(results)} model(s) as expected"
        + (f"; UNEXPECTED: {', '.join(bad)}" if bad else ""),
        flush=True,
    )
    return 1 if bad else 0
