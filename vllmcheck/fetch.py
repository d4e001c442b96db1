"""A vLLM release from the package registry: its files listed by the index
(the one pip is configured with, else the public one), the wheel fetched by
`pip download --no-deps`, the sdist by its URL on the index page, and what
the driver reads in them (the module's presence, the requirements, the
tests). Each step is skipped when its result is already on disk."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

from vllmcheck import MODULE_FILE, CheckError

DEFAULT_INDEX = "https://pypi.org/simple"
PROJECT = "vllm"
# Requires-Dist names the registry does not serve (a CUDA kernel package): left out
NOT_SERVED = frozenset({"flashinfer-python"})
# what the release's tests import beyond the wheel's requirements
TEST_REQUIREMENTS = ("pytest", "pytest-asyncio", "tblib", "msgpack", "hypothesis")
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"


def configured_index(python: str = sys.executable) -> str:
    """pip's configured `index-url` (any scope), else the public index."""
    try:
        listed = subprocess.run(
            [python, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        listed = ""
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        if key.endswith(".index-url") and not key.endswith("extra-index-url"):
            return value.strip().strip("'\"").split()[0].rstrip("/")
    return DEFAULT_INDEX


def project_page(index: str) -> str:
    """The index's page of the project (a local folder index: its index.html)."""
    page = f"{index.rstrip('/')}/{PROJECT}/"
    return page + "index.html" if page.startswith("file:") else page


def release_files(release: str, index: str) -> dict[str, tuple[str, str]]:
    """The release's files on the index: file name -> (URL, sha256 or "").
    CheckError, one line: the index unreachable, or no file of the release."""
    page = project_page(index)
    request = urllib.request.Request(page, headers={"Accept": f"{SIMPLE_JSON}, text/html;q=0.1"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            kind = answer.headers.get("Content-Type", "") or ""
            body = answer.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CheckError(f"no registry reachable: {page} ({reason})") from exc
    files = _from_json(body, page) if SIMPLE_JSON in kind else _from_html(body, page)
    prefix = (f"{PROJECT}-{release}-", f"{PROJECT}-{release}.tar.gz")
    mine = {name: where for name, where in files.items() if name.startswith(prefix)}
    if not mine:
        raise CheckError(f"vLLM {release} is not in the registry ({page} lists no file of it)")
    return mine


def _from_json(body: str, page: str) -> dict[str, tuple[str, str]]:
    try:
        listed = json.loads(body)["files"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckError(f"{page}: not a simple index page ({exc})") from exc
    return {
        str(f["filename"]): (
            urllib.parse.urljoin(page, str(f["url"])),
            str(f.get("hashes", {}).get("sha256", "")),
        )
        for f in listed
        if isinstance(f, dict) and "filename" in f and "url" in f
    }


def _from_html(body: str, page: str) -> dict[str, tuple[str, str]]:
    files = {}
    for href in re.findall(r'href="([^"]+)"', body):
        url, _, fragment = href.partition("#")
        name = urllib.parse.unquote(url.rsplit("/", 1)[-1])
        digest = fragment[len("sha256=") :] if fragment.startswith("sha256=") else ""
        files[name] = (urllib.parse.urljoin(page, url), digest)
    return files


def local_files(folder: Path, release: str) -> tuple[Path | None, Path | None]:
    """The release's wheel and sdist already in `folder` (None: not there)."""
    wheels = sorted(folder.glob(f"{PROJECT}-{release}-*x86_64.whl"))
    sdist = folder / f"{PROJECT}-{release}.tar.gz"
    return (wheels[0] if wheels else None), (sdist if sdist.is_file() else None)


def fetch(release: str, folder: Path, index: str) -> tuple[Path, Path]:
    """The release's wheel and sdist in `folder`, fetched when missing."""
    wheel, sdist = local_files(folder, release)
    if wheel is not None and sdist is not None:
        return wheel, sdist
    files = release_files(release, index)
    folder.mkdir(parents=True, exist_ok=True)
    if wheel is None:
        wheel = _pip_download(release, folder, index)
    require_module(wheel, release)  # before the sdist: a release without the module stops here
    if sdist is None:
        name = f"{PROJECT}-{release}.tar.gz"
        if name not in files:
            raise CheckError(f"vLLM {release} has no sdist on the registry (its tests are in it)")
        sdist = _download(*files[name], folder / name)
    return wheel, sdist


def _pip_download(release: str, folder: Path, index: str) -> Path:
    print(f"vllmcheck: pip download --no-deps {PROJECT}=={release}", flush=True)
    index_args = [] if index == DEFAULT_INDEX else ["--index-url", index]
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", *index_args]
        + ["--only-binary", ":all:", f"{PROJECT}=={release}", "-d", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    wheel, _ = local_files(folder, release)
    if done.returncode != 0 or wheel is None:
        last = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise CheckError(f"vLLM {release}: no wheel for this machine from the registry ({last})")
    return wheel


def _download(url: str, sha256: str, target: Path) -> Path:
    print(f"vllmcheck: fetching {target.name}", flush=True)
    part = target.with_name(target.name + ".part")
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=120) as answer, part.open("wb") as out:
            while chunk := answer.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
    except (urllib.error.URLError, OSError) as exc:
        part.unlink(missing_ok=True)
        raise CheckError(f"{target.name} could not be fetched ({exc})") from exc
    if sha256 and digest.hexdigest() != sha256:
        part.unlink(missing_ok=True)
        raise CheckError(f"{target.name}: SHA-256 {digest.hexdigest()} is not the index's {sha256}")
    part.replace(target)
    return target


def require_module(wheel: Path, release: str) -> None:
    """CheckError unless the wheel ships shm_object_storage."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = set(archive.namelist())
    except (OSError, zipfile.BadZipFile) as exc:
        raise CheckError(f"{wheel}: not a wheel ({exc})") from exc
    if MODULE_FILE not in names:
        raise CheckError(f"vLLM {release} has no shm_object_storage")


def requirements(wheel: Path) -> tuple[list[str], list[str]]:
    """The wheel's Requires-Dist lines without extras, and those left out
    (`NOT_SERVED`)."""
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(metadata).decode("utf-8")
    wanted: list[str] = []
    left_out: list[str] = []
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        requirement = line.split(":", 1)[1].strip()
        if re.search(r"\bextra\s*==", requirement):
            continue
        name = re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        (left_out if name in NOT_SERVED else wanted).append(requirement)
    return wanted, left_out


def unpack_tests(sdist: Path, folder: Path, release: str) -> Path:
    """The sdist's tests/ and pyproject.toml (its pytest settings) under
    `folder`/vllm-<release>/; the tree's root, where pytest runs."""
    root = folder / f"{PROJECT}-{release}"
    stamp = root / ".unpacked"
    if stamp.is_file():
        return root
    top = f"{PROJECT}-{release}/"
    try:
        with tarfile.open(sdist) as archive:
            members = [
                m
                for m in archive.getmembers()
                if m.name.startswith(top + "tests/") or m.name == top + "pyproject.toml"
            ]
            archive.extractall(folder, members=members, filter="data")
    except (OSError, tarfile.TarError) as exc:
        raise CheckError(f"{sdist}: cannot unpack its tests ({exc})") from exc
    stamp.write_text("tests/ and pyproject.toml of the sdist\n")
    return root
