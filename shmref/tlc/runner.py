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
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from shmref.tlc.java import find_jar, find_java
from shmref.tlc.result import EXIT_OUTCOMES, TlcRun, error_text
from shmref.tlc.tlavalues import TlcError
from shmref.tlc.toolout import (
    SIM_FILE,
    Message,
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
    depth, generated, _spm, distinct, dspm, queue_len = m.groups()
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
    spec, cfg = Path(spec).resolve(), Path(cfg).resolve()
    n_workers = _checked_inputs(spec, cfg, extra_args, workers)
    mode = _simulate_args(simulate, simulate_dir)
    if dump_dot is not None:
        dump_dot = Path(dump_dot).resolve()
        dump_dot.parent.mkdir(parents=True, exist_ok=True)
        mode += ["-dump", "dot,actionlabels", str(dump_dot)]

    tmp = Path(tempfile.mkdtemp(prefix="shmref-tlc-"))
    jvm = [*(SHORT_RUN_JVM if short else ()), *jvm_args]
    cmd = [*_tlc_command(java, jar, tmp, jvm, n_workers), *mode]
    cmd += [*extra_args, "-config", str(cfg), spec.name]
    start = time.monotonic()
    try:
        output, exit_code = _run(cmd, spec, timeout, log_path, _ProgressWatcher(progress))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    seconds = time.monotonic() - start
    run = _read_run(cmd, spec, output, exit_code, seconds, dump_dot, simulate is not None)
    if progress is not None:
        progress(f"TLC {spec.name}: {run.summary()}")
    return run


def _tlc_command(java: str, jar: Path, tmp: Path, jvm: Sequence[str], workers: int) -> list[str]:
    """Java and TLC in ``-tool`` mode, their temp folder and metadir in `tmp`."""
    java_tmp = tmp / "java"
    java_tmp.mkdir()
    cmd = [java, "-XX:+UseParallelGC", f"-Djava.io.tmpdir={java_tmp}", *jvm]
    cmd += ["-cp", str(jar), "tlc2.TLC"]
    return [*cmd, "-tool", "-workers", str(workers), "-metadir", str(tmp / "meta")]


def _read_run(
    cmd: list[str],
    spec: Path,
    output: str,
    exit_code: int,
    seconds: float,
    dump_dot: Path | None,
    simulated: bool,
) -> TlcRun:
    """What TLC said, read: its verdict, counts, counterexample and any error."""
    try:
        messages, outside = split_tool_output(output)
    except TlcError as exc:
        raise TlcError(f"TLC exited with {exit_code} and {exc}") from None
    if dump_dot is not None:
        _name_the_graph(dump_dot)
    outcome = EXIT_OUTCOMES.get(exit_code, "error")
    error = None
    if outcome in ("error", "assumption"):
        error = error_text(messages, outside, exit_code, output)
    try:
        trace = parse_trace(messages)
    except TlcError as exc:
        raise TlcError(f"cannot parse the counterexample of {spec.name}: {exc}") from None
    found = _found(messages, simulated=simulated)
    return TlcRun(
        exit_code=exit_code,
        outcome=outcome,
        violated=found.violated,
        distinct_states=found.distinct,
        generated_states=found.generated,
        depth=found.depth,
        seconds=seconds,
        trace=trace,
        output=output,
        messages=messages,
        error=error,
        command=cmd,
    )


def _checked_inputs(spec: Path, cfg: Path, extra_args: Sequence[str], workers: int | None) -> int:
    """The number of workers, once the files exist and the arguments make sense."""
    if not spec.is_file():
        raise TlcError(f"spec {spec} does not exist")
    if not cfg.is_file():
        raise TlcError(f"config {cfg} does not exist")
    if "-difftrace" in extra_args:
        raise TlcError("-difftrace omits unchanged variables, which breaks trace parsing")
    n_workers = workers if workers is not None else (os.cpu_count() or 1)
    if n_workers < 1:
        raise TlcError(f"workers must be >= 1, got {n_workers}")
    return n_workers


def _simulate_args(simulate: tuple[int, int, int] | None, simulate_dir: Path | None) -> list[str]:
    """TLC's ``-simulate`` options, the folder for its traces made and emptied
    of old ones; none for model checking."""
    if simulate is None:
        if simulate_dir is not None:
            raise TlcError("simulate_dir needs simulate=(num, depth, seed)")
        return []
    num, sim_depth, seed = simulate
    if num < 1 or sim_depth < 1:
        raise TlcError(f"simulate needs num >= 1 and depth >= 1, got {simulate}")
    sim_arg = f"num={num}"
    if simulate_dir is not None:
        simulate_dir = Path(simulate_dir).resolve()
        simulate_dir.mkdir(parents=True, exist_ok=True)  # TLC fails if the folder is missing
        for old in simulate_dir.glob("trace_*_*"):
            if SIM_FILE.match(old.name) and old.is_file():
                old.unlink()
        sim_arg = f"file={simulate_dir / 'trace'},{sim_arg}"
    return ["-simulate", sim_arg, "-depth", str(sim_depth), "-seed", str(seed)]


def _run(
    cmd: list[str],
    spec: Path,
    timeout: float | None,
    log_path: Path | None,
    watcher: _ProgressWatcher,
) -> tuple[str, int]:
    """TLC's output and exit code, each line logged and watched as it comes;
    the process group killed whatever happens."""
    start = time.monotonic()
    lines: list[str] = []
    log: TextIO | None = None
    proc: subprocess.Popen[str] | None = None
    try:
        if log_path is not None:
            Path(log_path).parent.mkdir(parents=True, exist_ok=True)
            log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed in finally
        proc = _start(cmd, spec.parent)
        if proc.stdout is None:
            raise TlcError("no stdout pipe from the TLC process")
        sink: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(target=_reader, args=(proc.stdout, sink), daemon=True)
        reader.start()
        deadline = None if timeout is None else start + timeout
        while (line := _next_line(sink, deadline)) is not None:
            lines.append(line)
            if log is not None:
                log.write(line)
                log.flush()  # so a watcher can tail the log while TLC runs
            watcher.feed(line)
        exit_code = proc.wait()
        reader.join(timeout=5)
    except _TimedOut:  # the group is killed below
        raise TlcError(f"TLC timed out after {timeout:g} s on {spec.name}") from None
    finally:
        if proc is not None:
            _kill_group(proc)
        if log is not None:
            log.close()
    return "".join(lines), exit_code


def _start(cmd: list[str], cwd: Path) -> subprocess.Popen[str]:
    try:
        return subprocess.Popen(
            [*_DIE_WITH_PARENT, *cmd],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,  # own process group, so a timeout kills the whole JVM
        )
    except OSError as exc:
        raise TlcError(f"cannot start Java ({cmd[0]}): {exc}") from None


class _TimedOut(Exception):
    """No line, nor the end of the output, before the deadline."""


def _next_line(sink: queue.Queue[str | None], deadline: float | None) -> str | None:
    """The next line of TLC's output, or None at its end."""
    wait = None if deadline is None else deadline - time.monotonic()
    try:
        if wait is not None and wait <= 0:
            raise queue.Empty
        return sink.get(timeout=wait)
    except queue.Empty:
        raise _TimedOut from None


def _name_the_graph(dump_dot: Path) -> None:
    """The state graph where it was asked for: TLC appends .dot to other names."""
    if not dump_dot.exists():
        with_suffix = Path(str(dump_dot) + ".dot")
        if with_suffix.exists():
            with_suffix.replace(dump_dot)


@dataclass
class _Found:
    """What TLC's messages say it found: the property violated, the states counted, the depth."""

    violated: str | None = None
    distinct: int | None = None
    generated: int | None = None
    depth: int | None = None


def _found(messages: Sequence[Message], *, simulated: bool) -> _Found:
    found = _Found()
    last_progress_depth: int | None = None
    for m in messages:
        if m.code in (2110, 2107):
            match = re.match(r"Invariant (\S+) is violated", m.body)
            found.violated = match.group(1) if match else found.violated
        elif m.code == 2112:
            match = re.match(r"Action property (\S+) is violated", m.body)
            found.violated = match.group(1) if match else found.violated
        elif m.code == 2199:
            match = re.search(_NUM + r" states generated, " + _NUM + r" distinct states", m.body)
            if match:
                found.generated, found.distinct = _num(match.group(1)), _num(match.group(2))
        elif m.code == 2210:
            match = re.search(r"number of states generated: " + _NUM, m.body)
            if match:
                found.generated = _num(match.group(1))
        elif m.code == 2194:
            match = re.search(r"search is (\d+)", m.body)
            if match:
                found.depth = int(match.group(1))
        elif m.code in (2200, 2209):
            match = _PROGRESS.search(m.body)
            if match:
                if int(match.group(1)) >= 0:
                    last_progress_depth = int(match.group(1))
                if simulated and found.generated is None:
                    found.generated = _num(match.group(2))
    if found.depth is None and not simulated:
        found.depth = last_progress_depth
    return found
