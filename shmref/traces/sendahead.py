"""A ring trace's calls sent ahead to a store in another process
(shmref.contract.SEND_AHEAD_HOOK; docs/protocol.md, `request.pipeline`).

The replay of a ring model knows its next ring calls from the trace before
it has the results of the last ones: their arguments are the trace's, and
free_buf's predicate is asked live, through the program's callbacks, when
the replay makes that call. So the calls travel together instead of a round
trip each, and the replay makes them one by one as before: same calls, same
order, same comparisons. When it stops early (a divergence) the calls sent
and not made are dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from shmref.contract import DROP_AHEAD_HOOK, SEND_AHEAD_HOOK
from shmref.store.driver import Driver
from shmref.tlc.toolout import State

AHEAD = 64  # calls named at once (the store sends what one write of its takes)
CALLS_NOTHING = frozenset({"mark_free"})  # ring actions that call the ring nothing


STOP = "stop"  # a step whose call cannot be named ahead (not a plain ring call)


class SendAhead:
    """The calls one replay has sent ahead and not made yet."""

    def __init__(
        self,
        driver: Driver,
        states: Sequence[State],
        readers: Sequence[Any],
        step_call: Callable[[Any, Sequence[Any]], Any],
        enabled: bool = True,
    ) -> None:
        """`states`: the trace's, its initial state first; the replay takes
        the others, numbered from 0 (`before`). `enabled`: the replay stops
        at its first divergence (what is named ahead assumes none before)."""
        ring = driver.ring
        ringonly = driver.writer is None and enabled
        self.send = getattr(ring, SEND_AHEAD_HOOK, None) if ringonly else None
        self.drop_sent = getattr(ring, DROP_AHEAD_HOOK, None)
        self.in_flight = 0  # calls sent ahead, not made yet
        # each step's ring call (None: it makes none; STOP), named once
        self.calls: list[Any] = []
        if self.send is not None:
            self.calls = [
                ring_call(driver, before, state, readers, step_call)
                for before, state in zip(states, states[1:], strict=False)
            ]

    def before(self, index: int) -> None:
        """The replay is about to take states[index]: if it makes a ring call
        and none is in flight, send it with the ones that follow it."""
        if self.send is None or self.calls[index] is None or self.calls[index] == STOP:
            return
        if not self.in_flight:
            ahead: list[tuple[str, dict[str, Any]]] = []
            for call in self.calls[index:]:
                if call == STOP or len(ahead) == AHEAD:
                    break
                if call is not None:
                    ahead.append(call)
            self.in_flight = int(self.send(ahead))
        if self.in_flight:
            self.in_flight -= 1  # the one this step makes

    def drop(self) -> None:
        """The replay stopped: what was sent and not made is dropped."""
        if self.in_flight and self.drop_sent is not None:
            self.drop_sent()
        self.in_flight = 0


def ring_call(
    driver: Driver,
    before: State,
    state: State,
    readers: Sequence[Any],
    step_call: Callable[[Any, Sequence[Any]], Any],
) -> Any:
    """The ring call the step to `state` makes; None: it makes none; STOP:
    one that cannot be named ahead. free_buf's predicate frees the ids the
    spec marks free in the state `before` it: the driver's own set then, as
    long as the replay has not diverged (and it stops where it does)."""
    try:
        step = step_call(state.vars["last_action"], readers)
    except ValueError:
        return STOP  # the replay reports it when it gets there
    if step is None:
        return None
    method, args, kwargs = step
    if method in CALLS_NOTHING:
        return None
    if method == "free_buf" and "marked" not in before.vars:
        return STOP
    call = None if kwargs else driver.ring_call(method, args, before.vars.get("marked", ()))
    return STOP if call is None else call
