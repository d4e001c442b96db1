"""shmref.render: the one trace format, its SVG and the report page, and what
each does with bad input (a broken trace file, a trace too long to draw, a
failure with no trace, a folder that cannot be written): one line, never a
traceback or a broken page."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shmref.render import html, sink, svg
from shmref.render.build import Builder
from shmref.render.traceformat import Trace, TraceFormatError
from shmref.traces.recording import Recording

REPO = Path(__file__).resolve().parents[2]
PICTURES = REPO / "docs" / "pictures"


def story(steps: int = 6) -> Trace:
    """A small trace through the Builder: puts, a read, a marked last step."""
    drawn = Builder("hypothesis", "a story", {"N": 8, "ID_MAX": 5, "MAX_OBJ": 3}, ["r1", "r2"])
    drawn.add(1, {"name": "put", "key": "a", "size": 2}, "ok", (0, 0))
    drawn.add(2, {"name": "get_begin", "reader": 0, "handle": ("a", 0, 0)}, "ok")
    drawn.add(3, {"name": "get_end", "reader": 0, "handle": ("a", 0, 0)}, "ok", "a")
    for k in range(4, steps + 1):
        drawn.add(k, {"name": "put", "key": f"k{k}", "size": 1}, "ok", (k % 8, k))
    return drawn.mark("AssertionError: the read returned b's value")


def test_the_format_round_trips_through_json() -> None:
    trace = story()
    again = Trace.from_json(json.loads(trace.dumps()))
    assert again == trace and again.dumps() == trace.dumps()
    assert [s.actor for s in trace.steps[:3]] == ["writer", "r1", "r1"]
    assert trace.steps[2].result == "value a"
    chunk = trace.steps[2].ring.chunks[0] if trace.steps[2].ring else None
    assert chunk is not None and (chunk.id, chunk.key, chunk.size, chunk.state) == (
        0,
        "a",
        2,
        "read",  # one of its two reads counted (the tracker counts the read of its handle)
    )
    assert trace.diverged_at == len(trace.steps) - 1


@pytest.mark.parametrize(
    "broken, says",
    [
        ({"format": "other/1"}, "not a shmref-trace/1 trace"),
        ({"format": "shmref-trace/1", "source": "x", "title": "t"}, "missing or wrong"),
        ([1, 2], "not a shmref-trace/1 trace"),
    ],
)
def test_a_broken_trace_is_refused_in_one_line(broken: Any, says: str) -> None:
    with pytest.raises(TraceFormatError, match=says):
        Trace.from_json(broken)


def test_the_drawing_is_deterministic_and_shows_lanes_ring_and_the_divergence() -> None:
    trace = story()
    picture = svg.render(trace)
    assert picture == svg.render(Trace.from_json(trace.to_json()))
    for needle in ('class="timeline"', 'class="ring ring-store"', 'class="diverged"', ">r2<"):
        assert needle in picture
    assert picture.count('class="step"') == len(trace.steps)
    assert 'data-left-out="0"' in picture


def test_a_trace_too_long_to_draw_shows_its_start_and_its_divergence() -> None:
    trace = story(400)
    trace.steps[-1].diverged = False
    trace.steps[250].diverged = True
    shown = svg.shown_steps(trace)
    rows = [r for r in shown.rows if r is not None]
    assert rows[: svg.HEAD_STEPS] == list(range(svg.HEAD_STEPS)) and 250 in rows
    assert None in shown.rows and shown.left_out == 400 - len(rows)
    picture = svg.render(trace)
    assert f"{shown.left_out} steps left out" in picture and 'class="diverged"' in picture
    assert picture.count('class="step"') == svg.MAX_STEPS


def test_the_validation_source_marks_the_rejected_step() -> None:
    from shmref.oracle.validation import rejected_trace

    log = [
        {"name": "put", "key": "a", "size": 1, "handle": ("a", 0, 0), "outcome": "ok"},
        {"name": "get_begin", "reader": 1, "handle": ("a", 0, 0), "outcome": "ok"},
        {"name": "get_end", "reader": 1, "handle": ("a", 0, 0), "value": "b", "outcome": "ok"},
        {"name": "free_unused", "freed": (0,), "outcome": "ok"},
    ]
    recording = Recording({"N": 8, "ID_MAX": 5, "MAX_OBJ": 3, "R": 2}, log)
    trace = rejected_trace(recording, 2, "REJECTED: ...\nstep 3 (get_end): value b, spec a")
    assert len(trace.steps) == 3 and trace.diverged_at == 2
    assert trace.steps[2].actor == "r2" and trace.verdict.startswith("step 3")


def test_the_machine_leaves_its_falsifying_example(tmp_path: Path) -> None:
    """A mutant the state machine catches: its shrunk example is saved as a
    trace in the run's `trace_dir`."""
    from shmref.core.runconfig import RunConfig, running

    with running(RunConfig(trace_dir=str(tmp_path))):
        the_machine_leaves_its_falsifying_example(tmp_path)


