"""Which vLLM the summary of FINDINGS.md describes: the `vllm-project/vllm`
commits its vLLM columns were read at, what is known of the version the seed
is (the `[versions]` table of docs/findings.toml), and vLLM's releases as the
registry ships them (its `[[release_group]]` entries: releases whose
`shm_object_storage.py` files are byte-identical, each with the file's
SHA-256 and what changed from the group before). Shown above the table and in
its headers, so that no column compares with a "current" upstream that has
moved on since."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabulate import tabulate  # type: ignore[import-untyped]

from shmref.docgen.datafiles import load_data
from shmref.docgen.oracle_snapshot import FindingsError

COMMITS = ("code_path", "upstream")
KEYS = ("code_path", "code_path_note", "upstream", "upstream_note", "seed_note")
VARIANTS = ("unsigned", "signed")
GROUP_KEYS = ("releases", "sha256", "variant", "change")

_VERSION = r"\d+\.\d+\.\d+(?:\.post\d+)?"
_RANGE = re.compile(rf"({_VERSION})(?:-({_VERSION}))?")


def version_key(version: str) -> tuple[int, ...]:
    """'0.11.2' -> (0, 11, 2, 0); '0.6.1.post2' -> (0, 6, 1, 2): release order."""
    main, _, post = version.partition(".post")
    return (*(int(part) for part in main.split(".")), int(post or 0))


def parse_releases(text: str) -> list[tuple[str, str]]:
    """'0.11.0-0.31.0, 0.34.0' -> [('0.11.0', '0.31.0'), ('0.34.0', '0.34.0')];
    'none' -> []. ValueError naming what is wrong (ranges must ascend and not overlap)."""
    if text.strip() == "none":
        return []
    ranges: list[tuple[str, str]] = []
    for part in text.split(","):
        match = _RANGE.fullmatch(part.strip())
        if match is None:
            raise ValueError(f"{part.strip()!r} is not a version or a range FIRST-LAST")
        first, last = match.group(1), match.group(2) or match.group(1)
        if version_key(last) < version_key(first):
            raise ValueError(f"range {part.strip()!r} runs backwards")
        if ranges and version_key(first) <= version_key(ranges[-1][1]):
            raise ValueError(f"range {part.strip()!r} overlaps or precedes the one before")
        ranges.append((first, last))
    return ranges


def show_range(first: str, last: str) -> str:
    return first if first == last else f"{first}-{last}"


@dataclass(frozen=True)
class ReleaseGroup:
    """Consecutive vLLM releases that ship the same shm_object_storage.py."""

    first: str
    last: str
    sha256: str  # of the module file, as extracted from each release's wheel
    variant: str  # "unsigned" (get(address, monotonic_id)) or "signed" (HMAC handles)
    change: str  # what differs from the group before (the first group: what it is)

    @property
    def releases(self) -> str:
        return show_range(self.first, self.last)


@dataclass(frozen=True)
class Versions:
    code_path: str  # the commit of the callers' files the "vLLM code path" column names
    code_path_note: str
    upstream: str  # the commit of shm_object_storage.py the "vLLM upstream" column compares with
    upstream_note: str
    seed_note: str  # what is known of the upstream version the seed is
    groups: tuple[ReleaseGroup, ...] = ()  # the releases, oldest first

    def variant_range(self, variant: str) -> str:
        """The releases that ship `variant`, as FIRST-LAST ('none' if no group does)."""
        chosen = [g for g in self.groups if g.variant == variant]
        return show_range(chosen[0].first, chosen[-1].last) if chosen else "none"


def _group(raw: Any, index: int, path: Path) -> ReleaseGroup:
    where = f"{path}: [[release_group]] #{index + 1}"
    if not isinstance(raw, dict):
        raise FindingsError(f"{where}: expected a table, got {type(raw).__name__}")
    missing = [k for k in GROUP_KEYS if k not in raw]
    unknown = sorted(set(raw) - set(GROUP_KEYS))
    if missing or unknown:
        raise FindingsError(f"{where}: missing {missing or 'nothing'}, unknown {unknown or 'none'}")
    for key in GROUP_KEYS:
        if not isinstance(raw[key], str) or not raw[key].strip():
            raise FindingsError(f"{where}: {key} must be a non-empty string")
    try:
        ranges = parse_releases(raw["releases"])
    except ValueError as exc:
        raise FindingsError(f"{where}: releases: {exc}") from exc
    if len(ranges) != 1:
        raise FindingsError(f"{where}: releases must be one version or one range FIRST-LAST")
    if not re.fullmatch(r"[0-9a-f]{64}", raw["sha256"]):
        raise FindingsError(f"{where}: sha256 must be 64 lowercase hex digits")
    if raw["variant"] not in VARIANTS:
        raise FindingsError(f"{where}: variant {raw['variant']!r} is not one of {list(VARIANTS)}")
    first, last = ranges[0]
    return ReleaseGroup(first, last, raw["sha256"], raw["variant"], raw["change"])


def load_release_groups(path: Path, data: Any = None) -> tuple[ReleaseGroup, ...]:
    """The `[[release_group]]` entries of `path`, oldest first (none: an empty tuple);
    FindingsError if one is malformed, if they overlap, or if two neighbours ship the
    same file (they would be one group)."""
    raw = (load_data(path, FindingsError, "findings data") if data is None else data).get(
        "release_group", []
    )
    if not isinstance(raw, list):
        raise FindingsError(f"{path}: release_group must be an array of tables [[release_group]]")
    groups = tuple(_group(item, i, path) for i, item in enumerate(raw))
    for before, after in itertools.pairwise(groups):
        if version_key(after.first) <= version_key(before.last):
            raise FindingsError(
                f"{path}: release group {after.releases} does not follow {before.releases}"
            )
        if after.sha256 == before.sha256:
            raise FindingsError(
                f"{path}: release groups {before.releases} and {after.releases} ship the "
                "same file: make them one group"
            )
    return groups


def load_versions(path: Path) -> Versions:
    """The `[versions]` table and the release groups of `path`; FindingsError naming
    what is wrong."""
    data = load_data(path, FindingsError, "findings data")
    raw = data.get("versions")
    if not isinstance(raw, dict):
        raise FindingsError(f"{path}: no [versions] table (the vLLM commits the columns describe)")
    missing = [k for k in KEYS if k not in raw]
    unknown = sorted(set(raw) - set(KEYS))
    if missing or unknown:
        raise FindingsError(
            f"{path}: [versions]: missing {missing or 'nothing'}, unknown {unknown or 'none'}"
        )
    for key in KEYS:
        value = raw[key]
        if not isinstance(value, str) or not value.strip():
            raise FindingsError(f"{path}: [versions] {key} must be a non-empty string")
        if key in COMMITS and not re.fullmatch(r"[0-9a-f]{40}", value):
            raise FindingsError(
                f"{path}: [versions] {key} must be a full vllm-project/vllm commit "
                f"(40 hex digits), not {value!r}"
            )
    groups = load_release_groups(path, data)
    if not groups:
        raise FindingsError(
            f"{path}: no [[release_group]] entries (vLLM's releases, the upstream reference)"
        )
    return Versions(**raw, groups=groups)


def header(column: str, commit: str, which: str = "") -> str:
    """A column's header with the commit it describes (of `which` file, if the
    column reads several: the others are in the lines above the table)."""
    if which:
        return f"{column} ({which} at `{commit[:7]}`, others above)"
    return f"{column} at `{commit[:7]}`"


def releases_table(groups: tuple[ReleaseGroup, ...]) -> str:
    """The release groups: releases, the module file's SHA-256 (short), variant, change."""
    rows = [[f"{g.releases}", f"`{g.sha256[:12]}`", g.variant, g.change] for g in groups]
    headers = ["vLLM releases", "module sha256", "variant", "what changed"]
    return str(tabulate(rows, headers, tablefmt="github"))


