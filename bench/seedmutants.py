"""How many small defects in the seed's own code the suite's seed-compatible
level catches (the mutation score of `-m seed_compatible`).

    python -m bench.seedmutants [--sample 40 | --all] [--seed 0] [--out bench/seed-mutants.json]

`--all` runs every site once; the results file is rewritten after each
mutant and a rerun with `--resume` skips the mutants it already holds, so a
run cut off loses nothing. The Hypothesis profile is `--profile`, else
$SHMREF_PROFILE, else shmref-quick (shmref-baseline, without shrinking, is
the full run's: only the verdict is used).

Each mutant is the seed module (built by shmref.seed.build) with one change
in a method of the ring or the storage: a comparison flipped (`<` / `<=`,
`==` / `!=`), an integer constant off by one, `+` / `-` swapped, `and` /
`or` swapped, or one statement replaced by `pass` (not a docstring or a
logging call: those mutants would be equivalent by construction). A mutant is killed when

    pytest --shmref-impl MUTANT --pyargs shmref.suite -m seed_compatible

fails (the seed itself passes it). A mutant that hangs is killed by the
time limit. Survivors are listed: some are equivalent (no behaviour
changes), the others are what the level does not see.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from shmref.core.files import write_atomically
from shmref.seed.impl import load_impl

CLASSES = ("SingleWriterShmRingBuffer", "SingleWriterShmObjectStorage")
FLIP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq}
FLIP[ast.NotEq] = ast.Eq
LIMIT = 600  # seconds per mutant
FULL_RUN = Path("bench/seed-mutants-all.json")  # every site once, shmref-baseline (merged)
TABLE = Path("docs/seed-mutants.md")

# What became of each survivor of the full run: closed by a property of the
# seed-compatible level (the test that kills it now), or equivalent (why no
# caller of the seed can tell the mutant from the seed).
FATES: dict[int, tuple[str, str]] = {
    8: (
        "closed",
        "`test_ring_limits.py::test_the_id_bound_is_four_signed_bytes` (ID_MAX 3**31: ids "
        "past 2**31 - 1 overflow the 4-byte id field instead of wrapping)",
    ),
    9: ("closed", "`test_ring_limits.py::test_the_id_bound_is_four_signed_bytes` (ID_MAX 2**32)"),
    12: (
        "closed",
        "`test_ring_limits.py::test_a_reader_cannot_attach_beyond_the_segment` (the attach "
        "check subtracts the secret: a reader up to 64 bytes larger than the segment is taken)",
    ),
    121: (
        "closed",
        "`test_storage.py::test_clear_forgets_touches` (clear() keeps the touches: "
        "the id a touch named, issued again after the ids wrap, is never reclaimed)",
    ),
    39: (
        "closed",
        "`test_ring_limits.py::test_a_dropped_writer_ring_removes_its_segment` "
        "(__del__ without close(): a dropped writer ring leaks its segment)",
    ),
    47: (
        "closed",
        "`test_ring_limits.py::test_a_size_of_one_is_allocated` (allocate_buf asserts "
        "size > 1: a one-byte chunk is refused)",
    ),
    88: (
        "closed",
        "`test_ring_limits.py::test_free_buf_stops_once_it_freed_nbytes` "
        "(freed_bytes <= nbytes: free_buf frees one chunk more than asked)",
    ),
    133: (
        "equivalent",
        "`signature is None and key is None`: a missing signature or key still "
        "raises ValueError at the next check (not a list / not a str); only the "
        "message differs, and exceptions are judged by type (shmref.core.vocabulary)",
    ),
    140: (
        "equivalent",
        "a signature byte of 256 passes the range check, then bytes(signature) "
        "raises ValueError on it: the same exception type, another message",
    ),
    160: (
        "closed",
        "`test_storage.py::test_free_unused_frees_two_full_size_objects` (free_unused's "
        "target 3*max_object_size: of four read full-size objects it frees three, where the "
        "seed and refimpl stop at two)",
    ),
    119: (
        "equivalent",
        "clear() keeps id_index: ids go on increasing after a clear, and a put "
        "writes id_index[id] before free_unused can read it, so a stale entry is never read",
    ),
    191: (
        "equivalent",
        "touch's default address 0 -> 1: the writer ignores the address, and a "
        "reader is handed the address with the handle it touches (vLLM passes it)",
    ),
    192: (
        "equivalent",
        "touch's default monotonic_id 0 -> 1: as #191, the writer ignores it and a "
        "reader passes the handle's id",
    ),
}


def closing_test(number: int) -> str:
    """The name of the property a closed survivor's fate names (its first `file::test`)."""
    found = re.search(r"`[\w/.]+::(\w+)`", FATES[number][1])
    if FATES[number][0] != "closed" or found is None:
        raise ValueError(f"mutant {number} is not closed by a named property")
    return found.group(1)


