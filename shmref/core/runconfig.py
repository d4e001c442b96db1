"""The configuration of one conformance run, as its children see it.

The oracle (`python -m shmref.conformance`) writes one `RunConfig` per child
as a JSON file in the run's work folder and names it on the child's command
line (the worker's, the contract check's, or `pytest --shmref-run FILE`);
the child enters it once, and everything below reads it through ONE
function, `current_run()`: where failing checks leave their traces, where
calls are streamed for a crash, the process protocol's limits. Outside a
run `current_run()` is None and every reader keeps its default, so the
toolkit costs nothing in a user's own tests.

This replaces environment variables that carried the same things between
processes: a reader of the run's configuration is found by grepping for
`current_run`, not for strings. The only environment variables left are
those a user sets (docs/conformance.md, "Environment variables").
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from shmref.core.files import write_atomically

# The process protocol's limits (docs/protocol.md, "Limits"): their one home.
HELLO_TIMEOUT = 30.0  # seconds a program may take to send its hello
MAX_LINE = 16 << 20  # bytes of one line from a program, its newline excluded
MAX_STDERR = 1 << 20  # bytes of a program's stderr kept over its life


class RunConfigError(ValueError):
    """A configuration file that cannot be read: one line naming what was wrong."""


@dataclass(frozen=True)
class RunConfig:
    """What a conformance run tells each of its children.

    `trace_dir`: where a failing check leaves its trace (shmref.render.sink);
    None: nowhere. `calls_file`: where the recorded calls are streamed as
    they happen, so a crash still has its picture (None: not streamed).
    `trace_passed`: a passing test's calls are kept too (docs' pictures of
    the seed's tests). `hello_timeout`, `max_line`, `max_stderr`: the
    process protocol's limits (`--hello-timeout`, `--max-line`,
    `--max-stderr`). `request_timeout`: the seconds a request may take when
    the user set no $SHMREF_EXEC_TIMEOUT (None: 60). `protocol_log`: a file
    that gets every message of every program (the schema tests)."""

    trace_dir: str | None = None
    calls_file: str | None = None
    trace_passed: bool = False
    hello_timeout: float = HELLO_TIMEOUT
    max_line: int = MAX_LINE
    max_stderr: int = MAX_STDERR
    request_timeout: float | None = None
    protocol_log: str | None = None

    def __post_init__(self) -> None:
        for name in ("hello_timeout", "max_line", "max_stderr", "request_timeout"):
            value = getattr(self, name)
            if value is None and name == "request_timeout":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise RunConfigError(f"{name} must be a positive number, not {value!r}")
        if not isinstance(self.trace_passed, bool):
            raise RunConfigError(f"trace_passed must be true or false, not {self.trace_passed!r}")

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"

    def write(self, path: Path) -> Path:
        """`path` holds this configuration (JSON); returned for the child's command line."""
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, self.to_json())
        return path

    @classmethod
    def from_json(cls, data: Any) -> RunConfig:
        known = {f.name for f in fields(cls)}
        if not isinstance(data, dict):
            raise RunConfigError(f"a run configuration is a JSON object, not {type(data).__name__}")
        unknown = sorted(set(data) - known)
        if unknown:
            raise RunConfigError(f"unknown field(s) in a run configuration: {', '.join(unknown)}")
        try:
            return cls(**data)
        except TypeError as exc:  # a field of the wrong kind the dataclass refused
            raise RunConfigError(f"a run configuration that does not fit: {exc}") from None

    @classmethod
    def read(cls, path: Path) -> RunConfig:
        """The configuration in `path`; RunConfigError (one line) if it is not one."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise RunConfigError(f"{path}: cannot read the run configuration: {exc}") from None
        except ValueError as exc:
            raise RunConfigError(f"{path}: not JSON: {exc}") from None
        try:
            return cls.from_json(data)
        except RunConfigError as exc:
            raise RunConfigError(f"{path}: {exc}") from None

    def but(self, **changes: Any) -> RunConfig:
        """A copy with `changes` (a child's own files)."""
        return replace(self, **changes)


_CURRENT: RunConfig | None = None


def current_run() -> RunConfig | None:
    """The configuration of the conformance run this process belongs to, or
    None when it is not a child of the oracle (a user's own tests). The one
    way the toolkit learns what a run asks of it."""
    return _CURRENT


def limits() -> RunConfig:
    """The run's configuration, or the defaults outside a run (the limits of
    the process protocol hold everywhere)."""
    return _CURRENT if _CURRENT is not None else RunConfig()


def enter_run(config: RunConfig | None) -> None:
    """This process belongs to the run `config` from now on (None: to none).
    Called once by a child at its start (the worker, the contract check's
    child, the pytest plugin's `--shmref-run FILE`); a forked child inherits it."""
    global _CURRENT
    _CURRENT = config


@contextmanager
def running(config: RunConfig | None) -> Iterator[RunConfig | None]:
    """`config` entered for the duration of a block (tests), the previous one after."""
    before = _CURRENT
    enter_run(config)
    try:
        yield config
    finally:
        enter_run(before)
