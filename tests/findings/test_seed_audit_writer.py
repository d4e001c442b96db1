"""Audit of the writer's touch / release_touches / get_cached, as vLLM's sender calls them.

vLLM's sender (`vllm/multimodal/cache/shm.py`, `ShmObjectStoreSenderCache`,
driven by the processor's cache merge step) handles a request in three
stages: it asks `is_cached` for each of the request's items, later touches
every item (to keep the cached ones from being evicted while the request
is updated), then for each item calls `is_cached` again and `get_cached` on
a hit or `put` on a miss (a `put` refused with ValueError or MemoryError
sends the item inline). The workers read a request's hand-outs only after
the whole request was sent. The search below runs several requests with
their stages interleaved in every order Hypothesis picks, the readers
reading the hand-outs of finished requests in between, and
`release_touches` at any point; it checks the writer's touch contract as the
sender relies on it: an item a request touched while it was cached is still
cached when that request looks it up, unless `release_touches` ran since.
A second search tries keys beyond what the writer's key lookups take.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pytest
from audit_support import Audits, check_refimpl, check_seed, seed, writer_and_reader
from hypothesis import strategies as st

__all__ = ["seed"]  # the fixture, used by name

KEYS = ("k0", "k1", "k2")


def value_of(key: str) -> str:
    return key * 10  # 20 characters, a 34-byte chunk: two fill the 72-byte ring


@dataclass
class Request:
    """One request in the sender: its items and how far it got."""

    items: list[str]
    stage: str = "check"  # check -> touch -> update -> done
    position: int = 0
    seen_cached: dict[str, bool] = field(default_factory=dict)
    protected: set[str] = field(default_factory=set)  # touched while cached, not looked up
    handouts: list[tuple[str, int, int, list[int]]] = field(default_factory=list)


class Sender:
    """Runs requests against a writer and a reader, one step at a time."""

    def __init__(self, writer: Any, reader: Any, requests: list[list[str]]) -> None:
        self.writer, self.reader = writer, reader
        self.requests = [Request(list(items)) for items in requests]
        self.readable: list[tuple[str, int, int, list[int]]] = []
        address, monotonic_id = writer.put(KEYS[0], value_of(KEYS[0]))  # an earlier request,
        reader.get(address, monotonic_id, writer.get_signature(KEYS[0]), KEYS[0])  # read

    def step(self, choice: int) -> str | None:
        if choice < len(self.requests):
            return self.advance(self.requests[choice])
        if choice == len(self.requests):
            return self.read_all()
        self.writer.release_touches()
        for request in self.requests:
            request.protected.clear()
        return None

    def advance(self, request: Request) -> str | None:
        writer = self.writer
        if request.stage == "check":
            request.seen_cached = {k: writer.is_cached(k) for k in request.items}
            request.stage = "touch"
        elif request.stage == "touch":
            for key in request.items:
                writer.touch(key)
                if writer.is_cached(key):
                    request.protected.add(key)
            request.stage = "update"
        elif request.stage == "update":
            key = request.items[request.position]
            if writer.is_cached(key):
                address, monotonic_id = writer.get_cached(key)
            elif key in request.protected:
                return "22"  # touched while cached, evicted before this request's lookup
            else:
                try:
                    address, monotonic_id = writer.put(key, value_of(key))
                except (ValueError, MemoryError):
                    address = -1  # sent inline, not cached
            if address >= 0:
                signature = writer.get_signature(key)
                request.handouts.append((key, address, monotonic_id, signature))
            request.protected.discard(key)
            request.position += 1
            if request.position == len(request.items):
                request.stage = "done"
                self.readable.extend(request.handouts)
        return None

    def read_all(self) -> str | None:
        """The workers read every hand-out of the requests sent so far."""
        while self.readable:
            key, address, monotonic_id, signature = self.readable.pop(0)
            try:
                value = self.reader.get(address, monotonic_id, signature, key)
            except Exception as exc:
                return f"a hand-out could not be read: {type(exc).__name__}"
            if value != value_of(key):
                return "a hand-out read another object"
        return None

    def finish(self) -> str | None:
        """Run what the schedule left, the requests taking turns."""
        while any(r.stage != "done" for r in self.requests):
            for request in self.requests:
                if request.stage != "done" and (defect := self.advance(request)):
                    return defect
        return self.read_all()


def audit_requests_in_flight(mod: ModuleType, args: tuple[list[list[str]], list[int]]) -> Any:
    requests, schedule = args
    with writer_and_reader(mod, size=72, max_object_size=40) as (writer, reader):
        sender = Sender(writer, reader, requests)
        for choice in schedule:
            defect = sender.step(choice % (len(requests) + 2))
            if defect is not None:
                return defect
        return sender.finish()


UNHASHABLE = (["k0"], {"k": 0}, {"k0"}, bytearray(b"k0"))


def audit_writer_key(mod: ModuleType, args: tuple[str, Any]) -> str | None:
    """A key lookup with any key: ValueError (refused), KeyError (absent) or a result."""
    method, key = args
    with writer_and_reader(mod) as (writer, _):
        writer.put("k0", "v")
        try:
            getattr(writer, method)(key)
        except (ValueError, KeyError):
            return None
        except TypeError:
            return "24"
        return None


REQUESTS = st.lists(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3), min_size=2, max_size=4)
AUDITS: Audits = {
    "writer touch/get_cached with requests in flight": (
        audit_requests_in_flight,
        st.tuples(REQUESTS, st.lists(st.integers(0, 5), max_size=30)),
    ),
    "writer key lookups": (
        audit_writer_key,
        st.tuples(
            st.sampled_from(["touch", "get_cached", "is_cached", "get_signature"]),
            st.one_of(st.sampled_from(UNHASHABLE), st.text(max_size=2), st.none(), st.integers()),
        ),
    ),
}


# request 0 touches k0 (cached, read); request 1 looks it up and is read; request 2's
# puts evict k0 before request 0's lookup (test_the_two_request_interleaving_...)
TWO_REQUESTS = ([["k0"], ["k0"], ["k1", "k2"]], [0, 0, 1, 1, 1, 3, 2, 2, 2, 2, 0])
SHOWN_BY = {"writer touch/get_cached with requests in flight": TWO_REQUESTS}


@pytest.mark.parametrize("method", sorted(AUDITS))
def test_seed_defects_are_all_listed(seed: ModuleType, method: str) -> None:
    check_seed(seed, AUDITS, method, SHOWN_BY.get(method))


@pytest.mark.parametrize("method", sorted(AUDITS))
def test_refimpl_shows_only_open_findings(method: str) -> None:
    check_refimpl(AUDITS, method)


def test_the_two_request_interleaving_is_a_defect_on_the_seed(seed: ModuleType) -> None:
    """The schedule the search should meet, spelt out (k0 is cached and was read):
    request 0 touches k0; request 1 looks k0 up, which ends request 0's touch,
    and is read; request 2's puts evict k0; request 0's lookup misses."""
    requests, schedule = TWO_REQUESTS
    assert schedule[5] == len(requests)  # the step that reads request 1's hand-out
    assert audit_requests_in_flight(seed, (requests, schedule)) == "22"
    without_the_other_lookup = [0, 0, 2, 2, 2, 2, 0, 1, 1, 1]  # the touch alone keeps k0
    assert audit_requests_in_flight(seed, (requests, without_the_other_lookup)) is None


def test_the_audit_catches_a_touch_that_protects_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refimpl whose writer touch does nothing loses k0 even without another
    request's lookup: the schedule that is clean on refimpl as it is."""
    import refimpl

    requests = [["k0"], ["k0"], ["k1", "k2"]]
    touch_alone = [0, 0, 2, 2, 2, 2, 0, 1, 1, 1]
    assert audit_requests_in_flight(refimpl, (requests, touch_alone)) is None
    monkeypatch.setattr(refimpl.SingleWriterShmObjectStorage, "touch", lambda self, key: None)
    assert audit_requests_in_flight(refimpl, (requests, touch_alone)) == "22"