def inert(stmt: ast.stmt) -> bool:
    """A docstring or a logging call: dropping it cannot change behaviour."""
    if not isinstance(stmt, ast.Expr):
        return False
    if isinstance(stmt.value, ast.Constant):
        return True
    call = stmt.value
    return isinstance(call, ast.Call) and ast.unparse(call.func).startswith("logger.")


def sites(tree: ast.Module) -> Iterator[tuple[str, ast.AST, int]]:
    """(kind, node, index) of every mutable place in the classes' methods."""
    for cls in tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name in CLASSES):
            continue
        for method in cls.body:
            if not isinstance(method, ast.FunctionDef):
                continue
            for node in ast.walk(method):
                if isinstance(node, ast.Compare):
                    for i, op in enumerate(node.ops):
                        if type(op) in FLIP:
                            yield "compare", node, i
                elif isinstance(node, ast.Constant) and type(node.value) is int:
                    yield "constant", node, 0
                elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
                    yield "arith", node, 0
                elif isinstance(node, ast.BoolOp):
                    yield "bool", node, 0
            for node in ast.walk(method):
                for field in ("body", "orelse"):
                    block = getattr(node, field, None)
                    if not isinstance(block, list):
                        continue
                    for i, stmt in enumerate(block):
                        kinds = ast.Expr | ast.Assign | ast.AugAssign | ast.Return
                        if isinstance(stmt, kinds) and not inert(stmt):
                            yield f"drop:{field}", node, i


def mutate(source: str, number: int) -> tuple[str, str]:
    """The source with mutation `number` applied, and a line saying what it is."""
    tree = ast.parse(source)
    kind, node, index = list(sites(tree))[number]
    line = getattr(node, "lineno", 0)
    if kind == "compare":
        assert isinstance(node, ast.Compare)
        old = node.ops[index]
        node.ops[index] = FLIP[type(old)]()
        what = f"{type(old).__name__} -> {type(node.ops[index]).__name__}"
    elif kind == "constant":
        assert isinstance(node, ast.Constant) and isinstance(node.value, int)
        what = f"{node.value} -> {node.value + 1}"
        node.value += 1
    elif kind == "arith":
        assert isinstance(node, ast.BinOp)
        node.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
        what = "+ <-> -"
    elif kind == "bool":
        assert isinstance(node, ast.BoolOp)
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        what = "and <-> or"
    else:
        block = getattr(node, kind.split(":")[1])
        line = block[index].lineno
        what = f"drop `{ast.unparse(block[index])[:60]}`"
        block[index] = ast.Pass()
    return ast.unparse(tree), f"line {line}: {what}"


