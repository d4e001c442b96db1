"""TLA+ values as TLC prints them, parsed into Python values (and TLC's error type)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any


class TlcError(Exception):
    """TLC could not be found, run or understood (one-line message)."""


# --------------------------------------------------------------------------
# values


class FrozenDict(Mapping[Any, Any]):
    """Immutable, hashable mapping for TLA+ records and functions.

    Hashable so that a set of records can become a frozenset; equal to a plain
    dict with the same items so tests and the replayer can compare with ``{}``
    literals.
    """

    __slots__ = ("_data", "_hash")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._data: dict[Any, Any] = dict(*args, **kwargs)
        self._hash: int | None = None

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._data.items()))
        return self._hash

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[Any, Any]]]:
        """Pickled without the cached hash: str hashes differ between processes."""
        return FrozenDict, (self._data,)

    def __setstate__(self, state: tuple[None, dict[str, Any]]) -> None:
        """A pickle of an older version (its slots, hash included): the hash is dropped."""
        self._data, self._hash = dict(state[1]["_data"]), None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._data == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenDict({self._data!r})"


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<str>"(?:[^"\\]|\\.)*")
      | (?P<int>-?\d+(?![A-Za-z_]))
      | (?P<punct><<|>>|\|->|:>|@@|\.\.|[{}\[\](),])
      | (?P<ident>\w*[A-Za-z_]\w*)
    )""",
    re.VERBOSE | re.DOTALL,
)
_STRING_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f"}


def _unescape(body: str) -> str:
    """Undo TLC's backslash escapes (``\\"``, ``\\\\``, ``\\n``...)."""
    return re.sub(
        r"\\(.)", lambda m: _STRING_ESCAPES.get(m.group(1), m.group(1)), body, flags=re.DOTALL
    )


def _tokenize(text: str) -> list[tuple[str, str, int]]:
    tokens: list[tuple[str, str, int]] = []
    pos = 0
    end = len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None or m.lastgroup is None:
            snippet = text[pos : pos + 30].strip()
            raise TlcError(f"cannot parse TLA+ value: unexpected text {snippet!r} at offset {pos}")
        tokens.append((m.lastgroup, m.group(m.lastgroup), m.start(m.lastgroup)))
        pos = m.end()
    return tokens