def notes(versions: Versions) -> str:
    """The lines above the summary table: the releases, each vLLM column's commit,
    the seed's version."""
    unsigned, signed = versions.variant_range("unsigned"), versions.variant_range("signed")
    lines = [
        "The vLLM columns describe these versions of `vllm-project/vllm`:",
        "",
        f"- **vLLM code path** at `{versions.code_path}`: {versions.code_path_note}",
        f"- **vLLM upstream** at `{versions.upstream}`: {versions.upstream_note}",
        f"- **The seed**: {versions.seed_note}",
    ]
    if versions.groups:
        lines += [
            f"- **vLLM releases**: {unsigned} ship the unsigned variant, {signed} the "
            "signed one. Each group below ships one `shm_object_storage.py`, byte for "
            "byte (its SHA-256, as extracted from the release's wheel):",
            "",
            releases_table(versions.groups),
        ]
    return "\n".join(lines)


# an incident: "#N: what it was, in our words" (vLLM's issue or PR number; no links, no hosts)
INCIDENT = re.compile(r"#\d+: \S.*")
HOST = re.compile(r"://|\bwww\.|\b[\w-]+\.(?:com|org|io|net|dev|ai|app)\b", re.I)


def check_incidents(incidents: Any, given: bool) -> None:
    """A finding's `incidents`: a non-empty list of "#N: what it was" naming no host."""
    if given and (not isinstance(incidents, list) or not incidents):
        raise ValueError("incidents must be a non-empty list of '#N: what it was'")
    for incident in incidents:
        if not isinstance(incident, str) or not INCIDENT.fullmatch(incident):
            raise ValueError(f"incident {incident!r} is not '#N: what it was, in our words'")
        if HOST.search(incident):
            raise ValueError(f"incident {incident!r} names a host or a link")