def seed_compatible_run(
    module_dir: Path, name: str, profile: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    """`pytest --shmref-impl NAME -m seed_compatible` on a module in `module_dir`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(module_dir), *sys.path])}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra]
        + ["--shmref-impl", name, "--shmref-profile", profile]
        + ["--pyargs", "shmref.suite", "-m", "seed_compatible"],
        capture_output=True,
        text=True,
        env=env,
        cwd=module_dir,
        timeout=LIMIT,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def kill(module_dir: Path, name: str, profile: str) -> tuple[bool, str, float]:
    started = time.monotonic()
    try:
        done = seed_compatible_run(module_dir, name, profile, "-x")
    except subprocess.TimeoutExpired:
        return True, "timeout", time.monotonic() - started
    last = (done.stdout.strip().splitlines() or [""])[-1]
    return done.returncode not in (0, 5), last, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.seedmutants", description=__doc__)
    parser.add_argument("--sample", type=int, default=40)
    parser.add_argument("--all", action="store_true", help="every site once (overrides --sample)")
    parser.add_argument(
        "--sites", default="", help="FIRST-LAST: only these sites (to share a run between workers)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("bench/seed-mutants.json"))
    parser.add_argument("--resume", action="store_true", help="skip mutants already in --out")
    parser.add_argument("--profile", default=os.environ.get("SHMREF_PROFILE", "shmref-quick"))
    parser.add_argument("--table", action="store_true", help=f"write {TABLE} from {FULL_RUN}")
    args = parser.parse_args(argv)
    if args.table:
        TABLE.write_text(table(json.loads(FULL_RUN.read_text())))
        print(f"{TABLE} written")
        return 0
    source = Path(load_impl("seed").__file__ or "").read_text()
    count = len(list(sites(ast.parse(source))))
    if args.all:
        chosen = list(range(count))
    else:
        chosen = sorted(random.Random(args.seed).sample(range(count), min(args.sample, count)))
    if args.sites:
        try:
            low, high = (int(x) for x in args.sites.split("-"))
        except ValueError:
            parser.error(f"--sites {args.sites!r}: give FIRST-LAST, e.g. 100-208")
        chosen = [n for n in chosen if low <= n <= high]
    rows: list[dict[str, object]] = []
    if args.resume and args.out.exists():
        rows = [r for r in json.loads(args.out.read_text())["rows"] if r["mutant"] in chosen]
    done = {r["mutant"] for r in rows}
    with tempfile.TemporaryDirectory() as folder:
        for number in chosen:
            if number in done:
                continue
            name = f"seedmutant_{number}"
            text, what = mutate(source, number)
            (Path(folder) / f"{name}.py").write_text(text)
            killed, last, seconds = kill(Path(folder), name, args.profile)
            rows.append({"mutant": number, "what": what, "killed": killed, "pytest": last})
            print(f"{'killed' if killed else 'SURVIVED'}  {number:>4}  {what}  ({seconds:.0f} s)")
            sys.stdout.flush()
            save(args.out, count, args.profile, rows)
    kills = sum(bool(r["killed"]) for r in rows)
    share = 100 * kills / max(len(rows), 1)
    print(f"{kills} of {len(rows)} killed ({share:.1f} %), of {count} sites")
    save(args.out, count, args.profile, rows)
    return 0


def figure(data: dict[str, Any]) -> str:
    """The full run's figure, as README.md and docs/seed-mutants.md show it."""
    rows = data["rows"]
    survivors = [r["mutant"] for r in rows if not r["killed"]]
    equivalent = [n for n in survivors if FATES.get(n, ("",))[0] == "equivalent"]
    killed = len(rows) - len(survivors)
    closed = sum(1 for n in survivors if FATES.get(n, ("",))[0] == "closed")
    opened = len(survivors) - len(equivalent) - closed
    timeouts = sum(1 for r in rows if r["killed"] and r.get("pytest") == "timeout")
    share = 100 * killed / max(len(rows) - len(equivalent), 1)
    done = "every site" if len(rows) == data["sites"] else f"{len(rows)} of {data['sites']} sites"
    return (
        f"Seed mutants (`python -m bench.seedmutants --all`, {done} run once, "
        f"profile {data.get('profile', '?')}): {killed} of {len(rows)} killed by "
        f"`-m seed_compatible` ({timeouts} by the {LIMIT} s limit), "
        f"{len(equivalent)} equivalent "
        f"({share:.1f} % of the non-equivalent killed); "
        f"{closed} survivor(s) since closed by a property, {opened} open "
        "(docs/seed-mutants.md)."
    )


def table(data: dict[str, Any]) -> str:
    """docs/seed-mutants.md: the figure and every survivor with its fate."""
    lines = [
        "# Seed mutants the seed-compatible level let through",
        "",
        "Generated by `python -m bench.seedmutants --table` from "
        f"`{FULL_RUN}`; a test keeps it current.",
        "",
        figure(data),
        "",
        "| # | mutation | fate | how |",
        "|---|----------|------|-----|",
    ]
    for row in data["rows"]:
        if not row["killed"]:
            fate, how = FATES.get(row["mutant"], ("open", "not yet closed or argued"))
            lines.append(f"| {row['mutant']} | {row['what']} | {fate} | {how} |")
    return "\n".join(lines) + "\n"


def save(out: Path, count: int, profile: str, rows: list[dict[str, object]]) -> None:
    """The results so far, written whole (a run cut off keeps them)."""
    rows = sorted(rows, key=lambda r: int(str(r["mutant"])))
    data = {"sites": count, "profile": profile, "rows": rows}
    write_atomically(out, json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
