"""The benchmark's own logic on tiny inputs. No benchmark runs here: timing
belongs to `make bench` (`python -m bench`), never to the tests; these check
what its numbers become (JSON without infinities, ratios, the README block)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from bench import pipefloor
from bench.__main__ import _finite
from bench.common import median, ratio
from bench.report import END, START, markdown, update_readme


def test_results_json_has_no_infinity() -> None:
    """A ratio over a zero time is infinite; JSON cannot hold it: None instead."""
    results = {"a": [1.5, ratio(1.0, 0.0)], "b": {"c": -math.inf, "d": "text"}}
    assert ratio(1.0, 0.0) == math.inf and ratio(3.0, 2.0) == 1.5
    finite = _finite(results)
    assert finite == {"a": [1.5, None], "b": {"c": None, "d": "text"}}
    assert json.loads(json.dumps(finite, allow_nan=False)) == finite
    assert median([3.0, 1.0, 2.0]) == 2.0


def test_the_report_says_how_it_was_measured_and_lists_notes() -> None:
    meta = {"quick": True, "cpus": 2, "python": "3.11.7", "date": "2026-12-03", "seconds": 12.4}
    text = markdown({"meta": meta, "notes": ["one note"]})
    first = text.splitlines()[0]
    assert "`python -m bench --quick`" in first and "2 cores" in first and "12 s" in first
    assert "- one note" in text
    assert "### Notes" in text and "put+get" not in text  # only what was measured
    full = markdown({"meta": dict(meta, quick=False), "notes": []})
    assert "--quick" not in full and "### Notes" not in full


def test_the_readme_block_is_replaced_in_place_or_added(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nbefore\n{START}\nold table\n{END}\nafter\n")
    update_readme(readme, "new table\n")
    assert readme.read_text() == f"# x\n\nbefore\n{START}\nnew table\n{END}\nafter\n"
    update_readme(readme, "newer\n")  # again: one block, not two
    assert readme.read_text().count(START) == 1 and "new table" not in readme.read_text()
    bare = tmp_path / "BARE.md"
    bare.write_text("# y\n")
    update_readme(bare, "table\n")
    assert bare.read_text() == f"# y\n\n## Benchmarks\n\n{START}\ntable\n{END}\n"


# -- the paired ratios, callgrind totals and conformance timings (bench/) --------------------


def _rows(ref_rounds: list[float], seed_rounds: list[float]) -> list[dict[str, Any]]:
    def row(name: str, rounds: list[float]) -> dict[str, Any]:
        return {
            "readers": 1,
            "size": "64 B",
            "contender": name,
            "ops_per_s": 1 / statistics.median(rounds),
            "cpu_us": 1.0,
            "round_s": rounds,
        }

    return [row("refimpl", ref_rounds), row("seed", seed_rounds)]


def test_paired_ratio_follows_each_repetition() -> None:
    """Repetitions run under changing load: the paired ratio compares each
    repetition of refimpl with the seed's in the same repetition. Here the
    seed takes exactly twice as long in every one: ratio 2, no spread."""
    from bench.store import _add_ratios

    ref = [1.0, 2.0, 3.0, 4.0, 5.0]
    rows = _rows(ref, [2 * r for r in ref])
    _add_ratios(rows)
    assert rows[0]["paired_vs_seed"] == 2.0
    assert rows[0]["paired_vs_seed_quartiles"] == [2.0, 2.0]
    # broken pairing: the seed's repetitions in reverse order give the same
    # medians but quartiles far apart
    rows = _rows(ref, [2 * r for r in reversed(ref)])
    _add_ratios(rows)
    low, high = rows[0]["paired_vs_seed_quartiles"]
    assert low <= 1.0 and high >= 4.0


def test_callgrind_part_without_total_is_refused(tmp_path: Path) -> None:
    from bench.instructions import _part_totals

    good = tmp_path / "cg.out.1"
    good.write_text("events: Ir D1mr\nfn=(1) f\n0 5 1\ntotals: 1234 56\n")
    assert _part_totals(good) == {"Ir": 1234, "D1mr": 56}
    broken = tmp_path / "cg.out.2"
    broken.write_text("events: Ir\nfn=(1) f\n0 5\n")
    with pytest.raises(RuntimeError, match="no instruction total"):
        _part_totals(broken)


def test_conformance_table_flags_a_run_over_its_target() -> None:
    from bench.report import conformance_tables

    row = {"run": "full, cached", "report_s": 1.0, "cpu_s": 2.0, "exit": 0, "target_s": 60.0}
    within = "\n".join(conformance_tables([dict(row, wall_s=59.0, within_target=True)]))
    over = "\n".join(conformance_tables([dict(row, wall_s=61.0, within_target=False)]))
    assert "within 60 s" in within and "over" not in within
    assert "**over** 60 s" in over


REPO = Path(__file__).resolve().parents[2]


def _recorded() -> dict[str, Any]:
    from bench.__main__ import merge

    return merge([json.loads((REPO / "bench" / "results.json").read_text("utf-8"))])


def test_readme_bench_section_is_generated_from_bench_results_json() -> None:
    """README's section (plots, compact tables) is bench/results.json rendered
    (make bench-plots); an edited number in either makes this fail."""
    from bench.report import readme_block

    results = _recorded()
    readme = (REPO / "README.md").read_text("utf-8")
    assert f"{START}\n{readme_block(results)}{END}" in readme
    assert "](docs/bench/putget.svg)" in readme and "](docs/bench.md)" in readme
    results["store"]["throughput"][0]["ops_per_s"] += 1000  # a broken input: no longer matches
    assert f"{START}\n{readme_block(results)}{END}" not in readme


def test_bench_page_has_every_table_and_is_current() -> None:
    """docs/bench.md: every table (the fifteen-column one too) and the notes."""
    from bench.report import PAGE, page

    results = _recorded()
    text = (REPO / PAGE).read_text("utf-8")
    assert text == page(results), "docs/bench.md is stale: run make bench-plots"
    assert markdown(results) in text and "| copies refimpl/seed/plain |" in text
    results["meta"]["python"] = "tampered"
    assert page(results) != text


def test_plots_are_current_and_a_stale_one_is_caught(tmp_path: Path) -> None:
    """docs/bench/*.svg are bench/results.json drawn again, byte for byte; a plot
    of other numbers, a missing one and one left without data are all stale."""
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install '.[dev]')")
    from bench import plots

    results = _recorded()
    folder = REPO / "docs" / "bench"
    stale = plots.stale(results, folder)
    if stale:
        drawn_by = (folder / stale[0]).read_text("utf-8").split("<dc:title>")[-1][:20]
        import matplotlib

        pytest.fail(
            f"stale plots {stale} (drawn by {drawn_by!r}, installed matplotlib "
            f"{matplotlib.__version__}): run make bench-plots"
        )
    written = plots.write(results, tmp_path)
    assert [p.name for p in written] == plots.available(results)
    for path in written:  # the same bytes in a fresh folder: deterministic
        assert path.read_bytes() == (folder / path.name).read_bytes()
        assert b"<text" in path.read_bytes()  # svg.fonttype none: labels stay text
    changed = json.loads(json.dumps(results))
    changed["store"]["throughput"][0]["ops_per_s"] *= 2  # the deliberately stale input
    assert plots.stale(changed, tmp_path) == ["putget.svg"]
    del changed["conformance"]
    assert plots.stale(changed, tmp_path) == ["putget.svg", "oracle.svg"]  # left without data
    (tmp_path / "putget.svg").unlink()
    assert "putget.svg" in plots.stale(results, tmp_path)  # missing


def test_plots_from_unreadable_results_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.__main__ import main

    missing = tmp_path / "nothing.json"
    assert main(["--plots-only", "--report-only", str(missing), "--plots", str(tmp_path)]) == 2
    broken = tmp_path / "broken.json"
    broken.write_text('{"meta": {}}')
    assert main(["--plots-only", "--report-only", str(broken), "--plots", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("bench: cannot draw from") for line in err)
    assert str(missing) in err[0] and "Traceback" not in "".join(err)


def test_merge_keeps_the_later_runs_notes_and_each_sections_date() -> None:
    from bench.__main__ import merge

    def run(section: str, date: str, stress: str) -> dict[str, object]:
        meta = {"quick": False, "python": "3", "cpus": 2, "date": date, "seconds": 1.0}
        return {section: {}, "meta": {**meta, "sections": [section]}, "notes": [stress, "same"]}

    merged = merge(
        [
            run("cpu", "2026-12-03", "stress seed: old"),
            run("store", "2026-12-04", "stress seed: new"),
        ]
    )
    assert merged["notes"] == ["stress seed: new", "same"]
    assert merged["meta"]["date"] == "cpu 2026-12-03, store 2026-12-04"
    assert merge([run("cpu", "d", "x: y")])["meta"]["date"] == "d"


def test_tlc_and_failing_store_runs_are_drawn_when_recorded() -> None:
    """bench/results.json has no tlc section yet and no failing store's run:
    once `python -m bench` records them, their bars are drawn and labelled."""
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install '.[dev]')")
    from bench import plots
    from bench.report import readme_block

    results = _recorded()
    row = {"distinct_states": 13229, "depth": 25, "wall_s": 4.0, "states_per_min": 1.0}
    results["tlc"] = {
        "startup_s": 1.5,
        "trivial": {"net_states_per_min": 4e6},
        "models": [
            dict(row, model="MCRing", outcome="ok", net_states_per_min=3e5),
            dict(row, model="MCDoubleRead", outcome="invariant X", net_states_per_min=2e5),
        ],
    }
    failing = dict(results["conformance"][1], run="full, cached (fails)", exit=1, target_s=None)
    failing["command"] = "python -m shmref.conformance --impl seed"
    results["conformance"].append(failing)
    drawn = plots.render(results)
    assert list(drawn) == ["putget.svg", "oracle.svg", "tlc.svg"]
    assert b"MCDoubleRead" in drawn["tlc.svg"] and b"trivial spec" in drawn["tlc.svg"]
    assert b"seed: full, cached (fails)" in drawn["oracle.svg"]
    assert b"exit 1 (failures found)" in drawn["oracle.svg"]
    block = readme_block(results)
    assert "](docs/bench/tlc.svg)" in block and "TLC: 2 models, 26,458 distinct states" in block
    assert "| `seed`: full, cached (fails) |" in block


def test_the_rust_writer_section_is_a_table_or_says_why_not() -> None:
    from bench.report import markdown, readme_block

    results = _recorded()
    results["rust"] = {"why_not": "examples/rust_store/target/release/rust_store not built"}
    assert "Not measured: examples/rust_store/target/release/rust_store not built." in markdown(
        results
    )
    assert "| Rust / seed |" not in readme_block(results)
    rate = {"64 B": {"seed": 40000.0, "rust": 6000.0}}
    results["rust"] = {"readers": 1, "reps": 11, "rate": rate}  # recorded before own pace
    block = readme_block(results)
    assert "| 64 B | 6,000 | 40,000 | **0.15** |" in block and "At its own" not in block
    row = {"count": 20000, "rust": 120000.0, "seed": 30000.0, "paired": 4.1}
    row |= {"quartiles": [3.9, 4.4], "rust_round_trip": 60000.0}
    results["rust"]["own_pace"] = {"reps": 11, "checked_by": "refimpl", "sizes": {"64 B": row}}
    block = readme_block(results)
    # both rows, each table saying which it is
    assert "| 64 B | 20,000 | 120,000 | 30,000 | **4.10** [3.90–4.40] | 60,000 |" in block
    assert "**At its own pace**" in block and "**Through the pipe**" in block
    assert block.index("**At its own pace**") < block.index("| 64 B | 6,000 | 40,000 |")
    results["rust"]["own_pace"] = {"why_not": "it does not offer the bench request"}
    assert "At its own pace: not measured: it does not offer the bench request." in markdown(
        results
    )


def test_a_program_with_arguments_is_one_store_in_the_oracle_table() -> None:
    from bench.tables import impl_of

    row = {"command": "python -m shmref.conformance --impl 'exec:python -m serve refimpl' --quick"}
    assert impl_of(row) == "exec:python -m serve refimpl"


def test_pipefloor_prices_round_trips_at_one_request_a_write(capsys: Any) -> None:
    """bench.pipefloor's arithmetic (issue 49's floor): a round trip at the
    price of a request written alone, any other request at a window of 8's;
    its output names each window, and bad counts are one line of usage."""
    floors = {1: pipefloor.Floor(1, 90.0, 40.0, 37.0), 8: pipefloor.Floor(8, 17.0, 11.0, 10.0)}
    cost = pipefloor.traffic_cost
    assert cost(floors, 1_000, 100) == pytest.approx((100 * 77.0 + 900 * 21.0) / 1e6)
    assert cost(floors, 10, 10) == pytest.approx(10 * 77.0 / 1e6)
    assert pipefloor.main(["--requests", "64", "--traffic", "640", "64"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()[1:4]] == ["1", "8", "64"]
    assert "640 requests in 64 round trips cost" in out
    with pytest.raises(SystemExit) as exit_:
        pipefloor.main(["--requests", "8"])
    assert exit_.value.code == 2 and "at least 64" in capsys.readouterr().err
