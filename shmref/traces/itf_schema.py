"""The types of shmref's ITF files (docs/itf.md): every spec variable and
the `last_action` record, each with its JSON encoding and a decoder that
says which state and field is wrong.

A type encodes the Python values shmref.tlc parses (int, str, bool, tuple,
frozenset, FrozenDict) and decodes ITF JSON back to exactly those forms:
Int -> int, Str -> str, Bool -> bool, Seq/Tup -> tuple, Set -> frozenset,
Map/Rec -> FrozenDict. Model values (readers r1, keys k1) are strings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from shmref.core import vocabulary
from shmref.tlc.tlavalues import FrozenDict

JSON_INT_MAX = 2**53 - 1  # larger integers are written {"#bigint": "..."}
_BIGINT = re.compile(r"^-?[0-9]+$")


class ItfError(ValueError):
    """An ITF file or value does not fit the schema (one line, with the
    state index and the field)."""


def at(where: str, what: str, value: Any) -> ItfError:
    shown = json.dumps(value) if _jsonable(value) else repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return ItfError(f"{where}: expected {what}, got {shown}")


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _order(encoded: Any) -> str:
    return json.dumps(encoded, sort_keys=True)


class Type:
    """One ITF type; `text` is its name in Apalache's type syntax."""

    def __init__(
        self,
        kind: str,
        args: tuple[Type, ...] = (),
        fields: Mapping[str, Type] | None = None,
        text: str = "",
    ) -> None:
        self.kind = kind
        self.args = args
        self.fields = dict(fields or {})
        self.text = text or kind

    # Python (as shmref.tlc parses TLC's output) -> JSON
    def encode(self, value: Any, where: str) -> Any:
        kind = self.kind
        if kind == "Int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise at(where, "an integer (Int)", value)
            return value if abs(value) <= JSON_INT_MAX else {"#bigint": str(value)}
        if kind in ("Str", "Bool"):
            if not isinstance(value, str if kind == "Str" else bool):
                raise at(where, f"a {kind}", value)
            return value
        if kind == "Seq":
            items = _as_sequence(value)
            if items is None:
                raise at(where, f"a sequence ({self.text})", value)
            return [self.args[0].encode(v, f"{where}[{i}]") for i, v in enumerate(items)]
        if kind == "Tup":
            if not isinstance(value, (tuple, list)) or len(value) != len(self.args):
                raise at(where, f"a tuple {self.text}", value)
            return {
                "#tup": [
                    t.encode(v, f"{where}[{i}]")
                    for i, (t, v) in enumerate(zip(self.args, value, strict=True))
                ]
            }
        if kind == "Set":
            if not isinstance(value, (frozenset, set)):
                raise at(where, f"a set ({self.text})", value)
            return {
                "#set": sorted(
                    (self.args[0].encode(v, f"{where} element") for v in value), key=_order
                )
            }
        if kind == "Map":
            mapping = _as_function(value)
            if mapping is None:
                raise at(where, f"a function ({self.text})", value)
            pairs = [
                [self.args[0].encode(k, f"{where} key"), self.args[1].encode(v, f"{where}[{k!r}]")]
                for k, v in mapping.items()
            ]
            return {"#map": sorted(pairs, key=lambda p: _order(p[0]))}
        if kind == "Rec":
            if not isinstance(value, Mapping) or set(value) != set(self.fields):
                raise at(where, f"a record {self.text}", value)
            return {n: t.encode(value[n], f"{where}.{n}") for n, t in self.fields.items()}
        if kind == "OneOf":
            return self._first_fit(lambda option: option.encode(value, where), value, where)
        raise AssertionError(kind)

    # JSON -> Python
    def decode(self, data: Any, where: str) -> Any:
        kind = self.kind
        if kind == "Int":
            if isinstance(data, int) and not isinstance(data, bool):
                return data
            if (
                isinstance(data, dict)
                and set(data) == {"#bigint"}
                and isinstance(data["#bigint"], str)
                and _BIGINT.match(data["#bigint"])
            ):
                return int(data["#bigint"])
            raise at(where, 'an integer (a JSON integer or {"#bigint": "digits"})', data)
        if kind in ("Str", "Bool"):
            if not isinstance(data, str if kind == "Str" else bool):
                raise at(where, "a JSON string" if kind == "Str" else "true or false", data)
            return data
        if kind == "Seq":
            if not isinstance(data, list):
                raise at(where, f"a JSON array ({self.text})", data)
            return tuple(self.args[0].decode(v, f"{where}[{i}]") for i, v in enumerate(data))
        if kind == "Tup":
            items = _tagged(data, "#tup")
            if items is None or len(items) != len(self.args):
                raise at(
                    where, f'{{"#tup": [...]}} with {len(self.args)} items ({self.text})', data
                )
            return tuple(
                t.decode(v, f"{where}[{i}]")
                for i, (t, v) in enumerate(zip(self.args, items, strict=True))
            )
        if kind == "Set":
            items = _tagged(data, "#set")
            if items is None:
                raise at(where, f'{{"#set": [...]}} ({self.text})', data)
            return frozenset(
                self.args[0].decode(v, f"{where} element {i}") for i, v in enumerate(items)
            )
        if kind == "Map":
            pairs = _tagged(data, "#map")
            if pairs is None:
                raise at(where, f'{{"#map": [[key, value], ...]}} ({self.text})', data)
            out: dict[Any, Any] = {}
            for i, pair in enumerate(pairs):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise at(f"{where} #map entry {i}", "a [key, value] pair", pair)
                key = self.args[0].decode(pair[0], f"{where} #map entry {i} key")
                if key in out:
                    raise ItfError(f"{where} #map entry {i}: duplicate key {pair[0]!r}")
                out[key] = self.args[1].decode(pair[1], f"{where}[{pair[0]!r}]")
            return FrozenDict(out)
        if kind == "Rec":
            if not isinstance(data, dict):
                raise at(where, f"a JSON object (record {self.text})", data)
            _fields_exactly(data, self.fields, set(), where)
            return FrozenDict(
                {n: t.decode(data[n], f"{where}.{n}") for n, t in self.fields.items()}
            )
        if kind == "OneOf":
            return self._first_fit(lambda option: option.decode(data, where), data, where)
        raise AssertionError(kind)

    def _first_fit(self, convert: Callable[[Type], Any], value: Any, where: str) -> Any:
        """`convert` (encode or decode) by the first option that fits `value`."""
        for option in self.args:
            try:
                return convert(option)
            except ItfError:
                continue
        raise at(where, self.text, value)