def the_machine_leaves_its_falsifying_example(tmp_path: Path) -> None:
    from hypothesis import Phase, settings

    from shmref.seed.mutants import build_mutant
    from shmref.testing.machine import machine_for

    machine = machine_for(build_mutant("free_rule_without_n_readers"))
    machine.TestCase.settings = settings(
        machine.TestCase.settings,
        max_examples=400,
        stateful_step_count=20,
        phases=[Phase.generate],  # the last run of the failing example is drawn, shrunk or not
        report_multiple_bugs=False,
        database=None,
    )
    with pytest.raises(AssertionError):
        machine.TestCase().runTest()
    traces, problems = sink.load_all(tmp_path)
    assert not problems and len(traces) == 1
    trace = next(iter(traces.values()))
    assert trace.source == "hypothesis" and trace.diverged_at is not None
    assert trace.steps and all(s.ring is not None for s in trace.steps)


# -- the page ---------------------------------------------------------------------------------


def report(failures: list[dict[str, str]]) -> dict[str, Any]:
    check = {
        "level": "protocol-safe",
        "name": "hazard MCDoubleRead",
        "what": "double read",
        "status": "FAIL",
        "cases": "",
        "detail": "a wrong value",
        "failures": failures,
        "seed": "FAIL",
    }
    passing = {**check, "name": "replay MCRing", "status": "pass", "failures": [], "seed": "pass"}
    level = {"status": "FAIL", "seed": "FAIL", "meaning": "m", "checks": [check, passing]}
    return {
        "impl": "x",
        "quick": True,
        "seconds": 3,
        "ok": False,
        "not_run": [],
        "levels": {"protocol-safe": level},
    }


def folder(tmp_path: Path, failures: list[dict[str, str]], traces: list[Trace]) -> Path:
    out = tmp_path / "report"
    out.mkdir()
    (out / "conformance.json").write_text(json.dumps(report(failures)))
    for trace in traces:
        sink.save(trace, folder=out / sink.FOLDER)
    return out


def failure(case: str) -> dict[str, str]:
    return {"case": case, "trace": "AssertionError: boom", "command": "python -m x"}


def test_the_page_draws_a_failure_and_says_which_have_no_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    drawn = story()
    lost = {**failure("lost"), "trace": "Falsifying example:\nstate = Machine()"}
    out = folder(tmp_path, [failure("MCDoubleRead"), lost, failure("single")], [drawn])
    drawn.case = "MCDoubleRead"
    sink.save(drawn, folder=out / sink.FOLDER)
    page = html.write_report(out)
    assert page is not None
    text = page.read_text()
    assert text.count('<svg xmlns="http://www.w3.org/2000/svg" class="timeline"') == 1
    assert "the trace of this failure was not recorded" in text  # a sequence, not drawn
    assert "no trace to draw for this failure" in text  # a single call's check
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")  # offline
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "were not recorded" in err[0] and "lost" in err[0]
    assert "single" not in err[0]


def test_a_failing_propertys_row_says_what_went_wrong(tmp_path: Path) -> None:
    """The table's row of a failing property carries its first failure's
    message (the last exception line of its text), not only what it checks."""
    long = "Traceback (most recent call last):\n  File x\nE   AssertionError: kept after 99"
    out = folder(tmp_path, [{**failure("c"), "trace": long + " of 99 reads: a read was lost"}], [])
    page = html.write_report(out, quiet=True)
    assert page is not None
    row = page.read_text().split('id="row-p1"', 1)[1].split("</tr>", 1)[0]
    assert '<span class="why">AssertionError: kept after 99 of 99 reads: a read was lost' in row
    passing = page.read_text().split('id="row-p2"', 1)[1].split("</tr>", 1)[0]
    assert 'class="why"' not in passing
    assert html.failure_headline("no exception named\nhere") == "no exception named"
    assert len(html.failure_headline("ValueError: " + "x" * 500)) == html.HEADLINE


def test_a_broken_trace_file_is_one_line_on_the_page(tmp_path: Path) -> None:
    out = folder(tmp_path, [failure("MCDoubleRead")], [])
    (out / sink.FOLDER).mkdir()
    (out / sink.FOLDER / "bad.json").write_text("{not json")
    page = html.write_report(out, quiet=True)
    assert page is not None and "a trace file could not be read" in page.read_text()


def test_an_unreadable_report_still_gives_a_page(tmp_path: Path) -> None:
    (tmp_path / "conformance.json").write_text("[1, 2")
    page = html.write_report(tmp_path, quiet=True)
    assert page is not None and "could not be read" in page.read_text()


def test_a_folder_that_cannot_be_written_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # the report folder is a file: nothing can be written in it
    assert html.write_report(blocked / "report") is None
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("shmref: cannot write") and "Not a directory" in err[-1]