class _ValueParser:
    """Recursive descent over the value forms TLC prints."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0

    def fail(self, what: str) -> TlcError:
        if self.pos < len(self.tokens):
            where = f"at {self.tokens[self.pos][1]!r} (offset {self.tokens[self.pos][2]})"
        else:
            where = "at end of text"
        short = " ".join(self.text.split())
        if len(short) > 80:
            short = short[:77] + "..."
        return TlcError(f"cannot parse TLA+ value {short!r}: {what} {where}")

    def peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> tuple[str, str, int]:
        if self.pos >= len(self.tokens):
            raise self.fail(f"expected {expected!r}" if expected else "unexpected end")
        tok = self.tokens[self.pos]
        if expected is not None and (tok[0] != "punct" or tok[1] != expected):
            raise self.fail(f"expected {expected!r}")
        self.pos += 1
        return tok

    def parse_all(self) -> Any:
        if not self.tokens:
            raise self.fail("empty value")
        value = self.value()
        if self.pos != len(self.tokens):
            raise self.fail("trailing text")
        return value

    def items(self, close: str) -> list[Any]:
        out: list[Any] = []
        if self.peek() == close:
            self.take(close)
            return out
        while True:
            out.append(self.value())
            if self.peek() == ",":
                self.take(",")
                continue
            self.take(close)
            return out

    def value(self) -> Any:
        kind, text, _ = self.take()
        if kind == "str":
            return _unescape(text[1:-1])
        if kind == "int":
            number = int(text)
            if self.peek() == "..":
                self.take("..")
                hi_kind, hi, _ = self.take()
                if hi_kind != "int":
                    raise self.fail("expected an integer after '..'")
                return frozenset(range(number, int(hi) + 1))
            return number
        if kind == "ident":
            if text == "TRUE":
                return True
            if text == "FALSE":
                return False
            return text
        if text == "<<":
            return tuple(self.items(">>"))
        if text == "{":
            return frozenset(self.items("}"))
        if text == "[":
            return self.record()
        if text == "(":
            return self.function()
        self.pos -= 1
        raise self.fail("unexpected token")

    def record(self) -> FrozenDict:
        fields: dict[str, Any] = {}
        while True:
            kind, name, _ = self.take()
            if kind != "ident":
                self.pos -= 1
                raise self.fail("expected a record field name")
            if self.peek() != "|->":
                raise self.fail("expected '|->' (only records [f |-> v] are supported)")
            self.take("|->")
            fields[name] = self.value()
            if self.peek() == ",":
                self.take(",")
                continue
            self.take("]")
            return FrozenDict(fields)

    def function(self) -> Any:
        first = self.value()
        if self.peek() == ")":
            self.take(")")
            return first
        mapping: dict[Any, Any] = {}
        key = first
        while True:
            self.take(":>")
            mapping[key] = self.value()
            if self.peek() == "@@":
                self.take("@@")
                key = self.value()
                continue
            self.take(")")
            return FrozenDict(mapping)


def parse_value(text: str) -> Any:
    """Parse one TLA+ value as TLC prints it into hashable Python.

    int -> int, string -> str, TRUE/FALSE -> bool, ``<<..>>`` -> tuple,
    ``{..}`` and ``a..b`` -> frozenset, records and ``(k :> v @@ ..)`` ->
    FrozenDict, model values and other bare names -> str.  Whitespace,
    including TLC's line wrapping, is insignificant.
    """
    return _ValueParser(text).parse_all()


_VAR_LINE = re.compile(r"^/\\ ([A-Za-z_]\w*) = ?(.*)$")
_SINGLE_VAR_LINE = re.compile(r"^([A-Za-z_]\w*) = ?(.*)$")
# The line ends str.splitlines knows besides "\n": the fast split below gives
# up on them rather than tell them apart from a value's own characters.
_OTHER_LINE_ENDS = re.compile("[\r\v\f\x1c-\x1e\x85\u2028\u2029]")


def split_assignment(text: str) -> tuple[str, str] | None:
    """``name = value`` (a state's variable, its wrapped lines included) as the
    name and the value's text, just as parse_state's line-by-line reading splits
    it; None whenever that reading could differ, for the caller to fall back on
    it (a regex per line cost more than the rest of a dot graph's parse)."""
    name, equals, value = text.partition(" =")
    if not (equals and name.isascii() and name.isidentifier()):
        return None
    if "\n" in value:
        for line in value.split("\n")[1:]:
            if not line[:1].isspace() or line.isspace():  # a new or a blank line
                return None
    if _OTHER_LINE_ENDS.search(value) is not None:
        return None
    return name, value[1:] if value[:1] == " " else value


def _split_state(text: str) -> list[tuple[str, str]] | None:
    """The ``/\\ v = value`` lines (or a lone ``v = value``) split by plain
    string operations; None if some line needs parse_state's careful reading."""
    body = text.strip("\n")
    parts = body[3:].split("\n/\\ ") if body.startswith("/\\ ") else [body]
    pairs: list[tuple[str, str]] = []
    for part in parts:
        pair = split_assignment(part)
        if pair is None:
            return None
        pairs.append(pair)
    return pairs


def _read_state_lines(text: str) -> list[tuple[str, str]]:
    """Each variable and its value's text, line by line (wrapped values
    continue on indented lines; blank lines are skipped)."""
    lines = text.strip("\n").splitlines()
    chunks: list[list[str]] = []
    names: list[str] = []
    for number, line in enumerate(lines):
        m = _VAR_LINE.match(line)
        if m is None and number == 0:
            m = _SINGLE_VAR_LINE.match(line)
        if m is not None:
            names.append(m.group(1))
            chunks.append([m.group(2)])
        elif not line.strip():
            continue
        elif chunks and line[:1].isspace():
            chunks[-1].append(line)
        else:
            raise TlcError(f"cannot parse state line {line!r}")
    return [(name, "\n".join(chunk)) for name, chunk in zip(names, chunks, strict=True)]


def parse_state(text: str, cache: dict[str, Any] | None = None) -> dict[str, Any]:
    """Parse a state as TLC prints it: ``/\\ v = value`` lines, or ``v = value``
    for a one-variable spec; wrapped values continue on indented lines.
    `cache` (value text -> value) lets the states of one graph share each
    distinct value, parsed once: the values are immutable."""
    pairs = _split_state(text)
    if pairs is None:
        pairs = _read_state_lines(text)
    state: dict[str, Any] = {}
    for name, value_text in pairs:
        if name in state:
            raise TlcError(f"variable {name!r} appears twice in one state")
        if cache is None:
            state[name] = parse_value(value_text)
        elif value_text in cache:
            state[name] = cache[value_text]
        else:
            state[name] = cache[value_text] = parse_value(value_text)
    return state
