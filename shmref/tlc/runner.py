"""Find Java and the TLC jar, run TLC with ``-tool`` and say what it found."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from shmref.tlc.java import find_jar, find_java
from shmref.tlc.result import EXIT_OUTCOMES, TlcRun, error_text
from shmref.tlc.tlavalues import TlcError
from shmref.tlc.toolout import (
    SIM_FILE,
    parse_trace,
    split_tool_output,
)

# --------------------------------------------------------------------------
# running TLC

# For a run of seconds, the JVM's optimizing tier costs more CPU than it
# saves (MCStorage's small instance dumped: 19 -> 16 CPU s with two workers,
# 14 -> 11 with one, the wall time a second longer); long checks keep it.
SHORT_RUN_JVM = ("-XX:TieredStopAtLevel=1",)


_NUM = r"(-?[\d,]+)"
_PROGRESS = re.compile(
    r"Progress\((-?\d+)\) at [^:]+:\d\d:\d\d: "
    + _NUM
    + r" states generated(?: \(([\d,]+) s/min\))?, "
    + _NUM
    + r" distinct states found(?: \(([\d,]+) ds/min\))?, "
    + _NUM
    + r" states left on queue"
)


def _num(text: str) -> int:
    return int(text.replace(",", ""))


def _progress_line(body: str) -> str | None:
    m = _PROGRESS.search(body)
    if m is None:
        return None
    depth, generated, spm, distinct, dspm, queue_len = m.groups()
    if _num(distinct) < 0:  # simulation: TLC reports -1 for what it does not count
        return f"TLC simulation: {_num(generated):,} states generated"
    line = (
        f"TLC: {_num(distinct):,} distinct states, {_num(generated):,} generated, "
        f"{_num(queue_len):,} on queue, depth {depth}"
    )
    if dspm:
        line += f", {dspm} distinct/min"
    return line


class _ProgressWatcher:
    """Spot progress messages (2200 model checking, 2209 simulation) line by line."""

    def __init__(self, callback: Callable[[str], None] | None) -> None:
        self.callback = callback
        self.body: list[str] | None = None

    def feed(self, line: str) -> None:
        if self.callback is None:
            return
        if self.body is None:
            if line.startswith(("@!@!@STARTMSG 2200:", "@!@!@STARTMSG 2209:")):
                self.body = []
            return
        if line.startswith("@!@!@ENDMSG"):
            summary = _progress_line("".join(self.body))
            self.body = None
            if summary:
                self.callback(summary)
            return
        self.body.append(line)


# The JVM runs in a session of its own (a timeout kills its group); where
# util-linux's setpriv is found it also dies with the process that started
# it, so an oracle or a worker killed outright leaves no TLC behind.
_DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "KILL"] if shutil.which("setpriv") else []


def _kill_group(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def _reader(stream: TextIO, sink: queue.Queue[str | None]) -> None:
    try:
        for line in stream:
            sink.put(line)
    finally:
        sink.put(None)


def run_tlc(
    spec: Path,
    cfg: Path,
    *,
    workers: int | None = None,
    extra_args: Sequence[str] = (),
    simulate: tuple[int, int, int] | None = None,
    simulate_dir: Path | None = None,
    dump_dot: Path | None = None,
    timeout: float | None = None,
    progress: Callable[[str], None] | None = None,
    log_path: Path | None = None,
    jvm_args: Sequence[str] = (),
    short: bool = False,
) -> TlcRun:
    """Run TLC with ``-tool`` on SPEC/CFG and parse the result.

    Runs in the spec's folder with a private ``-metadir`` and Java temp folder
    (both deleted afterwards) so no ``states/`` folder is left behind and
    parallel runs do not collide.  ``simulate=(num, depth, seed)`` runs
    ``-simulate`` (num traces per worker, depth counted in states); with
    ``simulate_dir`` each trace goes to ``simulate_dir/trace_<worker>_<k>``
    (old such files are removed first).  Raises TlcError when TLC cannot be
    started, times out, or prints something unparseable; a TLC verdict,
    including a spec error, comes back as ``outcome``. ``short`` says the
    run takes seconds (a small instance, a trace): the JVM then compiles
    with its first tier only (SHORT_RUN_JVM).
    """
    jar = find_jar()
    java = find_java()
    spec = Path(spec).resolve()
    cfg = Path(cfg).resolve()
    if not spec.is_file():
        raise TlcError(f"spec {spec} does not exist")
    if not cfg.is_file():
        raise TlcError(f"config {cfg} does not exist")
    if "-difftrace" in extra_args:
        raise TlcError("-difftrace omits unchanged variables, which breaks trace parsing")
    n_workers = workers if workers is not None else (os.cpu_count() or 1)
    if n_workers < 1:
        raise TlcError(f"workers must be >= 1, got {n_workers}")

    tmp = Path(tempfile.mkdtemp(prefix="shmref-tlc-"))
    java_tmp = tmp / "java"
    java_tmp.mkdir()
    cmd = [java, "-XX:+UseParallelGC", f"-Djava.io.tmpdir={java_tmp}"]
    cmd += [*(SHORT_RUN_JVM if short else ()), *jvm_args]
    cmd += ["-cp", str(jar), "tlc2.TLC"]
    cmd += ["-tool", "-workers", str(n_workers), "-metadir", str(tmp / "meta")]
    if simulate is not None:
        num, sim_depth, seed = simulate
        if num < 1 or sim_depth < 1:
            shutil.rmtree(tmp, ignore_errors=True)
            raise TlcError(f"simulate needs num >= 1 and depth >= 1, got {simulate}")
        sim_arg = f"num={num}"
        if simulate_dir is not None:
            simulate_dir = Path(simulate_dir).resolve()
            simulate_dir.mkdir(parents=True, exist_ok=True)  # TLC fails if the folder is missing
            for old in simulate_dir.glob("trace_*_*"):
                if SIM_FILE.match(old.name) and old.is_file():
                    old.unlink()
            sim_arg = f"file={simulate_dir / 'trace'},{sim_arg}"
        cmd += ["-simulate", sim_arg, "-depth", str(sim_depth), "-seed", str(seed)]
    elif simulate_dir is not None:
        shutil.rmtree(tmp, ignore_errors=True)
        raise TlcError("simulate_dir needs simulate=(num, depth, seed)")
    if dump_dot is not None:
        dump_dot = Path(dump_dot).resolve()
        dump_dot.parent.mkdir(parents=True, exist_ok=True)
        cmd += ["-dump", "dot,actionlabels", str(dump_dot)]
    cmd += [*extra_args, "-config", str(cfg), spec.name]

    lines: list[str] = []
    watcher = _ProgressWatcher(progress)
    log: TextIO | None = None
    start = time.monotonic()
    proc: subprocess.Popen[str] | None = None
    try:
        if log_path is not None:
            Path(log_path).parent.mkdir(parents=True, exist_ok=True)
            log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed in finally
        try:
            proc = subprocess.Popen(
                [*_DIE_WITH_PARENT, *cmd],
                cwd=spec.parent,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                encoding="utf-8",
                errors="replace",
                start_new_session=True,  # own process group, so a timeout kills the whole JVM
            )
        except OSError as exc:
            raise TlcError(f"cannot start Java ({java}): {exc}") from None
        if proc.stdout is None:
            raise TlcError("no stdout pipe from the TLC process")
        sink: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(target=_reader, args=(proc.stdout, sink), daemon=True)
        reader.start()
        deadline = None if timeout is None else start + timeout
        while True:
            wait = None if deadline is None else deadline - time.monotonic()
            try:
                if wait is not None and wait <= 0:
                    raise queue.Empty
                line = sink.get(timeout=wait)
            except queue.Empty:
                _kill_group(proc)
                raise TlcError(f"TLC timed out after {timeout:g} s on {spec.name}") from None
            if line is None:
                break
            lines.append(line)
            if log is not None:
                log.write(line)
                log.flush()  # so a watcher can tail the log while TLC runs
            watcher.feed(line)
        exit_code = proc.wait()
        reader.join(timeout=5)
    finally:
        if proc is not None:
            _kill_group(proc)
        if log is not None:
            log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    seconds = time.monotonic() - start

    output = "".join(lines)
    try:
        messages, outside = split_tool_output(output)
    except TlcError as exc:
        raise TlcError(f"TLC exited with {exit_code} and {exc}") from None

    if dump_dot is not None and not dump_dot.exists():
        with_suffix = Path(str(dump_dot) + ".dot")  # TLC appends .dot to other names
        if with_suffix.exists():
            with_suffix.replace(dump_dot)

    outcome = EXIT_OUTCOMES.get(exit_code, "error")
    violated: str | None = None
    distinct: int | None = None
    generated: int | None = None
    depth: int | None = None
    last_progress_depth: int | None = None
    for m in messages:
        if m.code in (2110, 2107):
            found = re.match(r"Invariant (\S+) is violated", m.body)
            violated = found.group(1) if found else violated
        elif m.code == 2112:
            found = re.match(r"Action property (\S+) is violated", m.body)
            violated = found.group(1) if found else violated
        elif m.code == 2199:
            found = re.search(_NUM + r" states generated, " + _NUM + r" distinct states", m.body)
            if found:
                generated, distinct = _num(found.group(1)), _num(found.group(2))
        elif m.code == 2210:
            found = re.search(r"number of states generated: " + _NUM, m.body)
            if found:
                generated = _num(found.group(1))
        elif m.code == 2194:
            found = re.search(r"search is (\d+)", m.body)
            if found:
                depth = int(found.group(1))
        elif m.code in (2200, 2209):
            found = _PROGRESS.search(m.body)
            if found:
                if int(found.group(1)) >= 0:
                    last_progress_depth = int(found.group(1))
                if simulate is not None and generated is None:
                    generated = _num(found.group(2))
    if depth is None and simulate is None:
        depth = last_progress_depth

    error = None
    if outcome in ("error", "assumption"):
        error = error_text(messages, outside, exit_code, output)
    try:
        trace = parse_trace(messages)
    except TlcError as exc:
        raise TlcError(f"cannot parse the counterexample of {spec.name}: {exc}") from None

    run = TlcRun(
        exit_code=exit_code,
        outcome=outcome,
        violated=violated,
        distinct_states=distinct,
        generated_states=generated,
        depth=depth,
        seconds=seconds,
        trace=trace,
        output=output,
        messages=messages,
        error=error,
        command=cmd,
    )
    if progress is not None:
        progress(f"TLC {spec.name}: {run.summary()}")
    return run
