"""Audit of the storage's count helpers, signatures and handles: a Hypothesis search.

Searched here, each with arguments at and beyond their bounds:
`increment_writer_flag` (live ids, ids not yet issued, non-ints; on the
writer and on a reader), `increment_reader_flag` (counts up to the 4-byte
limit), `default_is_free_check` (hand-outs times readers past 2**31, reads
done at and below what is owed, touched or not, ids that are not there),
`verify_signature` (keys, addresses, ids and signatures that are right,
look-alike or malformed, on both sides), and `handle`/`create_from_handle`
with the constructor they call (every field of the handle changed).
Each audit returns None for a clean call or the FINDINGS.md id it showed.
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import Any

import pytest
from audit_support import (
    Audits,
    check_refimpl,
    check_seed,
    fresh_lock,
    seed,
    unlink_left_since,
    writer_and_reader,
)
from hypothesis import find
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from shmref.session import leaks as shmleaks

__all__ = ["seed"]  # the fixture, used by name


def exact(value: Any, expected: int) -> bool:
    return type(value) is int and value == expected


def audit_increment_writer_flag(mod: ModuleType, args: tuple[str, Any]) -> str | None:
    """One more hand-out of `id`; then a new object is put and read by every reader:
    it must be reclaimable, whatever id was counted before it was issued."""
    side, monotonic_id = args
    with writer_and_reader(mod) as (writer, reader):
        target = writer if side == "writer" else reader
        writer.put("k0", "v")
        try:
            target.increment_writer_flag(monotonic_id)
        except (ValueError, KeyError):
            return None
        except Exception:
            return "21"
        if side == "reader" or not exact(monotonic_id, 0):
            address, new_id = writer.put("k1", "w")
            reader.get(address, new_id, writer.get_signature("k1"), "k1")
            reader.get(0, 0, writer.get_signature("k0"), "k0")
            writer.free_unused()
            if writer.is_cached("k1"):
                return "21"  # a count for an id not issued yet pins the chunk that gets it
            if side == "writer" and type(monotonic_id) is not int:
                return "21"  # a count that no chunk will ever have was kept
    return None


def audit_increment_reader_flag(mod: ModuleType, count: int) -> str | None:
    """One read more on a chunk whose count is `count`: the count, read as
    4 bytes unsigned, is one more (the 4-byte field wraps, FINDINGS #7)."""
    with writer_and_reader(mod) as (writer, reader):
        writer.put("k0", "v")
        with writer.ring_buffer.access_buf(0) as (view, _):
            view[:4] = count.to_bytes(4, "little", signed=True)
            try:
                reader.increment_reader_flag(view[:4])
            except OverflowError:
                return "7"
            except Exception:
                return "unexpected"
            after = int.from_bytes(view[:4], "little", signed=False)
    return None if after == (count + 1) % 2**32 else "7"


def audit_is_free_check(mod: ModuleType, args: tuple[int, int, int, bool, bool]) -> str | None:
    """Free exactly when not touched and every hand-out was read by every reader."""
    handouts, n_readers, short_by, touched, absent = args
    with writer_and_reader(mod, n_readers=n_readers) as (writer, _):
        writer.put("k0", "v")
        writer.writer_flag[0] = handouts
        reads = max(handouts * n_readers - short_by, 0)
        if touched:
            writer.touch("k0")
        with writer.ring_buffer.access_buf(0) as (view, _):
            view[:4] = (reads % 2**32).to_bytes(4, "little", signed=False)
            try:
                answer = writer.default_is_free_check(5 if absent else 0, view)
            except KeyError:
                return None if absent else "unexpected"
        expected = not touched and reads >= handouts * n_readers
        return None if answer is expected and not absent else "7"


GOOD = "good"


def audit_verify_signature(mod: ModuleType, args: tuple[str, Any, Any, Any, str]) -> str | None:
    side, key, address, monotonic_id, signature_kind = args
    with writer_and_reader(mod) as (writer, reader):
        writer.put("k0", "v")
        signatures: dict[str, Any] = {
            GOOD: writer.get_signature("k0"),
            "other key": (writer.put("k1", "w"), writer.get_signature("k1"))[1],
            "none": None,
            "short": [0] * 31,
            "out of range": [256] * 32,
            "bools": [True] * 32,
        }
        target = writer if side == "writer" else reader
        try:
            target.verify_signature(key, address, monotonic_id, signatures[signature_kind])
        except ValueError:
            return None
        except Exception:
            return "2"  # a malformed handle raised something else
        valid = key == "k0" and signature_kind == GOOD
        return None if valid and exact(address, 0) and exact(monotonic_id, 0) else "2"


def _handle_fields(draw: st.DrawFn) -> dict[str, Any]:
    """Changes to a writer's handle: each field right, at its bound, or beyond."""
    changes: dict[str, Any] = {}
    if draw(st.booleans()):
        changes["ring_size_delta"] = draw(st.sampled_from([0, -256, -1, 1, 4096, 0.5]))
    if draw(st.booleans()):
        changes["name"] = draw(st.sampled_from(["missing", "none"]))
    if draw(st.booleans()):
        changes["n_readers"] = draw(st.sampled_from([0, 1, 3, -1, 1.5, None]))
    if draw(st.booleans()):
        changes["max_object_size"] = draw(st.sampled_from([1, 64, 0, -64, 64.5, None]))
    changes["reader_lock"] = draw(st.booleans())
    changes["from_reader"] = draw(st.booleans())  # a reader's handle makes a reader too
    return changes


def audit_create_from_handle(mod: ModuleType, changes: dict[str, Any]) -> str | None:
    """A reader made from the writer's handle (fields changed) reads the writer's
    object, or creation raises ValueError (FileNotFoundError: no such segment)."""
    before = shmleaks.created()
    with writer_and_reader(mod) as (writer, first_reader):
        writer.put("k0", "v")
        handle = (first_reader if changes["from_reader"] else writer).handle()
        size, name = handle.ring_buffer_handle
        delta = changes.get("ring_size_delta", 0)
        name = {"missing": "shmref_no_such_segment", "none": None}.get(changes.get("name"), name)
        fields = {k: changes[k] for k in ("n_readers", "max_object_size") if k in changes}
        handle = dataclasses.replace(
            handle,
            ring_buffer_handle=(size + delta, name),
            reader_lock=fresh_lock() if changes["reader_lock"] else None,
            **fields,
        )
        reader = None
        try:
            reader = mod.SingleWriterShmObjectStorage.create_from_handle(handle)
        except (ValueError, FileNotFoundError):
            return None
        except AssertionError:
            return "1"  # the ring's size check is an assert
        except Exception:
            return "23"
        finally:
            unlink_left_since(before)
        try:
            if reader.get(0, 0, writer.get_signature("k0"), "k0") != "v":
                return "23"
        except Exception:
            return "23"
        finally:
            reader.close()
        # A smaller ring size than the writer's cannot be told from the segment
        # (its size is rounded up to pages), so only the limits are checked here.
        bad_n = fields.get("n_readers", 1)
        bad_max = fields.get("max_object_size", 64)
        if not (exact(bad_n, bad_n) and bad_n >= 0 and exact(bad_max, bad_max) and bad_max > 0):
            return "23"  # a reader built from a handle no writer could have
    return None


def audit_writer_constructor(mod: ModuleType, args: tuple[Any, Any]) -> str | None:
    """A writer with these limits, or ValueError: a writer must not hand out
    an object that its readers cannot all read before it is reclaimed."""
    max_object_size, n_readers = args
    before = shmleaks.created()
    ring = mod.SingleWriterShmRingBuffer(256, create=True)
    try:
        mod.SingleWriterShmObjectStorage(max_object_size, n_readers, ring)
    except ValueError:
        return None
    except Exception:
        return "23"
    finally:
        ring.close()
        unlink_left_since(before)
    valid = exact(n_readers, n_readers) and n_readers >= 0
    valid = valid and exact(max_object_size, max_object_size) and max_object_size > 0
    return None if valid else "23"


LIMITS = st.one_of(st.integers(-3, 3), st.sampled_from([1.5, None, True, "1", 2**31, -(2**31)]))
ODD_IDS = st.sampled_from([0, 1, 2, 2**31 - 1, 2**31, -1, 1.0, True, None, "1", (0,), ["x"]])
HANDLE_NUMBERS = st.one_of(st.integers(-3, 300), st.sampled_from([0.0, False, True, 2**64, -1]))
AUDITS: Audits = {
    "storage.increment_writer_flag": (
        audit_increment_writer_flag,
        st.tuples(st.sampled_from(["writer", "reader"]), ODD_IDS),
    ),
    "storage.increment_reader_flag": (
        audit_increment_reader_flag,
        st.one_of(st.integers(-(2**31), 2**31 - 1), st.sampled_from([2**31 - 1, -1, 0])),
    ),
    "storage.default_is_free_check": (
        audit_is_free_check,
        st.tuples(
            st.one_of(st.integers(1, 4), st.integers(2**29, 2**31)),
            st.integers(1, 3),
            st.integers(0, 2),
            st.booleans(),
            st.booleans(),
        ),
    ),
    "storage.verify_signature": (
        audit_verify_signature,
        st.tuples(
            st.sampled_from(["writer", "reader"]),
            st.sampled_from(["k0", "k1", None, 5, "\ud800", ("k0",)]),
            HANDLE_NUMBERS,
            HANDLE_NUMBERS,
            st.sampled_from([GOOD, "other key", "none", "short", "out of range", "bools"]),
        ),
    ),
    "storage.create_from_handle": (audit_create_from_handle, st.composite(_handle_fields)()),
    "storage constructor": (audit_writer_constructor, st.tuples(LIMITS, LIMITS)),
}


@pytest.mark.parametrize("method", sorted(AUDITS))
def test_seed_defects_are_all_listed(seed: ModuleType, method: str) -> None:
    check_seed(seed, AUDITS, method)


@pytest.mark.parametrize("method", sorted(AUDITS))
def test_refimpl_shows_only_open_findings(method: str) -> None:
    check_refimpl(AUDITS, method)


def _signed_free_check(self: Any, id: int, buf: memoryview) -> bool:
    """The seed's rule: the count read as a signed int, compared without wrapping."""
    if id in self._touched:
        return False
    count = int.from_bytes(buf[:4], "little", signed=True)
    return bool(count >= self.writer_flag[id] * self.n_readers)


BROKEN = {  # a deliberately broken refimpl: (method, replacement, audit, finding)
    "free check without wrapping": (
        "default_is_free_check",
        _signed_free_check,
        "storage.default_is_free_check",
        "7",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_the_audit_catches_a_broken_refimpl(monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    import refimpl

    method, replacement, audit_name, finding = BROKEN[case]
    audit, strategy = AUDITS[audit_name]
    with pytest.raises(NoSuchExample):  # refimpl as it is: no such defect
        find(strategy, lambda args: audit(refimpl, args) == finding)
    monkeypatch.setattr(refimpl.SingleWriterShmObjectStorage, method, replacement)
    assert audit(refimpl, find(strategy, lambda args: audit(refimpl, args) == finding)) == finding
