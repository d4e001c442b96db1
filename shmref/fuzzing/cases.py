"""The bad calls, drawn by Hypothesis: every public method with wrong types,
numeric look-alikes, huge and negative ints, forged, stale and absurd handles,
bad keys and bad puts; each `Case` must raise ValueError (or TypeError for a
wrong Python type)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from shmref.fuzzing.fixture import CAPACITY, MAX_OBJECT, Fixture, Handle


@dataclass(frozen=True)
class Case:
    """One call that must fail; `wrong_type` allows TypeError as well."""

    label: str
    call: Callable[[], Any]
    wrong_type: bool


def look_alikes(value: int) -> st.SearchStrategy[Any]:
    """Wrong types, most of them equal to `value`."""

    class SubInt(int):
        pass

    return st.sampled_from(
        [
            Fraction(value),
            float(value),
            Decimal(value),
            complex(value, 0),
            SubInt(value),
            bool(value % 2),
            str(value),
            str(value).encode(),
            None,
            [value],
            (value,),
            object(),
        ]
    )


def bad_int(low: int, high: int) -> st.SearchStrategy[int]:
    """Ints outside [low, high]: just outside, far outside, astronomically outside."""
    return st.one_of(
        st.integers(min_value=low - 2**70, max_value=low - 1),
        st.integers(min_value=high + 1, max_value=high + 2**70),
        st.sampled_from([low - 1, high + 1, -(2**63), 2**64, 2**100]),
    )


KEYS_BAD_TYPE: st.SearchStrategy[Any] = st.sampled_from(
    [None, 0, 1.5, b"key", ["k"], ("k",), {"k": 1}, Fraction(1)]
)


KEYS_NOT_UTF8: st.SearchStrategy[Any] = st.sampled_from(
    ["\ud800", "a\udfffb", "live-0\ud83d", "\udc80" * 3]
)
# Values no serde stores: neither msgpack nor pickle (the default serde, the
# releases' format, pickles what vLLM's encoder does not take) can write them.
UNSERIALIZABLE = st.sampled_from([lambda: 1, (n for n in range(0)), threading.Lock()])


NOT_SIGNATURES = st.one_of(
    st.lists(st.integers(0, 255), max_size=31),
    st.lists(st.integers(0, 255), min_size=33),
    st.sampled_from([[256] * 32, [-1] * 32, [True] * 32, [1.0] * 32, bytes(32), "x" * 32]),
)


@dataclass(frozen=True)
class Setting:
    """What every kind of case draws first, in this order (a change of order
    would change every example Hypothesis replays from its database)."""

    fx: Fixture
    kind: str
    good: Handle  # a live object's handle
    other: Handle  # another live object's
    near_end: int  # an address in the ring's last bytes, up to three laps on
    absurd_id: int  # a monotonic id no object has had

    def case(self, label: str, call: Callable[[], Any], wrong_type: bool = False) -> Case:
        return Case(f"{self.kind}: {label}", call, wrong_type)


@st.composite
def cases(draw: st.DrawFn, fx: Fixture, kind: str) -> Case:
    """One call that must fail, over every public method and argument."""
    good = draw(st.sampled_from(fx.good))
    other = draw(st.sampled_from([h for h in fx.good if h is not good]))
    near_end = draw(st.integers(CAPACITY - 7, CAPACITY - 1)) + CAPACITY * draw(st.integers(0, 3))
    absurd_id = draw(st.integers(2**31, 2**32 - 1))
    make = BY_KIND.get(kind)
    if make is None:
        raise AssertionError(kind)
    return make(draw, Setting(fx, kind, good, other, near_end, absurd_id))


# -- the writer's get ------------------------------------------------------------------


def writer_get_look_alike_id(draw: st.DrawFn, s: Setting) -> Case:
    w, good = s.fx.writer, s.good
    i = draw(look_alikes(good.monotonic_id))
    return s.case(f"get({good.address}, {i!r})", lambda: w.get(good.address, i), True)


def writer_get_look_alike_address(draw: st.DrawFn, s: Setting) -> Case:
    w, good = s.fx.writer, s.good
    a = draw(look_alikes(good.address))
    return s.case(f"get({a!r}, {good.monotonic_id})", lambda: w.get(a, good.monotonic_id), True)


def writer_get_bad_ints(draw: st.DrawFn, s: Setting) -> Case:
    w, good = s.fx.writer, s.good
    a = draw(st.sampled_from([s.near_end, -1, 2**64, -(2**70), 2**64 + good.address]))
    i = draw(st.one_of(bad_int(0, 2**32 - 1), st.just(s.absurd_id), st.just(s.other.monotonic_id)))
    return s.case(f"get({a}, {i})", lambda: w.get(a, i))


# -- the reader's get and touch --------------------------------------------------------


def reader_get_forged(draw: st.DrawFn, s: Setting) -> Case:
    r, good = s.fx.reader, s.good
    sig = draw(st.one_of(NOT_SIGNATURES, st.lists(st.integers(0, 255), min_size=32, max_size=32)))
    return s.case(
        f"get(good, sig={sig!r:.40})",
        lambda: r.get(good.address, good.monotonic_id, sig, good.key),
    )


def reader_get_signed_absurd(draw: st.DrawFn, s: Setting) -> Case:
    r, good = s.fx.reader, s.good
    a = draw(st.sampled_from([s.near_end, good.address, 2**64 - 1, 2**63 + 5, good.address + 8]))
    i = draw(st.sampled_from([s.absurd_id, s.other.monotonic_id]))
    if a != good.address:  # inside an object, bytes could spell a live id
        i = s.absurd_id
    key = draw(st.sampled_from([good.key, "absurd"]))
    sig = s.fx.sign(key, a, i)
    return s.case(f"get({a}, {i}, signed, {key!r})", lambda: r.get(a, i, sig, key))


def reader_get_stale(draw: st.DrawFn, s: Setting) -> Case:
    r = s.fx.reader
    h = draw(st.sampled_from(s.fx.stale))
    call = draw(st.sampled_from(["get", "touch"]))
    if call == "get":
        return s.case(f"get(stale {h.key})", lambda: r.get(*h.args()))
    return s.case(
        f"touch(stale {h.key})", lambda: r.touch(h.key, h.address, h.monotonic_id, h.signature)
    )


def reader_get_wrong_types(draw: st.DrawFn, s: Setting) -> Case:
    w, r, good = s.fx.writer, s.fx.reader, s.good
    field_name = draw(st.sampled_from(["address", "monotonic_id", "key"]))
    args: dict[str, Any] = {
        "address": good.address,
        "monotonic_id": good.monotonic_id,
        "key": good.key,
    }
    args[field_name] = draw(KEYS_BAD_TYPE if field_name == "key" else look_alikes(args[field_name]))
    method = draw(st.sampled_from(["get", "touch", "verify_signature"]))
    if method == "get":
        return s.case(
            f"get({args})",
            lambda: r.get(args["address"], args["monotonic_id"], good.signature, args["key"]),
            True,
        )
    if method == "touch":
        return s.case(
            f"touch({args})",
            lambda: r.touch(args["key"], args["address"], args["monotonic_id"], good.signature),
            True,
        )
    store = draw(st.sampled_from([w, r]))
    return s.case(
        f"verify_signature({args})",
        lambda: store.verify_signature(
            args["key"], args["address"], args["monotonic_id"], good.signature
        ),
        True,
    )


# -- keys, puts, and the writer's methods on a reader ----------------------------------


def bad_keys(draw: st.DrawFn, s: Setting) -> Case:
    w, r, good = s.fx.writer, s.fx.reader, s.good
    key = draw(st.one_of(KEYS_BAD_TYPE, KEYS_NOT_UTF8))
    wrong = not isinstance(key, str)
    calls: dict[str, Callable[[], Any]] = {
        "put": lambda: w.put(key, "v"),
        "get_cached": lambda: w.get_cached(key),
        "get_signature": lambda: w.get_signature(key),
        "is_cached": lambda: w.is_cached(key),
        "touch": lambda: w.touch(key),
        "reader touch": lambda: r.touch(key, good.address, good.monotonic_id, good.signature),
        "reader get": lambda: r.get(good.address, good.monotonic_id, good.signature, key),
    }
    method = draw(st.sampled_from(list(calls)))
    return s.case(f"{method}({key!r})", calls[method], wrong)


def bad_puts(draw: st.DrawFn, s: Setting) -> Case:
    w, r, good = s.fx.writer, s.fx.reader, s.good
    what = draw(st.sampled_from(["duplicate", "unserializable", "too large", "reader"]))
    if what == "duplicate":
        return s.case(f"put({good.key!r}) again", lambda: w.put(good.key, b"x"))
    if what == "unserializable":
        value = draw(UNSERIALIZABLE)
        return s.case(f"put(new, {type(value).__name__})", lambda: w.put("new", value))
    if what == "too large":
        n = draw(st.integers(MAX_OBJECT, 4 * MAX_OBJECT))
        return s.case(f"put(new, {n} bytes)", lambda: w.put("new", b"x" * n))
    return s.case("reader put", lambda: r.put("new", b"x"))


def reader_writer_only(draw: st.DrawFn, s: Setting) -> Case:
    r, good = s.fx.reader, s.good
    calls: dict[str, Callable[[], Any]] = {
        "free_unused": r.free_unused,
        "get_cached": lambda: r.get_cached(good.key),
        "get_signature": lambda: r.get_signature(good.key),
        "release_touches": r.release_touches,
        "is_cached": lambda: r.is_cached(good.key),
    }
    method = draw(st.sampled_from(list(calls)))
    return s.case(f"reader {method}", calls[method])


# -- the ring ------------------------------------------------------------------------


def ring_sizes(draw: st.DrawFn, s: Setting) -> Case:
    ring, rring = s.fx.ring, s.fx.reader_ring
    size = draw(st.one_of(look_alikes(64), bad_int(1, 2**31 - 9)))
    target = draw(st.sampled_from([ring, rring]))
    who = "writer" if target is ring else "reader"
    return s.case(
        f"{who} allocate_buf({size!r})",
        lambda: target.allocate_buf(size),
        type(size) is not int,
    )


def ring_addresses(draw: st.DrawFn, s: Setting) -> Case:
    a = draw(
        st.sampled_from(
            [st.just(s.near_end), look_alikes(s.good.address), bad_int(0, 2**64 - 1)]
        ).flatmap(lambda strategy: strategy)
    )
    target = draw(st.sampled_from([s.fx.ring, s.fx.reader_ring]))
    how = draw(st.sampled_from(["access_buf", "read_header"]))

    def access() -> Any:
        if how == "read_header":
            return target.read_header(a)
        with target.access_buf(a) as got:
            return got[1]

    return s.case(f"{how}({a!r})", access, type(a) is not int)


RING_OTHER = (
    "free_buf fn",
    "free_buf nbytes",
    "reader free_buf",
    "reader clear",
    "int2byte",
    "byte2int",
    "new ring",
    "attach",
)


def ring_other(draw: st.DrawFn, s: Setting) -> Case:
    ring, rring, impl = s.fx.ring, s.fx.reader_ring, s.fx.impl
    what = draw(st.sampled_from(list(RING_OTHER)))
    if what == "free_buf fn":
        fn = draw(st.sampled_from([None, 1, "f", b"f"]))
        return s.case(f"free_buf({fn!r})", lambda: list(ring.free_buf(fn)), True)
    if what == "free_buf nbytes":
        nbytes = draw(look_alikes(100).filter(lambda x: x is not None))  # None: all
        return s.case(
            f"free_buf(nbytes={nbytes!r})",
            lambda: list(ring.free_buf(lambda *_: True, nbytes)),
            True,
        )
    if what == "reader free_buf":
        return s.case("reader free_buf", lambda: list(rring.free_buf(lambda *_: True)))
    if what == "reader clear":
        return s.case("reader ring clear", rring.clear)
    if what == "int2byte":
        n = draw(st.one_of(bad_int(-(2**31), 2**31 - 1), look_alikes(7)))
        return s.case(f"int2byte({n!r})", lambda: ring.int2byte(n), type(n) is not int)
    if what == "byte2int":
        data = draw(st.sampled_from([None, 7, 1.5, "abcd", [1, 2, 3, 4], (1, 2)]))
        return s.case(f"byte2int({data!r})", lambda: ring.byte2int(data), True)
    if what == "new ring":
        size = draw(st.one_of(look_alikes(128), bad_int(9, 2**63 - 33)))
        return s.case(
            f"ring({size!r}, create=True)",
            lambda: _closing(impl.SingleWriterShmRingBuffer(size, create=True)),
            type(size) is not int,
        )
    name = draw(
        st.one_of(KEYS_BAD_TYPE, KEYS_NOT_UTF8, st.sampled_from(["", "a/b", "x\0y", "z" * 300]))
    )
    return s.case(
        f"ring(64, name={name!r})",
        lambda: _closing(impl.SingleWriterShmRingBuffer(64, name=name)),
        not isinstance(name, str),
    )


# -- the storage's other methods and its constructor ----------------------------------


def store_other(draw: st.DrawFn, s: Setting) -> Case:
    r, good, impl = s.fx.reader, s.good, s.fx.impl
    what = draw(
        st.sampled_from(
            [m for m in ("get_copy", "get_end") if hasattr(r, m)]
            + ["create_from_handle", "new store"]
        )
    )
    thing = draw(st.sampled_from([None, 1, "read", b"", object(), (good.address,)]))
    if what == "get_copy":
        return s.case(f"get_copy({thing!r})", lambda: r.get_copy(thing), True)
    if what == "get_end":
        return s.case(f"get_end({thing!r})", lambda: r.get_end(thing), True)
    if what == "create_from_handle":
        return s.case(
            f"create_from_handle({thing!r})",
            lambda: _closing(impl.SingleWriterShmObjectStorage.create_from_handle(thing)),
            True,
        )
    return new_store(draw, s)


def new_store(draw: st.DrawFn, s: Setting) -> Case:
    """The storage built with one bad argument (max object size or readers)."""
    position = draw(st.integers(0, 1))
    store_args: list[Any] = [MAX_OBJECT, 1]
    bad = draw(
        st.one_of(
            look_alikes(store_args[position]),
            bad_int(1, 2**31 - 9) if position == 0 else bad_int(0, 2**31 - 1),
        )
    )
    store_args[position] = bad
    ring, impl = s.fx.ring, s.fx.impl
    return s.case(
        f"store{tuple(store_args)}",
        lambda: impl.SingleWriterShmObjectStorage(*store_args, ring),
        type(bad) is not int,
    )


# every kind of case, in the order the fuzz cycles through them
BY_KIND: dict[str, Callable[[st.DrawFn, Setting], Case]] = {
    "writer get, look-alike id": writer_get_look_alike_id,
    "writer get, look-alike address": writer_get_look_alike_address,
    "writer get, bad ints": writer_get_bad_ints,
    "reader get, forged": reader_get_forged,
    "reader get, signed absurd": reader_get_signed_absurd,
    "reader get, stale": reader_get_stale,
    "reader get, wrong types": reader_get_wrong_types,
    "keys": bad_keys,
    "bad puts": bad_puts,
    "reader writer-only": reader_writer_only,
    "ring sizes": ring_sizes,
    "ring addresses": ring_addresses,
    "ring other": ring_other,
    "store other": store_other,
}
KINDS = tuple(BY_KIND)


def _closing(ring: Any) -> Any:
    """A ring that was wrongly created: close it so the fuzz leaks nothing."""
    ring.close()
    return ring
