"""Build native_store's C core (and its mutants) in place, with cffi's API mode.

    python examples/native_store/build.py [--mutants] [--force]

Each variant is ns_ring.c compiled by the system's C compiler into
examples/native_store/build/ (ignored by git) as `_ns_<variant>`: `core` is
the store, every other variant is the same source with one `-DNS_MUT_*`
defect (MUTANTS). Nothing is downloaded. Up-to-date variants are not rebuilt.
A missing compiler, missing Python headers or a compiler error is one line
on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import re
import shutil
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve().parent
BUILD_DIR = HERE / "build"
SOURCES = (HERE / "ns_ring.c", HERE / "ns_sign.c", HERE / "ns_ring.h", Path(__file__).resolve())
CFLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-fno-strict-aliasing"]

# variant -> (compile-time flag, the defect it plants)
MUTANTS: dict[str, tuple[str, str]] = {
    "free_after_one_read": (
        "NS_MUT_FREE_AFTER_ONE_READ",
        "the free rule ignores n_readers: a chunk is free after one read per hand-out",
    ),
    "racy_count": (
        "NS_MUT_RACY_COUNT",
        "the read count is a plain load + store, and the glue counts without the "
        "reader lock (a lock-free read that forgot its atomic add)",
    ),
    "lap_off_by_one": (
        "NS_MUT_LAP_OFF_BY_ONE",
        "a chunk that exactly fills the rest of the lap is pushed to the next lap",
    ),
    "stale_accepted": (
        "NS_MUT_STALE_ACCEPTED",
        "the chunk's id is not checked against the handle's: a stale handle reads",
    ),
    "failed_copy_uncounted": (
        "NS_MUT_FAILED_COPY_UNCOUNTED",
        "a read whose copy failed is not counted: the chunk is pinned for good",
    ),
    "unchecked_address": (
        "NS_MUT_UNCHECKED_ADDRESS",
        "an address is used without modulo or bound: a bad one reads outside the mapping",
    ),
}
VARIANTS = ("core", *MUTANTS)


class BuildError(Exception):
    """One line saying what went wrong and what to do."""


def module_name(variant: str) -> str:
    return f"_ns_{variant}"


def built_path(variant: str) -> Path | None:
    found = sorted(BUILD_DIR.glob(module_name(variant) + ".*.so"))
    return found[0] if found else None


def up_to_date(variant: str) -> bool:
    path = built_path(variant)
    if path is None:
        return False
    return path.stat().st_mtime >= max(s.stat().st_mtime for s in SOURCES)


def check_toolchain() -> None:
    compiler = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    program = compiler.split()[0]
    if shutil.which(program) is None:
        raise BuildError(
            f"native_store: no C compiler ({program!r} not found): install one, "
            "e.g. `apt-get install gcc`"
        )
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        raise BuildError(
            f"native_store: Python's C headers are missing ({include}/Python.h): "
            "install them, e.g. `apt-get install python3-dev`"
        )
    try:
        import cffi  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        raise BuildError("native_store: cffi is missing: `pip install cffi`") from None


def first_error(text: str) -> str:
    """The compiler's first `error:` line (else the last non-empty line)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if re.search(r"\berror\b", line):
            return line
    return lines[-1] if lines else "unknown error"


def build(variant: str, force: bool = False) -> Path:
    """Compile one variant (if stale) and return the extension's path."""
    with _one_build_at_a_time():
        return _build(variant, force)


def _build(variant: str, force: bool) -> Path:
    if not force and up_to_date(variant):
        path = built_path(variant)
        assert path is not None
        return path
    check_toolchain()
    import cffi

    defines = [] if variant == "core" else [(MUTANTS[variant][0], "1")]
    ffibuilder = cffi.FFI()
    ffibuilder.cdef((HERE / "ns_ring.h").read_text())
    ffibuilder.cdef("static const int NS_READS_LOCKED;")  # per variant (ns_ring.c)
    ffibuilder.set_source(
        module_name(variant),
        '#include "ns_ring.c"\n#include "ns_sign.c"',
        include_dirs=[str(HERE)],
        define_macros=defines,
        extra_compile_args=CFLAGS,
    )
    BUILD_DIR.mkdir(exist_ok=True)
    with tempfile.TemporaryFile("w+") as log:
        try:
            with _fds_to(log):  # the compiler writes to fds 1 and 2: keep it for one line
                path = ffibuilder.compile(tmpdir=str(BUILD_DIR), verbose=False)
        except Exception as exc:  # cffi.VerificationError, distutils' CompileError
            log.seek(0)
            raise BuildError(
                f"native_store: building {variant} failed: {first_error(log.read() + str(exc))}"
            ) from None
    return Path(path)


@contextlib.contextmanager
def _fds_to(log: IO[str]) -> Iterator[None]:
    """Point file descriptors 1 and 2 at `log` (child processes write there)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


@contextlib.contextmanager
def _one_build_at_a_time() -> Iterator[None]:
    """Builds started together (two test workers, a make target beside them)
    take turns: cffi writes a variant's files under fixed names in build/ (a
    test imported a half-written extension once), and the second finds the
    first's extension up to date instead of compiling it again."""
    BUILD_DIR.mkdir(exist_ok=True)
    with open(BUILD_DIR / ".lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", action="store_true", help="also build every mutant")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = parser.parse_args(argv)
    try:
        for variant in VARIANTS if args.mutants else ("core",):
            path = build(variant, args.force)
            print(f"native_store: {variant}: {path.relative_to(HERE)}")
    except BuildError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
