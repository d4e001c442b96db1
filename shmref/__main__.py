"""`python -m shmref COMMAND [ARGS]` (installed: `shmref COMMAND`): every
command of shmref in one place, each run from the module that does the work,
so that no stub at the top of the package echoes a module's name.

`python -m shmref` alone lists the commands; `python -m shmref COMMAND --help`
shows one command's options. The oracle keeps its own documented spelling,
`python -m shmref.conformance` (the same as `python -m shmref conformance`)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from shmref.core.extras import require_oracle_extra

# command -> (the module whose `main(argv)` runs it, what it does in one line)
COMMANDS: dict[str, tuple[str, str]] = {
    "conformance": ("shmref.oracle.cli", "judge an implementation, level by level (the oracle)"),
    "check": ("shmref.tlc.check", "TLC on every model of the manifest (make check)"),
    "deep": (
        "shmref.tlc.deep",
        "the deep models on TLC's distributed mode or by simulation (make check-deep)",
    ),
    "findings": (
        "shmref.docgen.findings",
        "FINDINGS.md's generated sections from docs/findings.toml (--check: current?)",
    ),
    "fuzz": ("shmref.fuzzing.fuzz", "the bad-input fuzz of every public method (make fuzz)"),
    "itf": ("shmref.traces.itf_cli", "export, read, replay and validate ITF traces"),
    "vocabulary": (
        "shmref.docgen.vocabulary_doc",
        "the table of action names checked against the spec and the Driver, or DESIGN.md's",
    ),
    "render": ("shmref.render.html", "(re)write a report folder's conformance.html"),
}


def usage() -> str:
    """The commands, one line each: what `python -m shmref` alone prints."""
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {job}" for name, (_module, job) in COMMANDS.items()]
    return "\n".join(
        ["usage: python -m shmref COMMAND [ARGS]  (COMMAND --help: its options)", "", *lines]
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run COMMAND's `main` with the rest of the arguments; exit 2 with the
    list of commands when there is none or it is unknown."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    if not args:
        print(usage(), file=sys.stderr)
        return 2
    if args[0] not in COMMANDS:
        print(f"shmref: unknown command {args[0]!r}\n\n{usage()}", file=sys.stderr)
        return 2
    require_oracle_extra()  # every command needs it: one line, exit 2, when it is missing
    module, _job = COMMANDS[args[0]]
    run = importlib.import_module(module).main
    if argv is None and args[0] == "conformance":  # the process's own command (privateshm)
        return int(run(args[1:], own_process=True))
    code: int = run(args[1:])
    return code


if __name__ == "__main__":
    raise SystemExit(main())
