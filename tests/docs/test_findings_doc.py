"""FINDINGS.md is generated where it says so, and its data is sound.

CI runs these: the committed FINDINGS.md must equal what `make findings`
generates from docs/findings.toml and the oracle snapshot; every regression
test and replay command the data names must exist; and each broken input
(data file, document, oracle report) is refused with one clear message.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shmref.docgen import findings
from shmref.docgen.oracle_snapshot import FindingsError
from shmref.docgen.versions import load_versions, parse_releases

REPO = Path(__file__).resolve().parents[2]

GOOD_ENTRY = """
[[finding]]
id = "1"
title = "a title"
severity = "crash or wedge"
reach = "a configuration"
vllm_path = "vllm/x.py: f"
upstream = "still present"
releases = "0.11.0-0.34.0"
seed_tests = [
  "tests/findings/test_seed_findings_bad_input.py::test_f01_asserts_vanish_under_dash_O_seed",
]
refimpl_tests = [
  "tests/findings/test_seed_findings_reclamation.py::test_f03_interleaved_put_refimpl",
]
replay = "python -m pytest tests/findings/test_seed_findings_bad_input.py -k f01"
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# -- the committed document ------------------------------------------------------------------


def test_findings_md_is_what_make_findings_generates() -> None:
    expected = findings.generate()
    current = findings.DOC.read_text(encoding="utf-8")
    assert current == expected, "FINDINGS.md is stale: run `make findings` and commit it"


def test_check_mode_reports_a_stale_document(tmp_path: Path, capsys: Any) -> None:
    doc = write(tmp_path, "FINDINGS.md", findings.DOC.read_text(encoding="utf-8"))
    assert findings.main(["--check", "--doc", str(doc)]) == 0
    stale = doc.read_text(encoding="utf-8").replace("| crash or wedge ", "| resource leak  ", 1)
    doc.write_text(stale, encoding="utf-8")
    assert findings.main(["--check", "--doc", str(doc)]) == 1
    assert "FINDINGS.md (generated)" in capsys.readouterr().out
    assert doc.read_text(encoding="utf-8") == stale  # --check never writes
    assert findings.main(["--doc", str(doc)]) == 0  # regeneration repairs it
    assert doc.read_text(encoding="utf-8") == findings.DOC.read_text(encoding="utf-8")


def test_a_document_without_markers_is_refused() -> None:
    with pytest.raises(FindingsError, match="BEGIN GENERATED: summary"):
        findings.render("# no markers here\n", {"summary": "table"})


def test_render_replaces_only_between_markers() -> None:
    doc = "before\n<!-- BEGIN GENERATED: t (x) -->\nold\n<!-- END GENERATED: t -->\nafter\n"
    assert findings.render(doc, {"t": "new"}) == doc.replace("old", "new")


# -- the data --------------------------------------------------------------------------------


def test_every_listed_regression_test_exists() -> None:
    data = findings.load_findings()
    xfail = findings.xfail_map(data)
    assert set(xfail) == {t for f in data for t in (*f.seed_tests, *f.refimpl_tests)}
    assert not any(xfail[t] for f in data for t in f.seed_tests), "a _seed test is xfail"


def test_refimpl_column_follows_the_xfail_markers() -> None:
    data = findings.load_findings()
    xfail = findings.xfail_map(data)
    for f in data:
        answer = findings.refimpl_closes(f, xfail)
        if f.refimpl_kept:  # refimpl follows the seed on purpose; its tests pin that
            assert answer.startswith("no, kept") and not any(xfail[t] for t in f.refimpl_tests)
            continue
        marked = [xfail[t] for t in f.refimpl_tests]
        expected = "yes" if not any(marked) else "no" if all(marked) else "partly"
        assert answer.split(" ")[0] == expected, f.id


def _selected(file: str, expression: str) -> list[str]:
    from _pytest.mark.expression import Expression

    compiled = Expression.compile(expression)
    names = findings.defined_tests(REPO / file)
    return [n for n in names if compiled.evaluate(lambda word, n=n: word.lower() in n.lower())]


def test_every_replay_command_selects_something() -> None:
    from shmref.oracle.hazards import HAZARDS

    for f in findings.load_findings():
        argv = shlex.split(f.replay)
        if argv[:3] == ["python", "-m", "pytest"]:
            file, flag, expression = argv[3:6]
            assert flag == "-k" and (REPO / file).is_file(), f.replay
            assert _selected(file, expression), f"{f.id}: {f.replay} selects no test"
        else:
            assert argv[:5] == ["python", "-m", "shmref.conformance", "--impl", "seed"], f.replay
            assert argv[5] == "--hazard" and argv[6] in {h.model for h in HAZARDS}, f.replay


