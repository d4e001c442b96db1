"""docs/vllm-check.json: what `make vllm-check` measured, one entry per vLLM
release, each bound to refimpl's files by their SHA-256 (`refimpl/*.py`).
`python -m vllmcheck --check-record` (run by `make test`) fails naming the
release and the refimpl file that changed since its entry was made: the
record says nothing of code it did not run (as proofs/record.json for the
proofs)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from vllmcheck import DEFAULT_RELEASE, RECORD, REPO

SCHEMA = 1
ABOUT = (
    "make vllm-check (python -m vllmcheck) on each vLLM release from the registry: its own "
    "tests of shm_object_storage on the release and with refimpl in its place, the oracle on "
    "the release, mixed deployments, the seed-findings tests on the release; each entry holds "
    "for the refimpl files whose SHA-256 it lists"
)


def remake(release: str) -> str:
    """The command that makes a release's entry again."""
    return "make vllm-check" + ("" if release == DEFAULT_RELEASE else f" VLLM={release}")


def digests(root: Path = REPO) -> dict[str, str]:
    """Each refimpl module's SHA-256, by its path from `root`."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted((root / "refimpl").glob("*.py"))
    }


def load(record: Path = RECORD) -> dict[str, Any]:
    """The record (an empty one if there is no file yet)."""
    if not record.is_file():
        return {"schema": SCHEMA, "about": ABOUT, "releases": {}}
    data: dict[str, Any] = json.loads(record.read_text(encoding="utf-8"))
    return data


def store(release: str, entry: dict[str, Any], record: Path = RECORD) -> None:
    """The release's entry written (the others kept), newest release first."""
    data = load(record)
    releases = dict(data.get("releases", {}))
    releases[release] = entry
    ordered = dict(sorted(releases.items(), key=lambda item: version_key(item[0]), reverse=True))
    data = {"schema": SCHEMA, "about": ABOUT, "releases": ordered}
    record.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def version_key(release: str) -> tuple[int, ...]:
    """A release's order ("0.34.0" after "0.9.1"); a part that is no number counts 0."""
    return tuple(int(part) if part.isdigit() else 0 for part in release.split("."))


def problem(root: Path = REPO, record: Path = RECORD) -> str:
    """Why the record does not hold for refimpl's files under `root` ("": it does)."""
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"{record.name} cannot be read ({exc}): run `{remake(DEFAULT_RELEASE)}`"
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return f"{record.name} is of another schema: run `{remake(DEFAULT_RELEASE)}`"
    releases = data.get("releases") or {}
    if not releases:
        return f"{record.name} records no release: run `{remake(DEFAULT_RELEASE)}`"
    now = digests(root)
    for release, entry in releases.items():
        then = entry.get("refimpl_sha256", {})
        changed = sorted(
            name for name in now.keys() | then.keys() if now.get(name) != then.get(name)
        )
        if changed:
            return (
                f"{record.name} is stale for vLLM {release}: {', '.join(changed)} changed "
                f"since; run `{remake(release)}`"
            )
    return ""
