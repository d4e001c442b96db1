"""The child of the contract check (shmref.oracle.contractcheck):

    python -m shmref.oracle.checkchild MODULE [RUN.json]

enters the run's configuration RUN.json (shmref.core.runconfig: the
protocol's limits), imports MODULE (a program: starts it and reads its hello), creates a ring,
a storage and its handle, closes the ring, and says what happened as events
on stdout (shmref.oracle.events: `Loaded` or `NotLoaded`, then
`ContractEnded`), one JSON line each. Its parent gives it a session of its own and kills it
with all it started, whatever it does."""

from __future__ import annotations

import sys
from pathlib import Path

from shmref.core.levels import ERROR
from shmref.oracle.events import ContractEnded, Event, Loaded, NotLoaded, encode


def emit(event: Event) -> None:
    """The child's one writer: an event on stdout, flushed at once."""
    print(encode(event), flush=True)


def check(module: str, run: str | None = None) -> int:
    """`--check MODULE`: import it here (a program: started, its hello
    read), then create a ring, a storage and its handle, close the ring
    (shmref.oracle.contractcheck); an event when it is loaded (its name,
    where it imports from) or is not, one at the end: what it lacks, how
    a call or the program failed, what it left in /dev/shm."""
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
        emit(NotLoaded(str(exc).splitlines()[0]))
        return 0
    except BaseException as exc:  # any import failure is the module's: one line
        problem = f"{module}: does not import: {type(exc).__name__}: {exc}".splitlines()[0]
        emit(NotLoaded(problem))
        return 0
    emit(Loaded(impl.__name__, import_root(impl) or "", tuple(channel.notes())))
    failure: tuple[str, str] | None = None  # (status, detail)
    lacking: list[str] = []
    try:
        lacking = contract.missing(impl)
    except BaseException as exc:  # a call that raised: the module's error, named
        failure = (ERROR, f"{type(exc).__name__}: {exc}".splitlines()[0])
    failed = channel.failures()
    if failed:  # the program broke the protocol, died or hung (each one line)
        failure = (failed[0].status, str(failed[0]).splitlines()[0])
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
    status, detail = failure or ("", "")
    emit(ContractEnded(problem, status, detail, tuple(leaked)))
    return 0


if __name__ == "__main__":
    sys.exit(check(*sys.argv[1:3]))
