"""`make conformance IMPL=mod`: the oracle's report for an implementation.

    python -m shmref.conformance --impl MODULE [--out DIR] [--quick]
    python -m shmref.conformance --impl MODULE --hazard MCDoubleRead
    python -m shmref.conformance --validate-trace recording.json

The implementation is judged by the written contract (shmref.contract) and
nothing else: a module lacking a required name is refused (exit 2, one line
naming the module and the missing names). Against MODULE ('seed' builds the
seed's own code) it runs the behavioural tests, the side-by-side tests with
the seed and refimpl (test_layout.py), the TLC trace replays and the
Hypothesis state machines (shmref.suite, run by pytest in this process);
the hazard counterexamples of the spec's hazard models replayed
on MODULE; and trace validation (a recorded run checked by TLC). It writes
DIR/conformance.md and DIR/conformance.json (default DIR:
./shmref-conformance/<module>), every property in one of three levels:

- seed-compatible: what the seed's code does (values, exception types, ids,
  addresses, segment bytes); the seed passes all of it by construction, and
  where the seed's behaviour is a FINDINGS.md defect, refimpl's fix passes too.
- hardened (optional): refimpl's fixes, each property naming the findings
  it closes.
- protocol-safe: the spec's replays and state machines pass, a recorded run
  is a behaviour of the spec, and no hazard counterexample makes it return a
  wrong value or count a read on another chunk. Hazards that no
  seed-compatible implementation can close are reported as "assumption".

Every property carries the seed's own result beside the implementation's
(the seed baseline: one run, cached under DIR/seed-baseline). A property
that needs an optional capability the module lacks is `not run: missing X`.
Every failure comes with its shortest trace and one command that replays it
when pasted into a fresh shell. Exit status: 0 if seed-compatible and
protocol-safe pass (and hardened, unless it is left out with --level), 1
otherwise, 2 for a module that does not import or lacks required names.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

from shmref import contract, tlc
from shmref.core import tables
from shmref.core.paths import PACKAGE_DIR, REFIMPL_DIR, SPEC_DIR, cache_dir, checkout
from shmref.oracle.hazards import HAZARDS, Hazard, hazard_check, hazard_trace, replay_hazard
from shmref.oracle.isolation import Outcome, child_env, run_isolated, signal_text
from shmref.oracle.testgroups import (
    NOT_RUN_GROUPS,
    TEST_GROUPS,
    TestGroup,
    failure_trace,
    pytest_checks,
)
from shmref.oracle.verdict import (
    ASSUMPTION,
    BAD,
    ERROR,
    FAIL,
    HARDENED,
    LEVEL_MEANING,
    LEVELS,
    NOT_RUN,
    PASS,
    PROTOCOL,
    SEED,
    SKIP,
    Check,
    impl_arg,
    level_status,
    shell,
)
from shmref.oracle.worker import RECORDING_UNIT
from shmref.seed.build import MISSING_SEED, SeedError, SeedMissing, default_seed_path
from shmref.seed.impl import load_impl
from shmref.testing import profiles
from shmref.traces.recorder import Recording, validate_either

__all__ = [  # what tests and tools import from here
    "ASSUMPTION",
    "ERROR",
    "FAIL",
    "HARDENED",
    "HAZARDS",
    "LEVELS",
    "NOT_RUN",
    "PASS",
    "PROTOCOL",
    "SEED",
    "SKIP",
    "TEST_GROUPS",
    "Check",
    "Hazard",
    "Report",
    "TestGroup",
    "failure_trace",
    "hazard_check",
    "hazard_trace",
    "level_status",
    "main",
    "pytest_checks",
    "replay_hazard",
    "run",
]

# -- trace validation -----------------------------------------------------------------------


def validation_check(
    name: str,
    recordings: list[tuple[Path, Recording | Exception]],
    out: Path,
    impl: ModuleType | str | None = None,
) -> Check:
    what = "implementation -> spec: a recorded random run is a behaviour of the spec (TLC)"
    check = Check(PROTOCOL, "trace validation", what, PASS)
    notes = []
    for path, recording in recordings:
        command = shell(
            f"python -m shmref.conformance --validate-trace {shlex.quote(str(path.resolve()))}",
            None,
        )
        if isinstance(recording, contract.MissingCapability):
            check.status, check.detail = NOT_RUN, str(recording)
            return check
        if isinstance(recording, Exception):  # no file to validate: re-record instead
            check.status = ERROR
            check.failures.append(
                {
                    "case": path.name,
                    "command": shell(
                        f"python -m shmref.conformance --impl {impl_arg(name)} "
                        f"--level {PROTOCOL} --out "
                        f"{shlex.quote(str(out.resolve()))}",
                        impl,
                    ),
                    "trace": f"recording the run crashed: {type(recording).__name__}: {recording}",
                }
            )
            continue
        # An accepted recording's verdict is kept, keyed by its bytes (and the
        # spec's hash): the same run of the same implementation is not re-checked.
        verdict = cache_dir("validated") / f"{hashlib.sha256(path.read_bytes()).hexdigest()}.txt"
        if verdict.is_file():
            notes.append(verdict.read_text().strip() + " (cached verdict)")
            continue
        result = validate_either(recording, out_dir=out / "trace" / path.stem)
        if result.accepted:
            note = f"{len(recording.log)} steps accepted (FIXED={result.switches['FIXED']})"
            verdict.write_text(note + "\n")
            notes.append(note)
            continue
        check.status = FAIL
        low = max(result.matched - 8, 0)
        shown = [
            f"{i + 1:>4}  {json.dumps(e)}"
            for i, e in enumerate(recording.log[low : result.matched + 1], start=low)
        ]
        check.failures.append(
            {
                "case": path.name,
                "command": command,
                "trace": result.explain() + "\nlog (last matched entries, "
                "then the first that no enabled action matches):\n" + "\n".join(shown),
            }
        )
    check.detail = "; ".join(notes)
    return check


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(checkout() or Path.cwd()))
    except ValueError:
        return str(path)


# -- the run -------------------------------------------------------------------------------

SHOWN_LINES = 80  # longer traces: head and tail in the report, all of it in a file


@dataclass
class Report:
    impl: str
    quick: bool
    checks: list[Check]
    seconds: float
    not_run: list[str]
    levels: tuple[str, ...] = LEVELS
    seed_levels: dict[str, str] = field(default_factory=dict)  # the seed's level results

    def level_status(self, level: str) -> str:
        return level_status(self.checks, level, self.levels)

    @property
    def ok(self) -> bool:
        return all(self.level_status(level) == PASS for level in self.levels)

    def to_json(self) -> dict[str, Any]:
        return {
            "impl": self.impl,
            "quick": self.quick,
            "seconds": round(self.seconds, 1),
            "ok": self.ok,
            "not_run": self.not_run,
            "levels": {
                level: {
                    "status": self.level_status(level),
                    "seed": self.seed_levels.get(level, ""),
                    "meaning": LEVEL_MEANING[level],
                    "checks": [asdict(c) for c in self.checks if c.level == level],
                }
                for level in LEVELS
            },
        }

    def markdown(self, out: Path | None = None) -> str:
        lines = [
            f"# Conformance of `{self.impl}`",
            "",
            f"{'Quick' if self.quick else 'Full'} run of `python -m shmref.conformance "
            f"--impl {impl_arg(self.impl)}{' --quick' if self.quick else ''}`, "
            f"{self.seconds:.0f} s. Reference: the seed's own code (column `seed`: its "
            "result on the same property), refimpl and spec/ShmObjectStorage.tla.",
            "",
        ]
        summary = []
        for level in self.levels:
            failing = sum(1 for c in self.checks if c.level == level and c.status in BAD)
            assumed = sum(1 for c in self.checks if c.level == level and c.status == ASSUMPTION)
            not_run = sum(1 for c in self.checks if c.level == level and c.status == NOT_RUN)
            notes = [f"{assumed} assumption{'s' if assumed > 1 else ''}"] * bool(assumed)
            notes += [f"{not_run} not run"] * bool(not_run)
            result = self.level_status(level) + (f" ({', '.join(notes)})" if notes else "")
            summary.append(
                (
                    level,
                    f"**{result}**",
                    self.seed_levels.get(level, ""),
                    failing,
                    LEVEL_MEANING[level],
                )
            )
        lines.append(
            tables.markdown(("level", "result", "seed", "failing properties", "meaning"), summary)
        )
        for level in self.levels:
            lines += ["", f"## {level}: {self.level_status(level)}", ""]
            rows = [
                (
                    c.status,
                    c.seed,
                    f"`{c.name}`",
                    c.cases,
                    "; ".join(t for t in (c.what, c.detail) if t),
                )
                for c in self.checks
                if c.level == level
            ]
            lines.append(
                tables.markdown(("result", "seed", "property", "cases", "what / detail"), rows)
            )
        failures = [c for c in self.checks if c.failures]
        if failures:
            lines += [
                "",
                "## Failures, each with its shortest trace and one replay command",
                "",
                "Each command works pasted into a fresh shell.",
            ]
        number = 0
        for c in failures:
            lines += ["", f"### {c.level}: `{c.name}` ({c.status}; the seed: {c.seed or '?'})", ""]
            for f in c.failures[:4]:
                number += 1
                trace = f["trace"].strip().splitlines()
                if len(trace) > SHOWN_LINES and out is not None:
                    path = out / "failures" / f"{number}.txt"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text("\n".join(trace) + "\n")
                    trace = [
                        *trace[:15],
                        f"... {len(trace) - 75} lines (all of them in {path}) ...",
                        *trace[-60:],
                    ]
                lines += [
                    f"`{f['case']}`",
                    "",
                    "```",
                    *trace,
                    "```",
                    "",
                    "Replay:",
                    "",
                    "```sh",
                    f["command"],
                    "```",
                    "",
                ]
            if len(c.failures) > 4:
                lines.append(
                    f"... and {len(c.failures) - 4} more failing case(s): "
                    + ", ".join(f"`{f['case']}`" for f in c.failures[4:])
                )
        if self.not_run:
            lines += ["", "Not run by the conformance run: " + "; ".join(self.not_run) + "."]
        return "\n".join(lines) + "\n"


# -- the seed baseline ---------------------------------------------------------------------


def fingerprint(quick: bool, levels: Sequence[str]) -> str:
    """What a cached seed baseline depends on: the options, the oracle, the
    tests, the spec and the seed."""
    digest = hashlib.sha256(repr((quick, sorted(levels), bool(tlc.unavailable()))).encode())

    files = sorted(
        [
            *PACKAGE_DIR.glob("**/*.py"),
            *SPEC_DIR.glob("*.tla"),
            *SPEC_DIR.glob("*.cfg"),
            *REFIMPL_DIR.glob("*.py"),
            *([seed] if (seed := default_seed_path()) else []),
        ]
    )
    for path in files:
        if path.is_file():
            digest.update(str(path.relative_to(path.parent.parent)).encode() + path.read_bytes())
    return digest.hexdigest()[:16]


class SeedBaseline:
    """The seed's own report for the same run: from the user cache (keyed by
    the run's fingerprint), or made by a conformance run of the seed in a
    child process that works beside this run (2 cores: one each)."""

    def __init__(
        self,
        quick: bool,
        levels: Sequence[str],
        all_groups: bool,
        timeout: float = 300.0,
        call_timeout: float = 10.0,
    ) -> None:
        key = fingerprint(quick and not all_groups, levels) + ("-all" if all_groups else "")
        self.folder = cache_dir("seed-baseline") / key
        self.args = ["--quick"] * quick + ["--all-groups"] * all_groups
        self.args += ["--timeout", str(timeout), "--call-timeout", str(call_timeout)]
        self.args += [arg for level in levels for arg in ("--level", level)]
        self.child: subprocess.Popen[bytes] | None = None
        self.work: Path | None = None

    def start(self) -> None:
        if (self.folder / "conformance.json").is_file():
            return
        seed = default_seed_path()
        if seed is None or not seed.is_file():
            raise SeedMissing(MISSING_SEED)
        self.work = Path(tempfile.mkdtemp(prefix=self.folder.name + "-", dir=self.folder.parent))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        command = [sys.executable, "-m", "shmref.conformance", "--impl", "seed", "--no-baseline"]
        command.append("--no-shrink")  # only its verdicts are used
        with open(self.work / "run.log", "wb") as log:
            self.child = subprocess.Popen(
                [*command, "--out", str(self.work), *self.args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            )

    def report(self, out: Path) -> dict[str, Any]:
        """Wait for the seed's run (if any); its report, copied to out/seed-baseline."""
        if self.child is not None and self.work is not None:
            code = self.child.wait()
            made = self.work / "conformance.json"
            if not made.is_file():
                log = (self.work / "run.log").read_text(errors="replace").strip()
                raise SeedError(f"the seed's own run exited {code}: {log[-300:]}")
            if (self.folder / "conformance.json").is_file():  # another run was first
                shutil.rmtree(self.work, ignore_errors=True)
            else:
                shutil.rmtree(self.folder, ignore_errors=True)
                os.replace(self.work, self.folder)
        shutil.copytree(self.folder, out / "seed-baseline", dirs_exist_ok=True)
        loaded: dict[str, Any] = json.loads((self.folder / "conformance.json").read_text())
        return loaded


