"""Markdown tables from bench/results.json, and README.md's benchmark section."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from bench.store import CATEGORIES

START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def _num(value: float, digits: int = 3) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _paired(row: dict[str, Any], other: str, digits: int = 2) -> str:
    """The paired ratio and its quartiles (older results: the ratio of medians)."""
    if f"paired_vs_{other}" not in row:
        return f"{row[f'vs_{other}']:.{digits}f}"
    low, high = row[f"paired_vs_{other}_quartiles"]
    return f"**{row[f'paired_vs_{other}']:.{digits}f}** [{low:.{digits}f}–{high:.{digits}f}]"


_COPY_HEADS = {"refimpl": "refimpl", "seed": "seed", "native": "native", "plain": "plain copy"}


def _faults(row: dict[str, Any] | None) -> str:
    if row is None or "faults_per_op" not in row:
        return "-"
    return f"{row['faults_per_op']:.2g}"


def store_tables(store: dict[str, Any]) -> list[str]:
    rows = store["throughput"]
    by = {(r["readers"], r["size"], r["contender"]): r for r in rows}
    out = [
        "### put+get: refimpl vs the seed vs a plain copy into shared memory",
        "",
        "One put (with its signed handle) and one get by every reader per object; "
        "readers are separate processes. Median of interleaved repetitions. "
        "refimpl / seed = the median over repetitions of the ratio of their put+get/s "
        "in the same repetition (they ran back to back), in brackets its quartiles: "
        "the middle half of the repetitions lies between; above 1 = refimpl faster. "
        "spread = fastest over slowest repetition (1 = no noise). CPU µs = CPU time of "
        "one put plus its gets in every reader (median), which time-slicing on a busy "
        "machine does not inflate; its ratio is a rate ratio too (seed's CPU per object "
        "over refimpl's). faults = page faults per put+get (writer and readers).",
        "",
    ]
    copy_rows = store.get("copies", [])
    value_copies: dict[str, Any] = next((c for c in copy_rows if c["kind"] == "bytes"), {})
    body = []
    for n_readers, size in dict.fromkeys((r["readers"], r["size"]) for r in rows):
        ref, seed, plain = (by.get((n_readers, size, c)) for c in ("refimpl", "seed", "plain"))
        if ref is None:
            continue
        body.append(
            [
                str(n_readers),
                size,
                _num(ref["ops_per_s"]),
                _num(seed["ops_per_s"]) if seed else "-",
                _paired(ref, "seed") if seed else "-",
                f"{ref['spread']:.2f} / {seed['spread']:.2f}" if seed else f"{ref['spread']:.2f}",
                f"{ref['cpu_us']:.1f} / {seed['cpu_us']:.1f}" if seed else f"{ref['cpu_us']:.1f}",
                f"**{ref['cpu_vs_seed']:.2f}**" if seed else "-",
                "/".join(_faults(r) for r in (ref, seed, plain)),
                f"{ref['put_us']:.1f} / {ref['get_us']:.1f}",
                f"{seed['put_us']:.1f} / {seed['get_us']:.1f}" if seed else "-",
                _num(ref["mb_per_s"]),
                _num(plain["mb_per_s"]) if plain else "-",
                _paired(ref, "plain", 3) if plain else "-",
                "/".join(str(value_copies.get(c, "-")) for c in ("refimpl", "seed", "plain")),
            ]
        )
    out += _table(
        [
            "readers",
            "value",
            "refimpl put+get/s",
            "seed put+get/s",
            "refimpl / seed",
            "spread refimpl / seed",
            "CPU µs refimpl / seed",
            "seed CPU / refimpl CPU",
            "faults refimpl/seed/plain",
            "refimpl put / get µs",
            "seed put / get µs",
            "refimpl MB/s",
            "plain copy MB/s",
            "refimpl / plain",
            "copies refimpl/seed/plain",
        ],
        body,
    )
    out += native_table(store, by, value_copies)
    # native's column only in results that measured it (older ones render as before)
    copy_keys = [k for k in _COPY_HEADS if k != "native" or any(k in c for c in copy_rows)]
    if copy_rows:
        out += [
            "",
            "### Copies of a value from put to a reader's object",
            "",
            "Counted by `bench/copies.py` (tracemalloc, one 1 MiB put and get): value-sized "
            "peak allocations in put and get, plus the one write into the segment. "
            "The physical limit is 2 for bytes (one copy in, one out) and 3 for a value "
            "msgpack packs (packed, copied in, unpacked: msgpack cannot pack into the "
            "segment). refimpl and the seed share the serde, so its copies are both's.",
            "",
        ]
        out += _table(
            ["value", *(_COPY_HEADS[k] for k in copy_keys)],
            [[c["kind"], *(str(c.get(k, "-")) for k in copy_keys)] for c in copy_rows],
        )
    profile = store.get("profile", [])
    if profile:
        out += ["", "### Where the time goes (cProfile self time, share of put+get)", ""]
        shown = [c for c in CATEGORIES if any(c in p["shares"] for p in profile)]
        out += _table(
            ["value", "impl", *shown],
            [
                [p["size"], p["contender"], *(f"{100 * p['shares'][c]:.0f}%" for c in shown)]
                for p in profile
            ],
        )
    return out


def native_table(
    store: dict[str, Any], by: dict[tuple[Any, ...], dict[str, Any]], copies: dict[str, Any]
) -> list[str]:
    """native_store beside the seed and refimpl, and against two cold copies (issue 24)."""
    cold = {c["size"]: c for c in store.get("cold_copy", [])}
    keys = [k for k in dict.fromkeys((r, s) for r, s, c in by if c == "native")]
    if not keys:
        return []
    out = [
        "",
        "### native_store beside the seed and refimpl",
        "",
        "native_store (examples/native_store): the ring, chunk headers, read counts and "
        "copies in C, the key index, HMAC signatures and serde in Python. native / seed: "
        "the paired ratio of put+get/s as above (goal: 3 or more at 64 B and 4 KiB); "
        "seed CPU / native CPU: the same ratio in CPU time, which other load inflates less. "
        "cold copy = one memcpy of the value into memory the cache does not hold "
        "(bench/coldcopy.py); a put+get is at best two. µs per put+get = the round's time "
        "per object (pipes and reader hand-off included) over two cold copies (goal at "
        "1 MiB: 1.5 or less).",
        "",
    ]
    body = []
    for n_readers, size in keys:
        nat, seed, ref = (by.get((n_readers, size, c)) for c in ("native", "seed", "refimpl"))
        assert nat is not None
        per_op = 1e6 / nat["ops_per_s"]
        two = 2 * cold[size]["copy_us"] if size in cold else None
        body.append(
            [
                str(n_readers),
                size,
                _num(nat["ops_per_s"]),
                _num(seed["ops_per_s"]) if seed else "-",
                _num(ref["ops_per_s"]) if ref else "-",
                _paired(nat, "seed") if seed else "-",
                f"{nat['cpu_us']:.1f}",
                f"**{nat['cpu_vs_seed']:.2f}**" if seed else "-",
                f"{nat['put_us']:.1f} / {nat['get_us']:.1f}",
                f"{per_op:.1f}",
                f"{two:.1f}" if two is not None else "-",
                f"**{per_op / two:.2f}**" if two else "-",
                str(copies.get("native", "-")),
            ]
        )
    out += _table(
        [
            "readers",
            "value",
            "native put+get/s",
            "seed put+get/s",
            "refimpl put+get/s",
            "native / seed",
            "native CPU µs",
            "seed CPU / native CPU",
            "native put / get µs",
            "native µs per put+get",
            "two cold copies µs",
            "native / two cold copies",
            "copies (bytes value)",
        ],
        body,
    )
    return out


def tlc_tables(tlc: dict[str, Any]) -> list[str]:
    trivial = tlc["trivial"]
    out = [
        "### TLC per model",
        "",
        f"Baseline: {trivial['model']}, {trivial['distinct_states']:,} distinct states in "
        f"{trivial['wall_s']:.1f} s, {_num(trivial['net_states_per_min'])} states/min "
        f"net of TLC's {tlc['startup_s']:.1f} s start-up (a one-state spec's wall time). "
        "`vs trivial` = the model's net states/min over the baseline's.",
        "",
    ]
    out += _table(
        [
            "model",
            "outcome",
            "distinct states",
            "depth",
            "wall s",
            "states/min",
            "net states/min",
            "vs trivial",
        ],
        [
            [
                m["model"],
                m["outcome"],
                f"{m['distinct_states']:,}",
                str(m["depth"]),
                f"{m['wall_s']:.1f}",
                _num(m["states_per_min"]),
                _num(m["net_states_per_min"]),
                f"{m['vs_trivial']:.3f}",
            ]
            for m in tlc["models"]
        ],
    )
    return out


def replay_tables(replay: dict[str, Any]) -> list[str]:
    out: list[str] = ["### Replay and the state machine (refimpl, real shared memory)", ""]
    rows = []
    if "corpus" in replay:
        c = replay["corpus"]
        rows.append(
            [
                f"replay, {c['model']} simulation corpus",
                f"{c['traces']} traces, {c['steps']:,} steps",
                f"{c['seconds']:.2f}",
                f"{_num(c['traces_per_s'])} traces/s, {_num(c['steps_per_s'])} steps/s",
            ]
        )
    if "state_machine" in replay:
        m = replay["state_machine"]
        rows.append(
            [
                "Hypothesis state machine",
                f"{m['examples']} examples, {m['steps']:,} steps",
                f"{m['seconds']:.2f}",
                f"{_num(m['steps_per_s'])} steps/s",
            ]
        )
    if "edge_coverage" in replay:
        e = replay["edge_coverage"]
        rows.append(
            [
                f"edge coverage, MCRing ({e['cfg']})",
                f"{e['edges']:,} edges, {e['paths_replayed']:,}/{e['paths']:,} paths, "
                f"{e['steps']:,} steps, coverage {100 * e['coverage']:.1f}%",
                f"{e['replay_s']:.2f}",
                f"{_num(e['edges_per_s'])} edges/s, {_num(e['steps_per_s'])} steps/s "
                f"(+ TLC dump {e['tlc_dump_s']:.1f} s, covering_paths "
                f"{e['covering_paths_s']:.1f} s)",
            ]
        )
    out += _table(["what", "size", "seconds", "rate"], rows)
    mutants = replay.get("mutants")
    if mutants:
        out += ["", "### Time to first failure of each injected bug", ""]

        def cell(r: dict[str, Any], unit: str) -> str:
            if not r["caught"]:
                return f"not caught ({r['seconds']:.2f} s)"
            return f"{r['seconds']:.2f} s ({r[unit]:,} {unit})"

        out += _table(
            ["mutant", "replay", "state machine"],
            [
                [
                    f"`{m['mutant']}` ({m['replay']['model']})",
                    cell(m["replay"], "steps"),
                    cell(m["state_machine"], "steps"),
                ]
                for m in mutants
            ],
        )
    return out


def cpu_tables(rows: list[dict[str, Any]]) -> list[str]:
    from bench.cpu import table

    out = [
        "### CPU per put+get in one process (refimpl and the seed taking turns)",
        "",
        "The put+get of the callgrind table, timed by CPU time (`bench/cpu.py`): no pipes "
        "or reader processes, and no time slice lost to other processes. Per repetition "
        "every contender runs a batch back to back; seed CPU / refimpl CPU is the median "
        "over repetitions of their ratio in the same repetition, in brackets its "
        "quartiles (above 1 = refimpl needs less CPU).",
        "",
    ]
    return out + table(rows)


def instruction_tables(result: dict[str, Any]) -> list[str]:
    from bench.instructions import table

    out = [
        "### Instructions per put+get (callgrind)",
        "",
        "Counted by valgrind's callgrind in one process (`bench/instructions.py`): "
        "deterministic, so the load of a shared machine does not move it. valgrind "
        "counts each byte that glibc's `rep movsb` copies as one instruction, so at "
        "1 MiB the two copies (plain) are nearly everything. refimpl / seed below 1 "
        "= refimpl does less work. L1d misses = the simulated first-level data cache's "
        "read and write misses (`--cache-sim=yes`): the memory each moves.",
        "",
    ]
    return out + table(result)


def conformance_tables(rows: list[dict[str, Any]]) -> list[str]:
    installed = any("levels" in r for r in rows)  # issue 34: from the installed wheel
    out = [
        "### The oracle's speed: conformance runs from the installed wheel"
        if installed
        else "### The oracle's speed: a conformance run on refimpl",
        "",
        (
            "Each run is `python -m shmref.conformance --impl MOD` (MOD: refimpl; the seed's "
            "code with a pickle serde; a native store mutant) run from an empty folder by the "
            "python of a fresh virtual environment where the wheel is installed, without the "
            "seed file unless the store is built from it"
            if installed
            else "Each run is `python -m shmref.conformance --impl refimpl` as a subprocess"
        )
        + ", on one "
        "fresh temporary cache, in this order (`bench/conformancebench.py`). wall s includes "
        "start-up; report s is the report's own `seconds`; CPU s = user + system time of "
        "the run and the processes it waited for (TLC's JVM, spawned readers), which the "
        "machine's other load does not inflate: on 2 idle cores the wall time is at least "
        "CPU s / 2.",
        "",
    ]

    def verdict(r: dict[str, Any]) -> str:
        if r["target_s"] is None:
            return "-"
        mark = "within" if r["within_target"] else "**over**"
        return f"{mark} {r['target_s']:.0f} s"

    out += _table(
        ["run", *(["store"] if installed else []), "wall s", "report s", "CPU s", "exit", "target"],
        [
            [
                r["run"],
                *([r["command"].split("--impl ")[1].split()[0]] if installed else []),
                f"{r['wall_s']:.1f}",
                "-" if r["report_s"] is None else f"{r['report_s']:.1f}",
                f"{r['cpu_s']:.1f}" if "cpu_s" in r else "-",
                str(r["exit"]),
                verdict(r),
            ]
            for r in rows
        ],
    )
    for r in rows:
        if "seed_baseline" in r:
            b = r["seed_baseline"]
            slowest = ", ".join(f"`{k}` {v:.0f} s" for k, v in b["slowest_tests_s"].items())
            out += [
                "",
                f'In "{r["run"]}" the seed baseline (the seed\'s own run, then cached) spends '
                f"{b['pytest_s']:.0f} s in pytest; its slowest tests: {slowest}.",
            ]
        if "pytest_s" not in r or "cached" not in r["run"]:
            continue
        files = ", ".join(f"`{k}` {v:.0f} s" for k, v in r["pytest_files_s"].items())
        slowest = ", ".join(f"`{k}` {v:.0f} s" for k, v in r["slowest_tests_s"].items())
        other = "" if r["report_s"] is None else f" of the report's {r['report_s']:.0f} s"
        out += [
            "",
            f'Where the time of "{r["run"]}" goes (pytest `--durations`): the suite\'s tests '
            f"take {r['pytest_s']:.0f} s{other} (TLC, the hazard replays and trace "
            f"validation run beside or after them). Per file: {files}. Slowest tests: {slowest}.",
        ]
    return out


def markdown(results: dict[str, Any]) -> str:
    meta = results["meta"]
    load = ""
    if "load_average_at_start" in meta:
        load = (
            f"; load average (1 min) {meta['load_average_at_start']:.1f} at the start, "
            f"{meta.get('load_average_at_end', math.nan):.1f} at the end"
        )
    lines = [
        f"Measured by `python -m bench{' --quick' if meta['quick'] else ''}` "
        f"on {meta['cpus']} cores, Python {meta['python']}, {meta['date']} "
        f"({meta['seconds']:.0f} s in all; sections: {', '.join(meta.get('sections', []))}{load}).",
        "",
    ]
    if "store" in results:
        lines += store_tables(results["store"]) + [""]
    if results.get("cpu"):
        lines += cpu_tables(results["cpu"]) + [""]
    if "instructions" in results:
        lines += instruction_tables(results["instructions"]) + [""]
    if "tlc" in results:
        lines += tlc_tables(results["tlc"]) + [""]
    if "replay" in results:
        lines += replay_tables(results["replay"]) + [""]
    if "conformance" in results:
        lines += conformance_tables(results["conformance"]) + [""]
    notes = results.get("notes", [])
    if notes:
        lines += ["### Notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines).rstrip() + "\n"


def update_readme(readme: Path, text: str) -> None:
    """Replace what lies between the markers (added, under "## Benchmarks", if missing)."""
    content = readme.read_text(encoding="utf-8")
    block = f"{START}\n{text}{END}"
    if START in content and END in content:
        pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
        content = pattern.sub(lambda _m: block, content, count=1)
    else:
        content = content.rstrip("\n") + "\n\n## Benchmarks\n\n" + block + "\n"
    readme.write_text(content, encoding="utf-8")
