"""What the replay of a ring trace names ahead (shmref.traces.sendahead) is
what its driver then calls, argument for argument: a store program was sent
those calls before the driver made them, and is asked for the next one in
line (a mismatch is the oracle's mistake, shmref.process.ahead)."""

from __future__ import annotations

from typing import Any

import refimpl
from shmref.contract import FREE_IDS_HOOK
from shmref.store.driver import Driver, FreeIds


class Recording:
    """A ring that records each call (method, arguments by name) and makes it."""

    NAMES = {"allocate_buf": ("size",), "free_buf": ("is_free_fn", "nbytes"), "clear": ()}

    def __init__(self, ring: Any) -> None:
        self.ring, self.calls = ring, list[tuple[str, dict[str, Any]]]()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.ring, name)
        if name not in self.NAMES:
            return found

        def call(*args: Any) -> Any:  # the predicate's ids as they are when called
            self.calls.append(named((name, dict(zip(self.NAMES[name], args, strict=True)))))
            return found(*args)

        return call


def named(call: tuple[str, dict[str, Any]] | None) -> Any:
    """A call as compared: a free_buf predicate by the ids it frees."""
    assert call is not None
    op, arguments = call
    ids = arguments.get("is_free_fn")
    return op, {**arguments, "is_free_fn": getattr(ids, FREE_IDS_HOOK, ids)}


def test_each_ring_call_named_ahead_is_the_one_the_driver_makes() -> None:
    with Driver(refimpl, 8, storage=False, id_max=5) as driver:
        ring = driver.ring = Recording(driver.ring)  # type: ignore[assignment]
        for action, args in (
            ("allocate_buf", (3,)),
            ("allocate_buf", (1,)),
            ("mark_free", (0,)),
            ("free_buf", (2,)),
            ("clear", ()),
        ):
            expected = driver.ring_call(action, args, set(driver.marked))
            before = len(ring.calls)
            assert getattr(driver, action)(*args).status == "ok"
            made = ring.calls[before:]
            if action == "mark_free":
                assert expected is None and made == []
            else:
                assert made == [named(expected)]
    assert named(("free_buf", {"is_free_fn": FreeIds({0})}))[1] == {"is_free_fn": {0}}