def attach_baseline(checks: list[Check], baseline: Mapping[str, Any]) -> dict[str, str]:
    results = {
        (level, c["name"]): c["status"]
        for level, data in baseline["levels"].items()
        for c in data["checks"]
    }
    for check in checks:
        check.seed = results.get((check.level, check.name), "absent")
    return {level: data["status"] for level, data in baseline["levels"].items()}


# -- the run -------------------------------------------------------------------------------


DEFAULT_TIMEOUT = 300.0  # seconds per property (the longest take about a minute on 2 cores)
DEFAULT_CALL_TIMEOUT = 10.0  # seconds one call into the implementation may take (1000x a slow one)


def fresh(out: Path) -> None:
    """No report of an earlier run may stand in `out` as if it were this one's."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("conformance.json", "conformance.md"):
        (out / stale).unlink(missing_ok=True)
    for folder in ("failures", "trace", "workers"):
        shutil.rmtree(out / folder, ignore_errors=True)


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def selected_groups(quick: bool, levels: Sequence[str], all_groups: bool) -> list[TestGroup]:
    return [g for g in TEST_GROUPS if (g.quick or not quick or all_groups) and g.level in levels]


def run(
    name: str,
    out: Path,
    quick: bool,
    levels: Sequence[str] = LEVELS,
    *,
    baseline: bool = True,
    all_groups: bool = False,
    shrink: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    call_timeout: float = DEFAULT_CALL_TIMEOUT,
    impl_root: str | None = None,
) -> Report:
    """One conformance run; the implementation runs in child processes
    (shmref.oracle.isolation), never here. `all_groups`: every pytest group even
    when `quick` (every property name, with quick TLC and recordings);
    `shrink` False: failing examples are not shrunk (verdicts only)."""
    started = time.monotonic()
    fresh(out)
    groups = selected_groups(quick, levels, all_groups)
    not_run = [NOT_RUN_GROUPS] + [
        g.select for g in TEST_GROUPS if g not in groups and g.level in levels
    ]
    seed_run: SeedBaseline | None = None
    seed_problem = ""
    if baseline and name != "shmref_seed":
        seed_run = SeedBaseline(quick, levels, all_groups, timeout, call_timeout)
        try:
            seed_run.start()
        except SeedError as exc:
            seed_run, seed_problem = None, str(exc)
    protocol = PROTOCOL in levels
    no_tlc = tlc.unavailable()
    if no_tlc and baseline:  # said once (the seed baseline's run is quiet)
        print(f"shmref: {no_tlc}", file=sys.stderr)

    def fetch_traces() -> None:
        """TLC (no shared memory) warms the hazards' cache while the child works."""
        for hazard in HAZARDS if not no_tlc else ():
            try:
                hazard_trace(hazard.model, run_missing=not quick or hazard.quick)
            except tlc.TlcError:
                pass  # the child reports it on the hazard's property

    fetcher = threading.Thread(target=fetch_traces)
    if protocol:
        fetcher.start()
    profile = profiles.for_run(quick, shrink)
    recordings: list[dict[str, Any]] = [
        {"path": str(out / f"recording-{seed}.json"), "steps": 150 if quick else 300, "seed": seed}
        for seed in (((1,) if quick else (1, 2)) if protocol else ())
    ]
    for item in recordings:
        Path(item["path"]).unlink(missing_ok=True)
    job = {
        "name": name,
        "impl_arg": impl_arg(name),
        "out": str(out),
        "profile": profile,
        "levels": list(levels),
        "groups": [g.label for g in groups],
        "recordings": recordings,
        "hazards": [h.model for h in HAZARDS] if protocol else [],
        "run_missing": not quick,
    }
    outcome = run_isolated(job, out, timeout, call_timeout)
    if protocol:
        fetcher.join()

    checks: list[Check] = [
        Check(levels[0], "the run", "the implementation's processes", ERROR, detail=problem)
        for problem in outcome.problems
    ]
    if groups and (outcome.collect_errors or not (outcome.cases or outcome.incidents)):
        checks.append(
            Check(
                groups[0].level,
                "pytest",
                "the test run",
                ERROR,
                detail=(
                    "\n".join(outcome.collect_errors) or "no test ran (see workers/*.log)"
                ).strip()[-500:],
            )
        )
    root = impl_root if impl_root is not None else ""
    checks += pytest_checks(
        name, groups, list(outcome.cases.values()), root or None, profile, outcome.incidents
    )
    checks += isolated_protocol_checks(name, out, outcome, protocol, no_tlc, root or None)
    run_levels = tuple(level for level in LEVELS if level in levels)
    seed_levels: dict[str, str] = {}
    if name == "shmref_seed":
        for check in checks:
            check.seed = check.status
        seed_levels = {level: level_status(checks, level, run_levels) for level in LEVELS}
    elif seed_run is not None:
        try:
            seed_levels = attach_baseline(checks, seed_run.report(out))
        except SeedError as exc:
            seed_problem = str(exc)
    if seed_problem:  # no seed text here, or its run failed: say so beside every property
        for check in checks:
            check.seed = "no seed"
        not_run.append(f"the seed baseline ({seed_problem})")
    if outcome.removed:
        shown = ", ".join(outcome.removed[:5]) + (", ..." if len(outcome.removed) > 5 else "")
        not_run.append(
            f"{len(outcome.removed)} entries the implementation's dead processes left in "
            f"/dev/shm were removed ({shown})"
        )
    report = Report(
        name, quick, checks, time.monotonic() - started, not_run, run_levels, seed_levels
    )
    write_atomically(out / "conformance.json", json.dumps(report.to_json(), indent=1) + "\n")
    write_atomically(out / "conformance.md", report.markdown(out))
    return report


