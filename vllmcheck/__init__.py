"""`make vllm-check`: refimpl's drop-in claim checked against vLLM's real releases.

A release from the package registry goes into `build/vllm/<VER>/` (a venv with
its wheel and requirements, and the tests of its sdist); nothing of vLLM is
ever committed. There the driver runs the release's own tests of the module
twice (on the release, then with refimpl in its place), the oracle on the
release's module, mixed deployments of the two, and the seed-findings tests
with the release's module as the seed; it writes what it measured to
`docs/vllm-check.json` (with the SHA-256 of refimpl's files, which
`python -m vllmcheck --check-record` holds against the current ones) and
README.md's drop-in paragraph from that record.

    python -m vllmcheck [--vllm 0.34.0]     # everything, then the record
    python -m vllmcheck --write-docs        # README.md's block from the record
    python -m vllmcheck --check-record      # the record is of refimpl's files
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODULE = "vllm.distributed.device_communicators.shm_object_storage"
MODULE_FILE = MODULE.replace(".", "/") + ".py"
DEFAULT_RELEASE = "0.34.0"
BUILD = REPO / "build" / "vllm"
RECORD = REPO / "docs" / "vllm-check.json"
README = REPO / "README.md"
# every run in the release's venv: vLLM on the CPU, no model hub
RUN_ENV = {"VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1"}


class CheckError(Exception):
    """Bad input or a missing piece: one line for the user, exit 2."""


def release_dir(release: str, build: Path = BUILD) -> Path:
    """Where everything of one release lives (gitignored)."""
    return build / release
