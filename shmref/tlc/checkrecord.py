r"""The spec's checks whose answer depends only on the spec's files, run once
per change of what they read and kept in `spec/checks.json`:

- **symmetry**: every model whose cfg names a SYMMETRY has the whole state
  graph of a small instance dumped by TLC and mapped through every
  transposition of the permuted values (shmref.tlc.symmetry);
- **inductive**: the counting invariants are inductive (MCIndCounts passes
  from every state of TypeOk /\ IndCounts) and need A3 (MCIndCountsWeak
  fails, its counterexample ending in a get_end that counts a live chunk).

The same files give the same graphs and the same TLC runs, so running them
on every CI run (about 200 CPU seconds) adds no evidence. `make
spec-checks` runs them and writes the record when every answer is the one
wanted; CI checks that the record is of these files (the spec's modules
and cfgs, the manifest and the checker's own modules, by SHA-256), which a
change to any of them makes stale until `make spec-checks` runs again, and
CI still runs the checks that must fail: an asymmetric spec, a graph with a
missing step, a permuted name written as a string
(tests/spec/test_symmetry.py). The shape of proofs/record.json and of the
shipped TLC output.

    python -m shmref.tlc.checkrecord --write                  # make spec-checks
    python -m shmref.tlc.checkrecord --only MODEL             # one model's check, shown
    python -m shmref.tlc.checkrecord --check                  # CI
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shmref.core.paths import SPEC_DIR
from shmref.tlc import check as tlc_check
from shmref.tlc import manifest, symmetry
from shmref.tlc.tlavalues import TlcError

RECORD_NAME = "checks.json"
SCHEMA = 1
REMAKE = "make spec-checks"
# The checker's modules (shmref.tlc.symmetry, `make check`'s runner and what
# they import): a change to how TLC is run or its output read makes the
# record stale too.
CHECKER = (
    "symmetry",
    "graph",
    "runner",
    "tlavalues",
    "java",
    "toolout",
    "result",
    "check",
    "manifest",
    "options",
    "progress",
)
# model -> the verdict `make check`'s runner must give it, and the last step
# (action, outcome) of its counterexample (None: it passes)
INDUCTIVE: dict[str, tuple[str, tuple[str, str] | None]] = {
    "MCIndCounts": ("PASS", None),
    # an older lap's handle passes F2's re-check and increments a live chunk
    "MCIndCountsWeak": ("expected FAIL reproduced", ("get_end", "ok")),
}
# Smaller bounds where MaxIssues <= 2 alone leaves too big a graph (re-reads
# without A1: over a million states; one issuance there, re-read up to the
# CountBound, takes 5 minutes at two); both keys and both readers stay.
BOUNDS = {"MCDoubleReadFixed": {"N": "2", "MAX_OBJ": "1", "Sizes": "{1}", "MaxIssues": "1"}}


def models(spec_dir: Path = SPEC_DIR) -> dict[str, manifest.Model]:
    """The manifest's models, by name."""
    return {m.name: m for m in manifest.load_manifest(spec_dir / "models.toml").models}


def symmetric_models(spec_dir: Path = SPEC_DIR) -> list[str]:
    """The manifest's models (not the deep ones) whose cfg names a SYMMETRY."""
    return sorted(
        m.name
        for m in models(spec_dir).values()
        if not m.deep and symmetry.symmetry_of((spec_dir / m.cfg_file).read_text())
    )


def check(name: str, spec_dir: Path = SPEC_DIR) -> symmetry.SymmetryReport:
    """One model's check, on `spec_dir` (a copy, in the tests that break it)."""
    model = models(spec_dir)[name]
    return symmetry.check_symmetry(
        name,
        spec_dir,
        spec_dir / model.tla_file,
        spec_dir / model.cfg_file,
        bounds=BOUNDS.get(name),
    )


def inductive(name: str, spec_dir: Path = SPEC_DIR) -> dict[str, Any]:
    """One inductive model run by `make check`'s runner: its verdict, its
    distinct states and its counterexample's last step (`wrong_answer`
    says whether that is what INDUCTIVE wants)."""
    model = models(spec_dir)[name]
    with tempfile.TemporaryDirectory(prefix="shmref-ind-") as out:
        result = tlc_check.check_model(model, spec_dir, Path(out), workers=1, timeout=600)
    run = result.run
    last = None
    if run is not None and run.trace is not None and run.trace.states:
        action = run.trace.states[-1].vars.get("last_action", {})
        last = [str(action.get("name")), str(action.get("outcome", "ok"))]
    seen = {
        "verdict": result.verdict,
        "states": run.distinct_states if run is not None else None,
        "last_step": last,
    }
    return {**seen, "detail": result.detail[:300]} if wrong_answer(name, seen) else seen


def wrong_answer(name: str, seen: dict[str, Any]) -> bool:
    """An inductive model's run (or its record) is not what INDUCTIVE wants."""
    verdict, step = INDUCTIVE[name]
    return seen.get("verdict") != verdict or seen.get("last_step") != (list(step) if step else None)


def inputs(spec_dir: Path = SPEC_DIR) -> list[Path]:
    """What the checks read: the spec's modules and cfgs, the manifest, the checker."""
    here = Path(__file__).resolve().parent
    return [
        *sorted(spec_dir.glob("*.tla")),
        *sorted(spec_dir.glob("*.cfg")),
        spec_dir / "models.toml",
        *(here / f"{module}.py" for module in (*CHECKER, "checkrecord")),
    ]