def isolated_protocol_checks(
    name: str, out: Path, outcome: Outcome, protocol: bool, no_tlc: str, root: str | None
) -> list[Check]:
    """The hazard replays the child judged (or lost), and trace validation of
    its recordings, which TLC does here."""
    if not protocol:
        return []
    checks = [Check(**data) for data in outcome.checks]
    judged = {c.name for c in checks}
    for hazard in HAZARDS:
        unit = (PROTOCOL, f"hazard {hazard.model}")
        if unit[1] not in judged:
            incident = outcome.incidents.get(unit)
            status, detail = (
                (incident.status, incident.detail) if incident else (ERROR, "no result")
            )
            checks.append(Check(PROTOCOL, unit[1], hazard.what, status, detail=detail))
    incident = outcome.incidents.get(RECORDING_UNIT)
    what = "implementation -> spec: a recorded random run is a behaviour of the spec (TLC)"
    if incident is not None:
        checks.append(
            Check(PROTOCOL, RECORDING_UNIT[1], what, incident.status, detail=incident.detail)
        )
        return checks
    if no_tlc:
        checks.append(Check(PROTOCOL, RECORDING_UNIT[1], what, NOT_RUN, detail=no_tlc))
        return checks
    recordings: list[tuple[Path, Recording | Exception]] = []
    for path, error, missing in outcome.recordings:
        if error is None:
            recordings.append((Path(path), Recording.load(Path(path))))
        else:
            problem = contract.MissingCapability(error) if missing else RuntimeError(error)
            recordings.append((Path(path), problem))
    try:
        checks.append(validation_check(name, recordings, out, root))
    except tlc.TlcError as exc:
        checks.append(Check(PROTOCOL, RECORDING_UNIT[1], what, ERROR, detail=str(exc)))
    return checks


