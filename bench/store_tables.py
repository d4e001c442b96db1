"""The store section's Markdown tables (put+get, native_store, copies, profile)."""

from __future__ import annotations

from typing import Any

from bench.store import CATEGORIES


def num(value: float, digits: int = 3) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def md_table(head: list[str], rows: list[list[str]]) -> list[str]:
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
                num(ref["ops_per_s"]),
                num(seed["ops_per_s"]) if seed else "-",
                _paired(ref, "seed") if seed else "-",
                f"{ref['spread']:.2f} / {seed['spread']:.2f}" if seed else f"{ref['spread']:.2f}",
                f"{ref['cpu_us']:.1f} / {seed['cpu_us']:.1f}" if seed else f"{ref['cpu_us']:.1f}",
                f"**{ref['cpu_vs_seed']:.2f}**" if seed else "-",
                "/".join(_faults(r) for r in (ref, seed, plain)),
                f"{ref['put_us']:.1f} / {ref['get_us']:.1f}",
                f"{seed['put_us']:.1f} / {seed['get_us']:.1f}" if seed else "-",
                num(ref["mb_per_s"]),
                num(plain["mb_per_s"]) if plain else "-",
                _paired(ref, "plain", 3) if plain else "-",
                "/".join(str(value_copies.get(c, "-")) for c in ("refimpl", "seed", "plain")),
            ]
        )
    out += md_table(
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
        out += md_table(
            ["value", *(_COPY_HEADS[k] for k in copy_keys)],
            [[c["kind"], *(str(c.get(k, "-")) for k in copy_keys)] for c in copy_rows],
        )
    profile = store.get("profile", [])
    if profile:
        out += ["", "### Where the time goes (cProfile self time, share of put+get)", ""]
        shown = [c for c in CATEGORIES if any(c in p["shares"] for p in profile)]
        out += md_table(
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
                num(nat["ops_per_s"]),
                num(seed["ops_per_s"]) if seed else "-",
                num(ref["ops_per_s"]) if ref else "-",
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
    out += md_table(
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