def test_the_conformance_command_refuses_a_folder_it_cannot_write(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "shmref.conformance",
            "--impl",
            "refimpl",
            "--out",
            str(blocked / "report"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [
        f"shmref: cannot write the report in {blocked / 'report'}: Not a directory"
    ]


def test_a_page_that_cannot_be_written_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    out = folder(tmp_path, [], [])
    (out / html.PAGE).mkdir()  # a folder where the page goes: os.replace fails
    (out / html.PAGE / "x").write_text("")
    run = subprocess.run(
        [sys.executable, "-m", "shmref", "render", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().count("\n") == 0 and "cannot write" in run.stderr
    assert sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp")) == []


def test_a_file_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    """shmref.core.files.write_atomically, every writer's: a reader sees the old
    file or the new one, and a failed write leaves the old one and no temporary."""
    from shmref.core.files import write_atomically

    path = tmp_path / "conformance.json"
    write_atomically(path, "old")
    write_atomically(path, b"new")
    assert path.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == [path.name]
    plain = tmp_path.parent / f"{tmp_path.name}-plain"
    plain.write_text("")  # the permissions a plain write gives
    assert path.stat().st_mode == plain.stat().st_mode
    with pytest.raises(UnicodeEncodeError):
        write_atomically(path, "\udc80")  # fails while writing the temporary file
    assert path.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == [path.name]
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "x").write_text("")
    with pytest.raises(OSError):
        write_atomically(tmp_path / "folder", "text")  # fails at the rename
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name, "folder"]


def test_the_command_refuses_a_folder_that_is_not_a_report(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "shmref", "render", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert run.returncode == 2 and "no conformance.json" in run.stderr


def test_a_replay_divergence_is_drawn_with_the_spec_beside_the_store() -> None:
    from shmref import tlc
    from shmref.core.paths import SPEC_DIR
    from shmref.seed.mutants import build_mutant
    from shmref.traces import shipped
    from shmref.traces.replay import Replayer

    replayer = Replayer(build_mutant("no_lap_wrap"), SPEC_DIR / "MCRing.cfg")
    traces: list[tlc.Trace] = shipped.corpus("MCRing")
    report = next(r for r in (replayer.replay(t, "MCRing") for t in traces) if not r.ok)
    drawn = report.timeline
    assert drawn is not None and drawn.source == "replay"
    assert len(drawn.steps) == len(report.steps) and drawn.diverged_at == len(drawn.steps) - 1
    assert all(s.ring is not None and s.spec is not None for s in drawn.steps)
    assert drawn.steps[-1].note.startswith("DIVERGED: ")
    assert 'class="ring ring-spec"' in svg.render(drawn)


def test_a_hazard_replay_is_drawn_to_its_violation() -> None:
    from shmref.oracle.hazardcheck import hazard_counterexamples
    from shmref.oracle.hazards import HAZARDS, replay_hazard
    from shmref.seed.impl import load_impl

    hazard = next(h for h in HAZARDS if h.model == "MCDoubleRead")
    found = hazard_counterexamples(hazard.model)[0].trace
    replay = replay_hazard(load_impl("seed"), hazard, found)
    drawn = replay.timeline
    assert drawn is not None and replay.violation and drawn.verdict == replay.violation
    assert drawn.diverged_at == len(drawn.steps) - 1 and len(drawn.steps) == len(replay.rows)
    last = drawn.steps[-1]
    assert (last.actor, last.action, last.result) == ("r1", "get_end", "value k2")
    assert last.spec is not None and last.ring is not None


def test_the_page_says_when_a_trace_is_too_long_to_draw_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long = story(300)
    long.case = "MCDoubleRead"
    out = folder(tmp_path, [failure("MCDoubleRead")], [long])
    page = html.write_report(out)
    assert page is not None
    left = svg.shown_steps(long).left_out
    assert f"this trace has 300 steps: its start and its divergence are drawn, {left}" in (
        page.read_text()
    )
    assert "too long to draw whole" in capsys.readouterr().err


def test_what_differs_says_when_there_is_no_seed_to_differ_from(tmp_path: Path) -> None:
    """With the seed baseline, every property having the seed's result is
    said so; without it (--no-baseline), the page does not claim that."""
    out = folder(tmp_path, [failure("MCDoubleRead")], [])
    page = html.write_report(out, quiet=True)
    assert page is not None and "Every property has the seed's result" in page.read_text()
    data = report([failure("MCDoubleRead")])
    for check in data["levels"]["protocol-safe"]["checks"]:
        check["seed"] = ""
    (out / "conformance.json").write_text(json.dumps(data))
    page = html.write_report(out, quiet=True)
    assert page is not None
    text = page.read_text()
    assert "Every property has the seed's result" not in text and "No seed result" in text