def load_checked(module: str) -> tuple[dict[str, str] | None, str]:
    """What a child process found of `module` (its name and import root), or
    None and one line saying why it cannot be judged. The import happens in
    the child: a module that crashes on import does not take the oracle down."""
    found = subprocess.run(
        [sys.executable, "-m", "shmref.oracle.worker", "--check", module],
        capture_output=True,
        text=True,
        env=child_env(),
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    lines = found.stdout.strip().splitlines()
    if found.returncode == 0 and lines:
        answer: dict[str, str] = json.loads(lines[-1])
        return (None, answer["problem"]) if answer.get("problem") else (answer, "")
    tail = (found.stderr.strip().splitlines() or [""])[-1]
    return None, f"{module}: importing it {signal_text(found.returncode)}: {tail}".rstrip(": ")


class OneLineParser(argparse.ArgumentParser):
    """Bad options are one line (and exit 2), never a usage dump."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {message}", file=sys.stderr)
        sys.exit(2)


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m shmref.conformance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--impl",
        help="module under test ('seed': the seed's own code; "
        "'port': a port of it with other private names)",
    )
    parser.add_argument(
        "--out", type=Path, help="report folder (default build/conformance/<module>)"
    )
    parser.add_argument("--quick", action="store_true", help="fewer tests (well under 2 min)")
    parser.add_argument(
        "--all-groups",
        action="store_true",
        help="with --quick: still run every pytest group (every property)",
    )
    parser.add_argument(
        "--level",
        action="append",
        choices=LEVELS,
        help="run only the checks of this level (repeatable; default: all)",
    )
    parser.add_argument(
        "--timeout",
        type=seconds,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"a property still running after this long is TIMEOUT (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--call-timeout",
        type=seconds,
        default=DEFAULT_CALL_TIMEOUT,
        metavar="SECONDS",
        help="one call into the implementation that has not returned after this long makes "
        f"its property TIMEOUT (default {DEFAULT_CALL_TIMEOUT:g})",
    )
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="leave out the seed's own result beside each property (used for the seed's own run)",
    )
    parser.add_argument(
        "--no-shrink",
        action="store_true",
        help="do not shrink failing examples (verdicts only; used for the seed's own run)",
    )
    parser.add_argument(
        "--hazard", metavar="MODEL", help="only replay this hazard model's counterexample on --impl"
    )
    parser.add_argument(
        "--validate-trace",
        type=Path,
        metavar="FILE",
        help="check a recording (JSON, shmref.traces.recorder) with TLC",
    )
    args = parser.parse_args(argv)

    if args.validate_trace:
        result = validate_either(Recording.load(args.validate_trace))
        print(result.explain())
        return 0 if result.accepted else 1
    if not args.impl:
        parser.error("--impl MODULE is required")
    found, problem = load_checked(args.impl)
    if found is None:
        print(problem, file=sys.stderr)
        return 2
    name = found["name"]
    if args.hazard:
        impl = load_impl(args.impl)
        hazards = {h.model: h for h in HAZARDS}
        if args.hazard not in hazards:
            parser.error(f"unknown hazard model; known: {', '.join(hazards)}")
        hazard = hazards[args.hazard]
        trace, source = hazard_trace(hazard.model)
        if trace is None:
            print(source)
            return 2
        check, replay = hazard_check(name, impl, hazard, trace, source)
        print(f"{hazard.model}: {hazard.what}\ncounterexample: {source}")
        if replay is not None:
            print(replay.table())
        elif check.failures:
            print(check.failures[0]["trace"])
        print(f"{check.status.upper()}: {check.detail}")
        return 0 if check.status in (PASS, ASSUMPTION) else 1
    root = checkout()
    default = root / "build" / "conformance" if root else Path.cwd() / "shmref-conformance"
    out = (args.out or default / name).resolve()
    report = run(
        name,
        out,
        args.quick,
        tuple(args.level or LEVELS),
        baseline=not args.no_baseline,
        shrink=not args.no_shrink,
        all_groups=args.all_groups,
        timeout=args.timeout,
        call_timeout=args.call_timeout,
        impl_root=found.get("root") or "",
    )
    rows = []
    for level in report.levels:
        not_run = sum(1 for c in report.checks if c.level == level and c.status == NOT_RUN)
        status = report.level_status(level) + (f" ({not_run} not run)" if not_run else "")
        rows.append((level, status, report.seed_levels.get(level, "")))
    print(tables.text(("level", "result", "seed"), rows))
    print(f"report: {out / 'conformance.md'} ({report.seconds:.0f} s)")
    return 0 if report.ok else 1
