"""What appeared in /dev/shm during a request (shmref.process.shmwatch): the
kernel's events and the folder's listings say the same, an entry made
before the window or gone by its end is not in it, and a window whose
events were lost says nothing rather than something wrong."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from shmref.process import shmwatch
from shmref.process.segments import SHM

RUN = f"shmref_watch_{uuid.uuid4().hex[:8]}_"  # this process's entries: other runs make theirs


def make(tag: str) -> str:
    name = f"{RUN}{tag}_{uuid.uuid4().hex[:8]}"
    os.close(os.open(f"{SHM}/{name}", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600))
    return name


def ours(names: frozenset[str]) -> set[str]:
    return {n for n in names if n.startswith(RUN)}


@pytest.fixture()
def made() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        try:
            os.unlink(f"{SHM}/{name}")
        except FileNotFoundError:
            pass


def listing_watch() -> shmwatch.Watch:
    """A watch without inotify, as on a kernel that has none."""
    watch = shmwatch.Watch()
    if watch.fd is not None:
        os.close(watch.fd)
        watch.fd = None
    return watch


@pytest.mark.parametrize("kind", ["inotify", "listing"])
def test_a_window_holds_what_was_made_in_it_and_is_still_there(kind: str, made: list[str]) -> None:
    watch = shmwatch.Watch() if kind == "inotify" else listing_watch()
    if kind == "inotify" and watch.fd is None:
        pytest.skip("no inotify here: every window lists the folder")
    made.append(make("before"))
    window = watch.open()
    made.extend([make("during"), make("gone")])
    os.unlink(f"{SHM}/{made[2]}")
    inner = watch.open()  # a request nested in the first one (a finalizer's close)
    made.append(make("nested"))
    assert ours(inner.created()) == {made[3]}
    assert ours(window.created()) == {made[1], made[3]}
    assert ours(watch.open().created()) == set()  # nothing since


def test_a_window_whose_events_were_lost_tells_nothing(made: list[str]) -> None:
    watch = shmwatch.Watch()
    if watch.fd is None:
        pytest.skip("no inotify here")
    window = watch.open()
    made.append(make("lost"))
    watch.lose()  # as when the kernel's queue overflows
    assert window.created() == frozenset()
    after = watch.open()
    made.append(make("after"))
    assert ours(after.created()) == {made[1]}  # the watch goes on


def test_the_log_keeps_only_what_an_open_window_may_ask_for(made: list[str]) -> None:
    watch = shmwatch.Watch()
    if watch.fd is None:
        pytest.skip("no inotify here")
    for i in range(5):
        window = watch.open()
        made.append(make(str(i)))
        assert ours(window.created()) == {made[-1]}
    assert watch.log == []  # what other runs made meanwhile is forgotten too


def test_a_process_that_moves_onto_another_dev_shm_watches_that_one(made: list[str]) -> None:
    """The oracle's command moves onto a /dev/shm of its own (shmref.oracle.
    privateshm): a watch made before then watches a folder the process no
    longer sees. Told by the device: the next window comes from a new watch,
    and one left open on the old watch tells nothing (the sweeps find it).
    The device is looked at once the process says it moved (`moved`, as
    privateshm does), not at every request; the broken input: a watch
    whose device changed while no move was said is kept (it is not
    looked at)."""
    old = shmwatch.watch()
    if old.fd is None:
        pytest.skip("no inotify here")
    window = old.open()
    old.device = -1  # as if /dev/shm had been another tmpfs when it was made
    try:
        assert shmwatch.watch() is old  # no move said: no system call to find one
        shmwatch.moved()
        new = shmwatch.watch()
        assert new is not old and new.device == os.stat(SHM).st_dev
        assert old.fd is None  # stopped
        after = shmwatch.window()
        made.append(make("moved"))
        assert window.created() == frozenset()
        assert ours(after.created()) == {made[0]}
    finally:
        old.device = None