# constructors, in Apalache's type syntax
INT, STR = Type("Int"), Type("Str")


def seq_of(elem: Type) -> Type:
    return Type("Seq", (elem,), text=f"Seq({elem.text})")


def tup(*elems: Type) -> Type:
    return Type("Tup", elems, text="<<" + ", ".join(e.text for e in elems) + ">>")


def set_of(elem: Type) -> Type:
    return Type("Set", (elem,), text=f"Set({elem.text})")


def fn(key: Type, value: Type) -> Type:
    return Type("Map", (key, value), text=f"{key.text} -> {value.text}")


def rec(**fields: Type) -> Type:
    text = "{ " + ", ".join(f"{n}: {t.text}" for n, t in fields.items()) + " }"
    return Type("Rec", fields=fields, text=text)


def one_of(*options: Type) -> Type:
    return Type("OneOf", options, text="(" + " | ".join(o.text for o in options) + ")")


def _tagged(data: Any, tag: str) -> list[Any] | None:
    if isinstance(data, dict) and set(data) == {tag} and isinstance(data[tag], list):
        items: list[Any] = data[tag]
        return items
    return None


def _as_sequence(value: Any) -> list[Any] | None:
    if isinstance(value, (tuple, list)):
        return list(value)
    if isinstance(value, Mapping) and set(value) == set(range(1, len(value) + 1)):
        return [value[i] for i in range(1, len(value) + 1)]
    return None


def _as_function(value: Any) -> Mapping[Any, Any] | None:
    """TLC prints the empty function as <<>> and one on 1..n as a sequence."""
    if isinstance(value, Mapping):
        return value
    if isinstance(value, tuple):
        return {i + 1: v for i, v in enumerate(value)}
    return None


def _fields_exactly(
    data: Mapping[str, Any], required: Mapping[str, Any], optional: set[str], where: str
) -> None:
    missing = [n for n in required if n not in data]
    if missing:
        raise ItfError(f"{where}: missing field {missing[0]!r}")
    unknown = sorted(set(data) - set(required) - optional)
    if unknown:
        raise ItfError(
            f"{where}: unknown field {unknown[0]!r} (expected "
            f"{', '.join(list(required) + sorted(optional))})"
        )


HANDLE = one_of(tup(), tup(STR, INT, INT))

# from shmref.core.vocabulary: the outcomes each spec action can show, every
# outcome of the table an implementation's call may show in a recording
# (besides the class name of an exception of no outcome's type), and the fields
# of each action's record besides name and outcome ("reader" and "value"
# differ between spec traces and recordings)
ACTION_OUTCOMES = {a.name: frozenset(a.outcomes) for a in vocabulary.spec_actions()}
RECORDED_OUTCOMES = frozenset(o.name for o in vocabulary.OUTCOMES)
ACTION_FIELDS: dict[str, tuple[str, ...]] = {a.name: a.fields for a in vocabulary.spec_actions()}
RECORDED_ACTIONS = tuple(a.name for a in vocabulary.recorded_actions())


