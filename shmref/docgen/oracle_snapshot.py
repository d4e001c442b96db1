"""The oracle's report on the seed, as FINDINGS.md shows it (for `shmref findings`).

`summarize_conformance` reduces the JSON of `python -m shmref.conformance
--impl seed` to a snapshot (per level: its status, the failing checks, the
assumptions, the checks not run), which is committed as
docs/seed-conformance.json so that regenerating FINDINGS.md needs no oracle
run; `oracle_section` renders it. The report's format is being re-cut, so
the reader accepts either layout and both generations of statuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tabulate import tabulate  # type: ignore[import-untyped]

from shmref.docgen.datafiles import load_data

SNAPSHOT_NAME = "docs/seed-conformance.json"
# oracle check statuses, compared in lower case (the report's statuses are being re-cut:
# PASS/FAIL/ERROR/CRASH/TIMEOUT/not run; older reports say pass/fail/skip/assumption)
FAILED = {"fail", "failed", "error", "crash", "crashed", "timeout", "timed out"}
NOT_RUN = {"not run", "not_run", "notrun"}


class FindingsError(Exception):
    """Bad findings data, a missing marker or a bad oracle report: one clear message."""


def summarize_conformance(report: Mapping[str, Any]) -> dict[str, Any]:
    """The oracle's conformance.json -> {impl, levels: [{level, status, failing, assumptions}]}.

    Accepts `levels` as a mapping (level -> {status, checks}) or as a list of
    {level|name, status, checks}; `result` may stand for `status` and
    `properties` for `checks` (the report format is being re-cut); a check
    needs a `name` and a status."""
    levels = report.get("levels") if isinstance(report, Mapping) else None
    if isinstance(levels, Mapping):
        items = [
            {"level": name, **body} for name, body in levels.items() if isinstance(body, Mapping)
        ]
    elif isinstance(levels, list):
        items = [
            {"level": e.get("level", e.get("name")), **e} for e in levels if isinstance(e, Mapping)
        ]
    else:
        raise FindingsError(
            "oracle report has no 'levels' (expected the JSON written by "
            "python -m shmref.conformance)"
        )
    items = [{**item, "status": item.get("status", item.get("result"))} for item in items]
    if not items or any(not item.get("level") or item["status"] is None for item in items):
        raise FindingsError("oracle report: every level needs a name and a status")
    out = []
    for item in items:
        checks = item.get("checks", item.get("properties", []))
        if not isinstance(checks, list) or any(
            not isinstance(c, Mapping)
            or "name" not in c
            or c.get("status", c.get("result")) is None
            for c in checks
        ):
            raise FindingsError(f"oracle report: level {item['level']!r} has malformed checks")
        statuses = [(str(c["name"]), str(c.get("status", c.get("result"))).lower()) for c in checks]
        out.append(
            {
                "level": str(item["level"]),
                "status": str(item["status"]),
                "failing": sorted({name for name, status in statuses if status in FAILED}),
                "assumptions": sorted(
                    {name for name, status in statuses if status == "assumption"}
                ),
                "not_run": sorted({name for name, status in statuses if status in NOT_RUN}),
            }
        )
    return {"impl": str(report.get("impl", "?")), "levels": out}


def oracle_section(summary: Mapping[str, Any]) -> str:
    """The oracle's verdict on the seed: one row per level, then what fails."""
    rows = [
        [
            lv["level"],
            f"**{lv['status']}**",
            len(lv["failing"]),
            len(lv["assumptions"]),
            len(lv.get("not_run", [])),
        ]
        for lv in summary["levels"]
    ]
    out = [
        f"Generated from the oracle's report on `{summary['impl']}` "
        f"(snapshot `{SNAPSHOT_NAME}`; refresh it with `make conformance "
        "IMPL=seed` then `make findings "
        "CONFORMANCE=build/conformance/shmref_seed/conformance.json`).",
        "",
        tabulate(
            rows,
            ["level", "result", "failing properties", "assumptions", "not run"],
            tablefmt="github",
        ),
    ]
    for lv in summary["levels"]:
        for what, names in (
            ("fails", lv["failing"]),
            ("assumes", lv["assumptions"]),
            ("did not run", lv.get("not_run", [])),
        ):
            if names:
                out += ["", f"{lv['level']} {what}: " + ", ".join(f"`{n}`" for n in names) + "."]
    return "\n".join(out)


def load_summary(path: Path) -> dict[str, Any]:
    data = load_data(path, FindingsError, "oracle snapshot")
    if not isinstance(data, dict) or "levels" not in data:
        raise FindingsError(f"{path}: not an oracle report or snapshot (no 'levels')")
    first = data["levels"][0] if isinstance(data["levels"], list) and data["levels"] else None
    is_snapshot = isinstance(first, Mapping) and "failing" in first
    if not is_snapshot:
        return summarize_conformance(data)
    for level in data["levels"]:  # snapshots written before "not run" existed
        level.setdefault("not_run", [])
    return data