BROKEN = {
    "unknown severity": (GOOD_ENTRY.replace("crash or wedge", "bad"), "severity 'bad'"),
    "unknown reach": (GOOD_ENTRY.replace("a configuration", "sometimes"), "reach 'sometimes'"),
    "missing field": (GOOD_ENTRY.replace('upstream = "still present"\n', ""), "missing"),
    "unknown field": (GOOD_ENTRY + 'colour = "red"\n', "unknown ['colour']"),
    "duplicate id": (GOOD_ENTRY + GOOD_ENTRY, "duplicate ids ['1']"),
    "test that does not exist": (
        GOOD_ENTRY.replace("test_f03_interleaved_put_refimpl", "test_f99_nothing_refimpl"),
        "do not exist",
    ),
    "malformed node id": (
        GOOD_ENTRY.replace("tests/findings/test_seed_findings_bad_input.py::test_f01", "test_f01"),
        "not tests/FILE.py::test_NAME",
    ),
    "empty test list": (
        GOOD_ENTRY.replace(
            '[\n  "tests/findings/test_seed_findings_bad_input.py::'
            'test_f01_asserts_vanish_under_dash_O_seed",\n]',
            "[]",
        ),
        "non-empty list",
    ),
    "replay not a command": (GOOD_ENTRY.replace("python -m pytest", "pytest"), "replay must"),
    "reach without a path": (
        GOOD_ENTRY.replace('"vllm/x.py: f"', '"none known"'),
        "needs a vLLM code path",
    ),
    "no releases": (GOOD_ENTRY.replace('releases = "0.11.0-0.34.0"\n', ""), "['releases']"),
    "empty releases": (GOOD_ENTRY.replace('"0.11.0-0.34.0"', '" "'), "non-empty string"),
    "releases not versions": (GOOD_ENTRY.replace('"0.11.0-0.34.0"', '"latest"'), "releases:"),
    "releases backwards": (GOOD_ENTRY.replace('"0.11.0-0.34.0"', '"0.34.0-0.11.0"'), "backwards"),
    "releases overlapping": (
        GOOD_ENTRY.replace('"0.11.0-0.34.0"', '"0.11.0-0.20.0, 0.15.0-0.34.0"'),
        "overlaps",
    ),
    "incident not a list": (GOOD_ENTRY + 'incidents = "#1: x"\n', "non-empty list"),
    "incident without a number": (GOOD_ENTRY + 'incidents = ["a crash"]\n', "is not '#N"),
    "incident with a link": (
        GOOD_ENTRY + 'incidents = ["#1: see https://example.org/1"]\n',
        "names a host or a link",
    ),
    "incident naming a host": (
        GOOD_ENTRY + 'incidents = ["#1: reported on github.com"]\n',
        "names a host or a link",
    ),
    "no entries": ("# nothing\n", "no [[finding]] entries"),
    "not TOML": ("[[finding]\n", "not valid TOML"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_data_file_is_refused(tmp_path: Path, case: str) -> None:
    text, message = BROKEN[case]
    path = write(tmp_path, "findings.toml", text)
    with pytest.raises(FindingsError) as raised:
        findings.xfail_map(findings.load_findings(path))
    assert message in str(raised.value)


def test_the_good_entry_is_accepted(tmp_path: Path) -> None:
    entry = findings.load_findings(write(tmp_path, "findings.toml", GOOD_ENTRY))[0]
    xfail = findings.xfail_map([entry])
    assert findings.refimpl_closes(entry, xfail) == "no"  # its refimpl test is xfail
    assert entry.releases == "0.11.0-0.34.0" and entry.incidents == ()


def test_a_finding_without_releases_is_refused(tmp_path: Path) -> None:
    """Every finding says which vLLM releases have it ("none" if none does)."""
    text = GOOD_ENTRY.replace('releases = "0.11.0-0.34.0"\n', "")
    with pytest.raises(FindingsError, match=re.escape("missing ['releases']")):
        findings.load_findings(write(tmp_path, "findings.toml", text))
    none = findings.load_findings(
        write(tmp_path, "none.toml", text.replace("replay =", 'releases = "none"\nreplay ='))
    )
    assert none[0].releases == "none"


def test_every_finding_says_which_releases_have_it() -> None:
    """The committed data: each finding's releases, in the table, the latest judged."""
    data = findings.load_findings()
    versions = load_versions(findings.DATA)
    table = findings.summary_table(data, findings.xfail_map(data), versions)
    latest = versions.groups[-1].last
    for f in data:
        assert f.releases.strip() and f.releases in table, f.id
        # the latest release is either in a range or left out on purpose ("none",
        # or ranges that end earlier): parse_releases accepts it either way
        assert parse_releases(f.releases) is not None
    assert f"of {versions.groups[0].first}-{latest})" in table


def test_incidents_are_listed_under_the_table(tmp_path: Path) -> None:
    text = GOOD_ENTRY + 'incidents = ["#123: a crash, in our words"]\n'
    entry = findings.load_findings(write(tmp_path, "findings.toml", text))[0]
    assert entry.incidents == ("#123: a crash, in our words",)
    section = findings.incidents_section([entry])
    assert "- **1**: #123: a crash, in our words" in section
    assert findings.incidents_section([]) == ""


def test_cli_reports_a_broken_data_file_in_one_line(tmp_path: Path) -> None:
    data = write(tmp_path, "findings.toml", BROKEN["unknown severity"][0])
    done = subprocess.run(
        [sys.executable, "-m", "shmref", "findings", "--check", "--data", str(data)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("findings: ") and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


# -- the vLLM versions the columns describe ------------------------------------------------------

GOOD_VERSIONS = f"""
[versions]
code_path = "{"a" * 40}"
code_path_note = "the callers"
upstream = "{"b" * 40}"
upstream_note = "an unsigned copy"
seed_note = "signed"
"""
GOOD_GROUPS = f"""
[[release_group]]
releases = "0.11.0-0.31.0"
sha256 = "{"c" * 64}"
variant = "unsigned"
change = "the unsigned module"

[[release_group]]
releases = "0.32.0-0.34.0"
sha256 = "{"d" * 64}"
variant = "signed"
change = "signed handles"
"""
BROKEN_VERSIONS = {
    "no table": ("", "no [versions] table"),
    "short commit": (GOOD_VERSIONS.replace("a" * 40, "a" * 7), "40 hex digits"),
    "missing note": (GOOD_VERSIONS.replace('seed_note = "signed"\n', ""), "missing ['seed_note']"),
    "unknown key": (GOOD_VERSIONS + 'date = "today"\n', "unknown ['date']"),
    "empty note": (GOOD_VERSIONS.replace('"the callers"', '" "'), "non-empty string"),
    "no release groups": (GOOD_VERSIONS, "no [[release_group]] entries"),
    "group without sha256": (
        GOOD_VERSIONS + GOOD_GROUPS.replace(f'sha256 = "{"c" * 64}"\n', "", 1),
        "missing ['sha256']",
    ),
    "short sha256": (
        GOOD_VERSIONS + GOOD_GROUPS.replace("c" * 64, "c" * 12),
        "64 lowercase hex digits",
    ),
    "unknown variant": (
        GOOD_VERSIONS + GOOD_GROUPS.replace('"signed"', '"sealed"'),
        "variant 'sealed'",
    ),
    "group of two ranges": (
        GOOD_VERSIONS + GOOD_GROUPS.replace('"0.11.0-0.31.0"', '"0.11.0, 0.12.0"'),
        "one version or one range",
    ),
    "groups out of order": (
        GOOD_VERSIONS + GOOD_GROUPS.replace('"0.32.0-0.34.0"', '"0.30.0-0.34.0"'),
        "does not follow",
    ),
    "neighbours with one file": (
        GOOD_VERSIONS + GOOD_GROUPS.replace("d" * 64, "c" * 64),
        "make them one group",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN_VERSIONS))
def test_broken_versions_are_refused(tmp_path: Path, case: str) -> None:
    text, message = BROKEN_VERSIONS[case]
    with pytest.raises(FindingsError, match=re.escape(message)):
        load_versions(write(tmp_path, "findings.toml", text + GOOD_ENTRY))


def test_release_groups_and_findings_agree(tmp_path: Path) -> None:
    """A finding's releases start and end on release groups; "still present" (in the
    unsigned upstream) needs an unsigned release."""
    good = write(tmp_path, "good.toml", GOOD_VERSIONS + GOOD_GROUPS + GOOD_ENTRY)
    versions = load_versions(good)
    assert [g.releases for g in versions.groups] == ["0.11.0-0.31.0", "0.32.0-0.34.0"]
    assert versions.variant_range("unsigned") == "0.11.0-0.31.0"
    assert findings.load_findings(good)[0].releases == "0.11.0-0.34.0"
    broken = {
        '"0.12.0-0.34.0"': "do not start and end on release groups",
        '"0.11.0-0.33.0"': "do not start and end on release groups",
        '"0.32.0-0.34.0"': "list no release of the unsigned variant",
    }
    for releases, message in broken.items():
        text = GOOD_VERSIONS + GOOD_GROUPS + GOOD_ENTRY.replace('"0.11.0-0.34.0"', releases)
        with pytest.raises(FindingsError, match=re.escape(message)):
            findings.load_findings(write(tmp_path, "broken.toml", text))
    changed = GOOD_ENTRY.replace('"0.11.0-0.34.0"', '"0.32.0-0.34.0"').replace(
        '"still present"', '"changed"'
    )
    path = write(tmp_path, "changed.toml", GOOD_VERSIONS + GOOD_GROUPS + changed)
    assert findings.load_findings(path)[0].releases == "0.32.0-0.34.0"


def test_each_vllm_column_names_its_commit() -> None:
    """The committed data's commits head the columns and the lines above the table,
    and the release groups (with their files' hashes) are listed there."""
    versions = load_versions(findings.DATA)
    table = findings.summary_table([], {}, versions)
    unsigned = versions.variant_range("unsigned")
    assert f"vLLM upstream, unsigned ({unsigned}; `{versions.upstream[:7]}`)" in table
    assert f"`cache/shm.py` at `{versions.code_path[:7]}`" in table
    assert all(f"`{c}`" in table for c in (versions.code_path, versions.upstream))
    assert "**The seed**: " + versions.seed_note in table
    assert f"{unsigned} ship the unsigned variant" in table
    for group in versions.groups:
        assert f"| {group.releases} " in table and f"`{group.sha256[:12]}`" in table


# -- the oracle's report ------------------------------------------------------------------------

ORACLE_REPORT: dict[str, Any] = {
    "impl": "shmref_seed",
    "levels": {
        "API-compatible": {
            "status": "FAIL",
            "checks": [
                {"name": "test_ring.py::TestBadInput::test_non_int_sizes", "status": "FAIL"},
                {"name": "test_ring.py::test_scenarios", "status": "pass"},
                {"name": "test_storage.py::test_crashed", "status": "ERROR"},
            ],
        },
        "layout-compatible": {
            "status": "pass",
            "checks": [
                {"name": "test_layout.py::test_same_segment_bytes_as_refimpl", "status": "pass"}
            ],
        },
        "protocol-safe": {
            "status": "FAIL",
            "checks": [
                {"name": "hazard MCDoubleRead", "status": "FAIL"},
                {"name": "hazard MCIdWrap", "status": "assumption"},
                {"name": "test_stateful.py::test_store_machine", "status": "skip"},
            ],
        },
    },
}


def test_oracle_section_from_a_report() -> None:
    summary = findings.summarize_conformance(ORACLE_REPORT)
    by_level = {lv["level"]: lv for lv in summary["levels"]}
    assert by_level["API-compatible"]["failing"] == [
        "test_ring.py::TestBadInput::test_non_int_sizes",
        "test_storage.py::test_crashed",
    ]
    assert by_level["protocol-safe"]["assumptions"] == ["hazard MCIdWrap"]
    section = findings.oracle_section(summary)
    assert "| layout-compatible | **pass**" in section
    assert "`hazard MCDoubleRead`" in section and "`hazard MCIdWrap`" in section
    assert "test_scenarios" not in section and "test_store_machine" not in section


def test_oracle_report_with_levels_as_a_list() -> None:
    """The report format is being re-cut: a list of levels works the same."""
    as_list = {
        "impl": "m",
        "levels": [{"name": name, **body} for name, body in ORACLE_REPORT["levels"].items()],
    }
    assert (
        findings.summarize_conformance(as_list)["levels"]
        == findings.summarize_conformance(ORACLE_REPORT)["levels"]
    )


def test_oracle_report_with_other_key_names() -> None:
    renamed = {
        "impl": "m",
        "levels": [
            {
                "level": name,
                "result": body["status"],
                "properties": [{"name": c["name"], "result": c["status"]} for c in body["checks"]],
            }
            for name, body in ORACLE_REPORT["levels"].items()
        ],
    }
    assert (
        findings.summarize_conformance(renamed)["levels"]
        == findings.summarize_conformance(ORACLE_REPORT)["levels"]
    )


@pytest.mark.parametrize(
    "report,message",
    [
        ({"impl": "m"}, "no 'levels'"),
        ({"levels": {"L": {"checks": []}}}, "needs a name and a status"),
        ({"levels": {"L": {"status": "FAIL", "checks": [{"status": "FAIL"}]}}}, "malformed checks"),
    ],
)
def test_a_broken_oracle_report_is_refused(report: dict[str, Any], message: str) -> None:
    with pytest.raises(FindingsError, match=message):
        findings.summarize_conformance(report)


def test_snapshot_refresh_from_a_report(tmp_path: Path) -> None:
    report = write(tmp_path, "conformance.json", json.dumps(ORACLE_REPORT))
    snapshot = tmp_path / "snapshot.json"
    doc = write(tmp_path, "FINDINGS.md", findings.DOC.read_text(encoding="utf-8"))
    assert (
        findings.main(
            ["--conformance", str(report), "--snapshot", str(snapshot), "--doc", str(doc)]
        )
        == 0
    )
    assert json.loads(snapshot.read_text())["levels"][0]["level"] == "API-compatible"
    assert "`hazard MCDoubleRead`" in doc.read_text(encoding="utf-8")
    assert "test_same_results_as_refimpl" not in doc.read_text(encoding="utf-8")


def test_new_statuses_crash_timeout_and_not_run() -> None:
    """The report's statuses being re-cut: CRASH and TIMEOUT fail, 'not run' is listed."""
    report = {
        "impl": "m",
        "levels": [
            {
                "name": "layout",
                "status": "FAIL",
                "checks": [
                    {"name": "a", "status": "CRASH"},
                    {"name": "b", "status": "TIMEOUT"},
                    {"name": "c", "status": "not run"},
                    {"name": "d", "status": "PASS"},
                ],
            }
        ],
    }
    (level,) = findings.summarize_conformance(report)["levels"]
    assert level["failing"] == ["a", "b"] and level["not_run"] == ["c"]
    section = findings.oracle_section(findings.summarize_conformance(report))
    assert "layout did not run: `c`." in section


def test_check_with_a_report_is_ci_s_currency_check(tmp_path: Path, capsys: Any) -> None:
    """--check --conformance FILE: exit 1 when the snapshot is not FILE's summary;
    it writes nothing; a snapshot made from FILE passes."""
    report = write(tmp_path, "conformance.json", json.dumps(ORACLE_REPORT))
    snapshot = write(tmp_path, "snapshot.json", findings.SNAPSHOT.read_text(encoding="utf-8"))
    before = snapshot.read_text(encoding="utf-8")
    argv = ["--check", "--conformance", str(report), "--snapshot", str(snapshot)]
    assert findings.main(argv) == 1
    assert "is not the summary of" in capsys.readouterr().err
    assert snapshot.read_text(encoding="utf-8") == before  # --check never writes
    doc = write(tmp_path, "FINDINGS.md", findings.DOC.read_text(encoding="utf-8"))
    refresh = ["--conformance", str(report), "--snapshot", str(snapshot), "--doc", str(doc)]
    assert findings.main(refresh) == 0
    assert findings.main([*argv, "--doc", str(doc)]) == 0


def test_the_committed_snapshot_passes_its_own_currency_check(tmp_path: Path) -> None:
    """A report whose summary is the committed snapshot is current (old snapshots
    without 'not_run' included)."""
    snapshot = json.loads(findings.SNAPSHOT.read_text(encoding="utf-8"))
    report = {
        "impl": snapshot["impl"],
        "levels": [
            {
                "name": lv["level"],
                "status": lv["status"],
                "checks": [{"name": n, "status": "FAIL"} for n in lv["failing"]]
                + [{"name": n, "status": "assumption"} for n in lv["assumptions"]],
            }
            for lv in snapshot["levels"]
        ],
    }
    path = write(tmp_path, "conformance.json", json.dumps(report))
    assert findings.main(["--check", "--conformance", str(path)]) == 0