class Action(Type):
    """`last_action`: a record whose `name` selects its other fields.
    In a recording, `reader` is the reader's index (0..R-1), `value` is the
    key whose value a read returned (or "<foreign>") and is present only
    when the read succeeded, `freed` is optional."""

    def __init__(self, recording: bool = False) -> None:
        super().__init__("Action", text="{ name: Str, outcome: Str, ... } (see docs/itf.md)")
        self.recording = recording
        self.field_types = {
            "size": INT,
            "id": INT,
            "nbytes": INT,
            "freed": seq_of(INT),
            "key": STR,
            "handle": HANDLE,
            "reader": INT if recording else STR,
            "value": STR if recording else seq_of(STR),
        }

    def _shape(self, data: Mapping[str, Any], where: str) -> tuple[list[str], set[str]]:
        name = data.get("name")
        names = RECORDED_ACTIONS if self.recording else tuple(ACTION_FIELDS)
        if name not in names:
            raise at(f"{where}.name", "one of " + ", ".join(names), name)
        outcomes = RECORDED_OUTCOMES if self.recording else ACTION_OUTCOMES[name]
        outcome = data.get("outcome")
        # a recording may show any exception the store raised, by its class name
        if outcome not in outcomes and not (self.recording and vocabulary.is_undocumented(outcome)):
            also = " or an exception's class name" if self.recording else ""
            expected = f"one of {', '.join(sorted(outcomes))}{also} for {name}"
            raise at(f"{where}.outcome", expected, outcome)
        fields = list(ACTION_FIELDS[name])
        optional: set[str] = set()
        if self.recording:
            for maybe in ("freed", "value"):
                if maybe in fields:
                    fields.remove(maybe)
                    optional.add(maybe)
        return fields, optional

    def _convert(
        self, data: Mapping[str, Any], where: str, convert: Callable[[Type, Any, str], Any]
    ) -> dict[str, Any]:
        """The record's fields checked against its action and each converted
        (encoded or decoded) by its type."""
        fields, optional = self._shape(data, where)
        _fields_exactly(data, {f: None for f in ["name", "outcome", *fields]}, optional, where)
        out = {"name": data["name"], "outcome": data["outcome"]}
        for f in [*fields, *sorted(optional & set(data))]:
            out[f] = convert(self.field_types[f], data[f], f"{where}.{f}")
        return out

    def encode(self, value: Any, where: str) -> Any:
        if not isinstance(value, Mapping):
            raise at(where, "a record", value)
        return self._convert(value, where, lambda t, v, w: t.encode(v, w))

    def decode(self, data: Any, where: str) -> Any:
        if not isinstance(data, dict):
            raise at(where, "a JSON object (the last_action record)", data)
        return FrozenDict(self._convert(data, where, lambda t, v, w: t.decode(v, w)))


_CELLS = fn(INT, INT)
# the ring's positions and id -> address map: in every state and recording
_RING: dict[str, Type] = {
    "data_buffer_start": INT,
    "data_buffer_end": INT,
    "monotonic_id_start": INT,
    "monotonic_id_end": INT,
    "metadata": fn(INT, INT),
}
RING_VARS: dict[str, Type] = {
    **_RING,
    "hdr_size": _CELLS,
    "marked": set_of(INT),
    "chunks": set_of(rec(id=INT, addr=INT, size=INT)),
    "last_action": Action(),
}
STORAGE_VARS: dict[str, Type] = {
    **_RING,
    "key_index": fn(STR, tup(INT, INT)),
    "id_index": fn(INT, STR),
    "writer_flag": fn(INT, INT),
    "touched": set_of(INT),
    "hdr_id": _CELLS,
    "hdr_size": _CELLS,
    "count": _CELLS,
    "payload": fn(INT, STR),
    "issued": fn(HANDLE, INT),
    "inbox": fn(STR, fn(HANDLE, INT)),
    "rd": fn(STR, rec(st=STR, h=HANDLE, pos=INT, size=INT, val=seq_of(STR))),
    "chunks": set_of(rec(id=INT, addr=INT, size=INT, key=STR, reads=INT)),
    "nissued": INT,
    "last_action": Action(),
}
# What a recording may add to each state besides last_action: the
# implementation's state after the call, in units (docs/itf.md).
OBSERVABLE: dict[str, Type] = {
    **_RING,
    "key_index": fn(STR, tup(INT, INT)),
    "writer_flag": fn(INT, INT),
    "touched": set_of(INT),
    "counts": fn(INT, INT),
}
