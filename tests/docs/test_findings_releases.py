"""FINDINGS.md's column of releases (docs/findings.toml's `releases`) agrees
with what `make vllm-check` measured (docs/vllm-check.json): a finding whose
seed tests reproduce on a release's module lists that release, and a finding
listing a checked release reproduces there. A broken input shows the check
catches either way of disagreeing."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from shmref.docgen.findings import Finding, load_findings
from shmref.docgen.versions import parse_releases, version_key

RECORD = Path(__file__).resolve().parents[2] / "docs" / "vllm-check.json"


def lists(finding: Finding, release: str) -> bool:
    """Does the finding's `releases` include `release`?"""
    return any(
        version_key(first) <= version_key(release) <= version_key(last)
        for first, last in parse_releases(finding.releases)
    )


def disagreements(findings: Iterable[Finding], record: dict[str, Any]) -> list[str]:
    """Each finding and checked release on which the column and the record differ."""
    found = []
    for release, entry in record["releases"].items():
        judged = entry["findings"]
        reproduced = set(judged["reproduced"])
        not_reproduced = {f["id"] for f in judged.get("not_reproduced", [])}
        for finding in findings:
            if finding.id in reproduced and not lists(finding, release):
                found.append(f"{finding.id}: reproduces on {release}, not in {finding.releases}")
            if finding.id in not_reproduced and lists(finding, release):
                found.append(f"{finding.id}: listed for {release}, does not reproduce there")
    return found


def test_the_release_column_is_what_the_record_measured() -> None:
    record = json.loads(RECORD.read_text())
    assert record["releases"], "docs/vllm-check.json has no release: run make vllm-check"
    for entry in record["releases"].values():
        assert not entry["findings"].get("error"), entry["findings"]
    assert disagreements(load_findings(), record) == []


def test_a_column_that_disagrees_is_named() -> None:
    findings = {f.id: f for f in load_findings()}
    record = {
        "releases": {
            "0.34.0": {"findings": {"reproduced": ["16"], "not_reproduced": [{"id": "1"}]}}
        }
    }
    narrowed = [
        Finding(**{**vars(findings["16"]), "releases": "0.11.0-0.31.0"}),
        findings["1"],
    ]
    assert disagreements(narrowed, record) == [
        "16: reproduces on 0.34.0, not in 0.11.0-0.31.0",
        "1: listed for 0.34.0, does not reproduce there",
    ]
