"""Audit of the seed's public methods: a Hypothesis search of their arguments.

For each audited method, `AUDITS[name]` calls it on a fresh small store with
searched arguments and returns None when the call was clean (it returned for
a valid argument, or raised a documented exception: ValueError, MemoryError,
KeyError for a key lookup) or the FINDINGS.md id of the defect it showed.
On the seed, every defect the search meets must be a listed finding, and the
search must meet at least one (the seed has a listed defect in each method).
On refimpl, it may only meet findings whose refimpl test is still xfail. A
deliberately broken refimpl shows that the search catches what it claims.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from multiprocessing import Lock
from types import ModuleType
from typing import Any

import pytest
from audit_support import Audits, check_refimpl, check_seed, seed
from hypothesis import find
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from refimpl.serde import MsgpackOnlySerde
from shmref.session import leaks as shmleaks

ODD_NUMBERS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.fractions(max_denominator=4),
    st.decimals(allow_nan=False, allow_infinity=False, places=1),
    st.booleans(),
    st.complex_numbers(max_magnitude=4, allow_nan=False, allow_infinity=False),
)
ANY_NUMBER = st.one_of(st.integers(-(2**70), 2**70), ODD_NUMBERS, st.none(), st.text(max_size=2))
__all__ = ["seed"]  # the fixture, shared with the other audit modules (audit_support)

WRITER_ONLY = {
    "put": ("k2", "v"),
    "is_cached": ("k",),
    "get_cached": ("k",),
    "get_signature": ("k",),
    "release_touches": (),
    "free_unused": (),
}


@contextmanager
def store(mod: ModuleType) -> Iterator[tuple[Any, Any]]:
    """A 256-byte writer holding "k" -> "v" at (0, 0), and one reader."""
    ring = mod.SingleWriterShmRingBuffer(256, create=True)
    lock = Lock()
    writer = mod.SingleWriterShmObjectStorage(
        64, 1, ring, serde_class=MsgpackOnlySerde, reader_lock=None
    )
    reader = None
    try:
        assert writer.put("k", "v") == (0, 0)
        size, name = ring.handle()
        reader = mod.SingleWriterShmObjectStorage(
            64,
            1,
            mod.SingleWriterShmRingBuffer(size, name=name),
            serde_class=MsgpackOnlySerde,
            reader_lock=lock,
        )
        yield writer, reader
    finally:
        if reader is not None:
            reader.close()
        ring.close()


def exact(value: Any, expected: int) -> bool:
    return type(value) is int and value == expected


def audit_writer_get(mod: ModuleType, args: tuple[Any, Any]) -> str | None:
    address, monotonic_id = args
    with store(mod) as (writer, _):
        try:
            writer.get(address, monotonic_id)
        except ValueError:
            return None
        except TypeError:
            return None if type(address) is not int else "15"
        return None if exact(address, 0) and exact(monotonic_id, 0) else "15"


def audit_reader_get(mod: ModuleType, args: tuple[Any, Any]) -> str | None:
    address, monotonic_id = args
    with store(mod) as (writer, reader):
        try:
            reader.get(address, monotonic_id, writer.get_signature("k"), "k")
        except ValueError:
            return None
        except Exception:
            return "2"
        return None if exact(address, 0) and exact(monotonic_id, 0) else "2"


def audit_reader_touch(mod: ModuleType, args: tuple[Any, Any]) -> str | None:
    address, monotonic_id = args
    with store(mod) as (writer, reader):
        try:
            reader.touch("k", address, monotonic_id, writer.get_signature("k"))
        except ValueError:
            return None
        except Exception:
            return "2"
        return None if exact(address, 0) and exact(monotonic_id, 0) else "2"


def audit_put_key(mod: ModuleType, key: Any) -> str | None:
    with store(mod) as (writer, _):
        try:
            writer.put(key, "v")
        except ValueError:
            return None
        except Exception:
            return "16"
        if type(key) is not str:
            return "16"
        try:
            writer.get_signature(key)
        except UnicodeEncodeError:
            return "17"
        return None


def audit_allocate(mod: ModuleType, size: Any) -> str | None:
    with store(mod) as (writer, _):
        try:
            writer.ring_buffer.allocate_buf(size)
        except (ValueError, MemoryError):
            return None
        except Exception:
            return "1"
        return None if type(size) is int and size > 0 else "1"


def audit_writer_only_on_reader(mod: ModuleType, name: str) -> str | None:
    with store(mod) as (_, reader):
        try:
            getattr(reader, name)(*WRITER_ONLY[name])
        except ValueError:
            return None
        except Exception:
            return "18"
        return "18"


def audit_buffer_size(mod: ModuleType, size: Any) -> str | None:
    before = shmleaks.created()
    ring = None
    try:
        ring = mod.SingleWriterShmRingBuffer(size, create=True)
        ring.allocate_buf(1)
    except (ValueError, MemoryError):
        pass
    except ZeroDivisionError:
        return "14b"
    except Exception:
        pass  # TypeError &c. from SharedMemory: a defect only if a segment is left (below)
    finally:
        if ring is not None:
            with suppress(Exception):
                ring.close()
        left = [n.lstrip("/") for n in shmleaks.created() - before]
        leaked = [n for n in left if os.path.exists(f"/dev/shm/{n}")]
        for name in leaked:
            os.unlink(f"/dev/shm/{name}")
    return "14" if leaked else None


AUDITS: Audits = {
    "writer.get": (
        audit_writer_get,
        st.tuples(
            st.one_of(st.integers(-3, 3).map(lambda k: 256 * k), ODD_NUMBERS),
            st.one_of(st.just(0), ODD_NUMBERS),
        ),
    ),
    "reader.get": (audit_reader_get, st.tuples(ANY_NUMBER, ANY_NUMBER)),
    "reader.touch": (audit_reader_touch, st.tuples(ANY_NUMBER, ANY_NUMBER)),
    "writer.put key": (
        audit_put_key,
        st.one_of(
            st.text(max_size=3), st.none(), st.integers(), st.binary(max_size=2), ODD_NUMBERS
        ),
    ),
    "ring.allocate_buf": (audit_allocate, st.one_of(st.integers(-300, 300), ODD_NUMBERS)),
    "writer-only methods on a reader": (
        audit_writer_only_on_reader,
        st.sampled_from(sorted(WRITER_ONLY)),
    ),
    "ring constructor": (audit_buffer_size, st.one_of(st.integers(-40, 40), st.floats(1, 99))),
}


@pytest.mark.parametrize("method", sorted(AUDITS))
def test_seed_defects_are_all_listed(seed: ModuleType, method: str) -> None:
    check_seed(seed, AUDITS, method)


@pytest.mark.parametrize("method", sorted(AUDITS))
def test_refimpl_shows_only_open_findings(method: str) -> None:
    check_refimpl(AUDITS, method)


def _coerce_size(original: Callable[..., Any]) -> Callable[..., Any]:
    def allocate_buf(self: Any, size: Any) -> Any:
        return original(self, int(abs(size.real)) + 1)  # defeats the size check

    return allocate_buf


def _coerce_key(original: Callable[..., Any]) -> Callable[..., Any]:
    def put(self: Any, key: Any, value: Any) -> Any:
        return original(self, key if isinstance(key, str) else f"coerced-{key!r}", value)

    return put


BROKEN = {  # a deliberately broken refimpl: (class, method, wrapper, audit, finding)
    "allocate_buf takes any number": (
        "SingleWriterShmRingBuffer",
        "allocate_buf",
        _coerce_size,
        "ring.allocate_buf",
        "1",
    ),
    "put takes any key": (
        "SingleWriterShmObjectStorage",
        "put",
        _coerce_key,
        "writer.put key",
        "16",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_the_audit_catches_a_broken_refimpl(monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    import refimpl

    class_name, method, wrap, audit_name, finding = BROKEN[case]
    audit, strategy = AUDITS[audit_name]
    with pytest.raises(NoSuchExample):  # refimpl as it is: no such defect
        find(strategy, lambda args: audit(refimpl, args) == finding)
    cls = getattr(refimpl, class_name)
    monkeypatch.setattr(cls, method, wrap(getattr(cls, method)))
    example = find(strategy, lambda args: audit(refimpl, args) == finding)
    assert audit(refimpl, example) == finding
