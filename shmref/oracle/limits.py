"""The process protocol's limits as options of `python -m shmref.conformance`
(docs/protocol.md, "Limits"), carried to every child of the run by its
configuration (shmref.core.runconfig), never by the environment."""

from __future__ import annotations

import argparse

from shmref.core.runconfig import HELLO_TIMEOUT, MAX_LINE, MAX_STDERR, RunConfig


def positive_seconds(text: str) -> float:
    """argparse type: a number of seconds above 0 (--timeout, --call-timeout too)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def positive_bytes(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of bytes above 0")
    return int(text)


def add_options(parser: argparse.ArgumentParser) -> None:
    """--hello-timeout, --max-line, --max-stderr: what a store program (exec:PROGRAM) may take."""
    group = parser.add_argument_group(
        "limits of a store program (exec:PROGRAM; docs/protocol.md, Limits)"
    )
    group.add_argument(
        "--hello-timeout",
        type=positive_seconds,
        default=HELLO_TIMEOUT,
        metavar="SECONDS",
        help=f"seconds a program may take to send its hello (default {HELLO_TIMEOUT:g})",
    )
    group.add_argument(
        "--max-line",
        type=positive_bytes,
        default=MAX_LINE,
        metavar="BYTES",
        help=f"bytes one line of a program's stdout may have (default {MAX_LINE})",
    )
    group.add_argument(
        "--max-stderr",
        type=positive_bytes,
        default=MAX_STDERR,
        metavar="BYTES",
        help=f"bytes of a program's stderr kept over its life; past it, ERROR "
        f"(default {MAX_STDERR})",
    )


def run_config(args: argparse.Namespace) -> RunConfig:
    """The run's configuration from its options (each child adds its own files)."""
    return RunConfig(
        hello_timeout=args.hello_timeout, max_line=args.max_line, max_stderr=args.max_stderr
    )