def check_releases(findings: Sequence[Any], path: Path) -> None:
    """Each finding's releases against the release groups: every range starts and
    ends on a group's boundary (a group ships one file, so it has a finding whole
    or not at all), and a finding "still present" in the unsigned upstream lists
    an unsigned release."""
    groups = load_release_groups(path)
    if not groups:
        return
    firsts = {g.first: g for g in groups}
    lasts = {g.last: g for g in groups}
    bounds = f"group boundaries: {', '.join(g.releases for g in groups)}"
    for f in findings:
        ranges = parse_releases(f.releases)
        for first, last in ranges:
            if first not in firsts or last not in lasts:
                raise ValueError(
                    f"finding {f.id!r}: releases {show_range(first, last)!r} do not start "
                    f"and end on release groups ({bounds})"
                )
        unsigned = [g for g in groups if g.variant == "unsigned"]
        has_unsigned = any(
            version_key(first) <= version_key(g.first) and version_key(g.last) <= version_key(last)
            for g in unsigned
            for first, last in ranges
        )
        if f.upstream == "still present" and unsigned and not has_unsigned:
            raise ValueError(
                f"finding {f.id!r}: upstream 'still present' but releases {f.releases!r} "
                "list no release of the unsigned variant"
            )


def incidents_section(findings: Sequence[Any]) -> str:
    """The lines under the table: upstream incidents that match a finding."""
    lines = [f"- **{f.id}**: {incident}" for f in findings for incident in f.incidents]
    if not lines:
        return ""
    head = (
        "Upstream incidents that match a finding (vLLM's issue and pull-request "
        "numbers, each checked against its stored thread; described in our words):"
    )
    return "\n\n" + head + "\n\n" + "\n".join(lines)


def release_headers(versions: Versions) -> tuple[str, str]:
    """The summary table's headers of the upstream and releases columns."""
    unsigned = versions.variant_range("unsigned")
    groups = versions.groups
    every = show_range(groups[0].first, groups[-1].last) if groups else "?"
    return (
        f"vLLM upstream, unsigned ({unsigned}; `{versions.upstream[:7]}`)",
        f"vLLM releases with it (of {every})",
    )
