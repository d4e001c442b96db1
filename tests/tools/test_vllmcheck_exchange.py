"""`vllmcheck.exchange` (run by `make vllm-check` in the release's venv) catches
a serde that writes other bytes or reads the other side's wrongly: shown here
on plain values with refimpl and two broken stand-ins for the release."""

from __future__ import annotations

import pickle
from types import ModuleType
from typing import Any

import pytest

import refimpl
from vllmcheck import exchange

PLAIN = [("str", "value"), ("tuple and set", ({1, 2}, (3, "x"))), ("bytes", b"\x00\xff")]


def stand_in(serde: type) -> ModuleType:
    """refimpl's classes with another default serde class: a release that differs."""
    module = ModuleType("stand_in")
    for name in refimpl.__all__:
        setattr(module, name, getattr(refimpl, name))
    module.MsgpackSerde = serde  # type: ignore[attr-defined]
    return module


class OtherHeader(refimpl.MsgpackSerde):
    """Writes its header with pickle protocol 2: other bytes, still readable."""

    def serialize(self, value: Any) -> tuple[Any, int, bytes, int]:
        data, size, _metadata, _ = super().serialize(value)
        metadata = pickle.dumps(("bytes", size, None), protocol=2)
        return data, size, metadata, len(metadata)


class TuplesAsLists(refimpl.MsgpackOnlySerde):
    """Another format altogether: the other side cannot read it."""


@pytest.fixture(autouse=True)
def plain_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exchange, "values", lambda: PLAIN)
    monkeypatch.setattr(exchange, "same", lambda a, b: a == b)


def test_refimpl_exchanges_with_itself() -> None:
    assert exchange.exchange(refimpl, refimpl) == {"values": 3, "checks": 9, "problems": []}


def test_other_bytes_are_named_even_when_readable() -> None:
    problems = exchange.exchange(stand_in(OtherHeader), refimpl)["problems"]
    assert problems == [f"{name}: same bytes: differs" for name, _ in PLAIN]


def test_a_format_the_other_side_cannot_read_is_named_each_way() -> None:
    problems = exchange.exchange(stand_in(TuplesAsLists), refimpl)["problems"]
    assert "str: release writer, refimpl reader: ValueError: object in shared memory" in "\n".join(
        problems
    )
    assert any(p.startswith("str: refimpl writer, release reader: ") for p in problems)
