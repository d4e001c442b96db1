"""Markdown tables of the other sections: TLC, replay, CPU, callgrind, the oracle's speed."""

from __future__ import annotations

import shlex
from typing import Any

from bench.store_tables import md_table, num


def tlc_tables(tlc: dict[str, Any]) -> list[str]:
    trivial = tlc["trivial"]
    out = [
        "### TLC per model",
        "",
        f"Baseline: {trivial['model']}, {trivial['distinct_states']:,} distinct states in "
        f"{trivial['wall_s']:.1f} s, {num(trivial['net_states_per_min'])} states/min "
        f"net of TLC's {tlc['startup_s']:.1f} s start-up (a one-state spec's wall time). "
        "`vs trivial` = the model's net states/min over the baseline's.",
        "",
    ]
    out += md_table(
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
                num(m["states_per_min"]),
                num(m["net_states_per_min"]),
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
                f"{num(c['traces_per_s'])} traces/s, {num(c['steps_per_s'])} steps/s",
            ]
        )
    if "state_machine" in replay:
        m = replay["state_machine"]
        rows.append(
            [
                "Hypothesis state machine",
                f"{m['examples']} examples, {m['steps']:,} steps",
                f"{m['seconds']:.2f}",
                f"{num(m['steps_per_s'])} steps/s",
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
                f"{num(e['edges_per_s'])} edges/s, {num(e['steps_per_s'])} steps/s "
                f"(+ TLC dump {e['tlc_dump_s']:.1f} s, covering_paths "
                f"{e['covering_paths_s']:.1f} s)",
            ]
        )
    out += md_table(["what", "size", "seconds", "rate"], rows)
    mutants = replay.get("mutants")
    if mutants:
        out += ["", "### Time to first failure of each injected bug", ""]

        def cell(r: dict[str, Any], unit: str) -> str:
            if not r["caught"]:
                return f"not caught ({r['seconds']:.2f} s)"
            return f"{r['seconds']:.2f} s ({r[unit]:,} {unit})"

        out += md_table(
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
        "### CPU per put+get in one process (refimpl, the seed and native_store taking turns)",
        "",
        "The put+get of the callgrind table, timed by CPU time (`bench/cpu.py`): no pipes "
        "or reader processes, and no time slice lost to other processes. Per repetition "
        "every contender runs a batch back to back; seed CPU / refimpl CPU is the median "
        "over repetitions of their ratio in the same repetition, in brackets its "
        "quartiles (above 1 = refimpl needs less CPU); seed CPU / native CPU the same for "
        "native_store (goal: 3 or more at 64 B and 4 KiB, as with a reader process).",
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


def impl_of(row: dict[str, Any]) -> str:
    """The module a conformance run judged, from its recorded command."""
    words = shlex.split(row.get("command", ""))
    return words[words.index("--impl") + 1] if "--impl" in words[:-1] else "?"


def run_label(row: dict[str, Any]) -> str:
    impl = impl_of(row)
    return row["run"] if impl == "refimpl" else f"`{impl}`: {row['run']}"


def conformance_tables(rows: list[dict[str, Any]]) -> list[str]:
    others = sorted({impl_of(r) for r in rows} - {"refimpl"})
    fails = {impl_of(r) for r in rows if r["exit"] == 1}
    failing = " (a store that fails: exit 1)"
    also = "".join(f" and on `{o}`" + failing * (o in fails) for o in others)
    out = [
        "### The oracle's speed: a conformance run on refimpl" + also,
        "",
        (
            "Each run is `python -m shmref.conformance --impl MOD` run from an empty folder by "
            "the python of a fresh virtual environment where the wheel is installed, without "
            "the seed file unless the store is built from it"
            if any("levels" in r for r in rows)  # issue 34: measured as users get it
            else "Each run is `python -m shmref.conformance --impl refimpl` as a subprocess"
        )
        + ", on one fresh temporary cache, in this order (`bench/conformancebench.py`). "
        "wall s includes start-up; report s is the report's own `seconds`; "
        "CPU s = user + system time of "
        "the run and the processes it waited for (TLC's JVM, spawned readers), which the "
        "machine's other load does not inflate: on 2 idle cores the wall time is at least "
        "CPU s / 2. Targets: refimpl's first full run 180 s, cached 60 s, `--quick` 20 s; "
        "the failing seed-like store's cached full run 1.5x refimpl's cached full run "
        "(issue 49: shrinking within one budget of examples), the native mutant's and "
        "refimpl's behind the process protocol twice it; a store that fails as the seed does "
        "(the Rust port), twice the failing seed-like store's, whose failures cost the same "
        "shrinking.",
        "",
    ]

    def verdict(r: dict[str, Any]) -> str:
        if r["target_s"] is None:
            return "-"
        mark = "within" if r["within_target"] else "**over**"
        return f"{mark} {r['target_s']:.0f} s"

    out += md_table(
        ["run", "wall s", "report s", "CPU s", "exit", "target"],
        [
            [
                run_label(r),
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


def rust_tables(section: dict[str, Any]) -> list[str]:
    """The Rust store (examples/rust_store) against the seed: at its own pace
    (the bench request, its work checked), and as a writer driven through the
    process protocol beside the seed's readers."""
    head = ["### The Rust store against the seed (`bench/ruststore.py`)", ""]
    if "why_not" in section:
        return head + [f"Not measured: {section['why_not']}."]
    out = head + _rust_own_pace(section.get("own_pace"))
    if "load" in section:
        low, high = section["load"]
        out += [
            f"Both tables are of one run, at a load average of {low:.1f} to {high:.1f} "
            "(other work on the machine beside it): the rates swing with the load, the ratios "
            "of contenders that ran back to back much less.",
            "",
        ]
    rows = [
        [label, f"{r['rust']:,.0f}", f"{r['seed']:,.0f}", f"**{r['rust'] / r['seed']:.2f}**"]
        for label, r in section["rate"].items()
    ]
    return out + [
        f"**Through the pipe**: put+get per second (median of {section['reps']} alternating "
        f"rounds; {section['readers']} reader process running the seed's code). The Rust "
        "writer is driven through the process protocol: every put crosses a pipe as a JSON "
        "line with base64 bytes, so this measures the pipe more than the store: the cost a "
        "store in another language pays to be judged, not its speed. The seed writer runs in "
        "the bench's own process.",
        "",
        *md_table(["value", "Rust writer", "seed writer", "Rust / seed"], rows),
    ]


def _rust_own_pace(pace: dict[str, Any] | None) -> list[str]:
    """The own-pace table (results recorded before it existed: nothing)."""
    if pace is None:
        return []
    if "why_not" in pace:
        return [f"At its own pace: not measured: {pace['why_not']}.", ""]
    rows = [
        [
            label,
            f"{r['count']:,}",
            num(r["rust"]),
            num(r["seed"]),
            f"**{r['paired']:.2f}** [{r['quartiles'][0]:.2f}–{r['quartiles'][1]:.2f}]",
            num(r["rust_round_trip"]),
        ]
        for label, r in pace["sizes"].items()
    ]
    return [
        "**At its own pace** (the protocol's bench request, docs/protocol.md): each program "
        "is given a storage and runs the put+get loop itself (put, its signed handle, a "
        "reader's get: checked, copied, counted) over the request's objects, timed by its "
        "own clock; nothing crosses the pipe meanwhile. The seed answers the same request "
        "behind `python -m bench.serveseed` (the same loop in Python). Every "
        f"object reported is then checked by {pace['checked_by']}'s reader in another "
        "process (read count, signature, bytes), so no rate counts work not done. Median of "
        f"{pace['reps']} alternating requests; Rust / seed = the median of their ratio within "
        "a repetition, in brackets its quartiles. The last column is Rust's rate with the "
        "request and its reply (every handle, as JSON) included.",
        "",
        *md_table(
            [
                "value",
                "objects per request",
                "Rust put+get/s",
                "seed put+get/s",
                "Rust / seed",
                "Rust incl. the reply",
            ],
            rows,
        ),
        "",
    ]
