"""The child of the contract check (shmref.oracle.contractcheck):

    python -m shmref.oracle.checkchild MODULE [RUN.json]

enters the run's configuration RUN.json (shmref.core.runconfig: the
protocol's limits), imports MODULE (a program: starts it and reads its hello), creates a ring,
a storage and its handle, closes the ring, and says what happened as JSON
lines on stdout. Its parent gives it a session of its own and kills it
with all it started, whatever it does."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from shmref.oracle.verdict import ERROR


def say(message: dict[str, Any]) -> None:
    print(json.dumps(message), flush=True)


def check(module: str, run: str | None = None) -> int:
    """`--check MODULE`: import it here (a program: started, its hello
    read), then create a ring, a storage and its handle, close the ring
    (shmref.oracle.contractcheck); one JSON line when it is loaded, one at
    the end: its name, where it imports from, what it lacks, how the
    program failed, what it left in /dev/shm."""
    import faulthandler
    import gc

    from shmref import contract
    from shmref.core.runconfig import RunConfig, enter_run
    from shmref.oracle.descendants import hold
    from shmref.oracle.verdict import import_root
    from shmref.process import channel, segments
    from shmref.process.messages import ProgramFailure
    from shmref.seed.impl import load_impl
    from shmref.session import leaks

    hold()  # whatever this child starts is ended with it (shmref.oracle.descendants)
    if run is not None:
        enter_run(RunConfig.read(Path(run)))
    faulthandler.enable()  # a crash prints the Python stack (the CRASH's detail quotes it)
    leaks.start()  # segments made by the module's SharedMemory, or by the program
    try:
        impl = load_impl(module)
    except ProgramFailure as exc:  # a program that cannot start or sends no hello
        say({"problem": str(exc).splitlines()[0]})
        return 0
    except BaseException as exc:  # any import failure is the module's: one line
        problem = f"{module}: does not import: {type(exc).__name__}: {exc}".splitlines()[0]
        say({"problem": problem})
        return 0
    root = import_root(impl) or ""
    say({"loaded": impl.__name__, "root": root, "notes": channel.notes()})
    failure: dict[str, str] | None = None
    lacking: list[str] = []
    try:
        lacking = contract.missing(impl)
    except BaseException as exc:  # a call that raised: the module's error, named
        failure = {"status": ERROR, "detail": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    failed = channel.failures()
    if failed:  # the program broke the protocol, died or hung (each one line)
        failure = {"status": failed[0].status, "detail": str(failed[0]).splitlines()[0]}
    gc.collect()  # a ring dropped by the check is closed now (its finalizer)
    segments.settle_all()
    channel.close_all()
    # what the program left is said with its failure (shmref.process.channel)
    leaked = sorted(set(leaks.leaked()) | set(channel.removed() if failure is None else ()))
    for name in leaked:
        segments.unlink(name)
    problem = (
        f"{module}: lacks what the contract (shmref.contract) requires: " + ", ".join(lacking)
        if lacking and failure is None
        else ""
    )
    say(
        {
            "name": impl.__name__,
            "root": root,
            "problem": problem,
            "failure": failure,
            "leaked": leaked,
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(check(*sys.argv[1:3]))