def digests(spec_dir: Path = SPEC_DIR) -> dict[str, str]:
    """Each input's SHA-256, by its folder and name (spec/X.tla, tlc/graph.py)."""
    return {
        f"{path.parent.name}/{path.name}": hashlib.sha256(path.read_bytes()).hexdigest()
        for path in inputs(spec_dir)
    }


def problem(spec_dir: Path = SPEC_DIR) -> str:
    """Why the record does not stand for these files ("" if it does)."""
    path = spec_dir / RECORD_NAME
    if not path.is_file():
        return f"{path} is missing: run `{REMAKE}`"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        recorded, models = data["inputs"], data["checks"]
    except (ValueError, KeyError, TypeError) as exc:
        return f"{path} is not a record ({type(exc).__name__}: {exc}): run `{REMAKE}`"
    now = digests(spec_dir)
    changed = sorted(n for n in set(now) | set(recorded) if now.get(n) != recorded.get(n))
    if changed:
        return f"{path} is stale: {', '.join(changed)} changed since: run `{REMAKE}`"
    symmetric, proved = models.get("symmetry", {}), models.get("inductive", {})
    wanted = symmetric_models(spec_dir)
    if sorted(symmetric) != wanted or sorted(proved) != sorted(INDUCTIVE):
        return (
            f"{path} records {sorted(symmetric)} and {sorted(proved)}, the symmetric models "
            f"are {wanted} and the inductive ones {sorted(INDUCTIVE)}: run `{REMAKE}`"
        )
    open_ = [n for n, m in symmetric.items() if not m.get("closed")]
    if open_:
        return f"{path} records graphs not closed under their symmetry: {', '.join(open_)}"
    wrong = [n for n, m in proved.items() if wrong_answer(n, m)]
    if wrong:
        return f"{path} records inductive checks without the answer wanted: {', '.join(wrong)}"
    return ""


def write(
    spec_dir: Path = SPEC_DIR,
    symmetric: Sequence[str] | None = None,
    inductive_models: Sequence[str] | None = None,
) -> int:
    """Run the checks (every one; a test may name fewer, and gets a record
    that `problem` calls incomplete) and write the record if every answer is
    the one wanted; 0 if it was written. Nothing is kept from an earlier
    record: what it says was made from other files."""
    path = spec_dir / RECORD_NAME
    results: dict[str, dict[str, Any]] = {"symmetry": {}, "inductive": {}}
    for name in symmetric_models(spec_dir) if symmetric is None else symmetric:
        began = time.monotonic()
        report = check(name, spec_dir)
        said = "closed" if report.closed else f"NOT CLOSED: {report.broken}"
        print(
            f"symmetry {name}: {report.states} states, {report.edges} steps, {said} "
            f"({time.monotonic() - began:.0f} s)"
        )
        if not report.closed:
            print(f"{path} not written: {name}'s graph is not closed", file=sys.stderr)
            return 1
        results["symmetry"][name] = {
            "symmetry": report.symmetry,
            "states": report.states,
            "steps": report.edges,
            "transpositions": report.transpositions,
            "closed": report.closed,
        }
    for name in INDUCTIVE if inductive_models is None else inductive_models:
        began = time.monotonic()
        seen = inductive(name, spec_dir)
        print(
            f"inductive {name}: {seen['verdict']}, last step {seen['last_step']} "
            f"({time.monotonic() - began:.0f} s)"
        )
        if wrong_answer(name, seen):
            print(f"{path} not written: {name}: {seen['detail']}", file=sys.stderr)
            return 1
        results["inductive"][name] = seen
    record = {
        "schema": SCHEMA,
        "about": f"the spec's checks that depend only on its files, as wanted; {REMAKE}",
        "made": time.strftime("%Y-%m-%d"),
        "inputs": digests(spec_dir),
        "checks": results,
    }
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"recorded: {path}")
    return 0


def show(name: str) -> int:
    """`--only MODEL`: one model's check, its answer printed (nothing written)."""
    if name in INDUCTIVE:
        seen = inductive(name)
        print(f"inductive {name}: {seen['verdict']}, last step {seen['last_step']}")
        return 1 if wrong_answer(name, seen) else 0
    if name not in symmetric_models():
        raise ValueError(f"{name} is neither a symmetric model nor an inductive one")
    report = check(name)
    print(
        f"symmetry {name}: {report.states} states, {'closed' if report.closed else report.broken}"
    )
    return 0 if report.closed else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shmref.tlc.checkrecord", description=__doc__)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--write", action="store_true", help="run the checks, write the record")
    what.add_argument("--check", action="store_true", help="exit 0 if the record is of these files")
    what.add_argument("--only", metavar="MODEL", help="run one model's check, write nothing")
    args = parser.parse_args(argv)
    try:
        if args.write:
            return write()
        if args.only:
            return show(args.only)
    except (TlcError, ValueError) as exc:
        print(f"shmref.tlc.checkrecord: {exc}", file=sys.stderr)
        return 2
    found = problem()
    if found:
        print(f"spec checks: {found}", file=sys.stderr)
        return 1
    checks = json.loads((SPEC_DIR / RECORD_NAME).read_text(encoding="utf-8"))["checks"]
    print(
        f"{SPEC_DIR / RECORD_NAME} stands for these files: {len(checks['symmetry'])} graphs "
        f"closed, {len(checks['inductive'])} inductive checks as wanted"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
