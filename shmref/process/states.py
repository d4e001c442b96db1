"""What the oracle knows of a program's rings' states between requests
(docs/protocol.md, `reply.ring_state`): the replay compares the ring's four
positions after every step, and asking `ring_state` each time doubled the
round trips of a step. A program with the capability sends the state of the
request's ring with each reply; the state is good until the next request
(any request may change any ring: the oracle assumes nothing of the store)."""

from __future__ import annotations

from typing import Any

from shmref.contract import RING_POSITIONS

RING_STATE_FIELDS = (*RING_POSITIONS, "ID_MAX")


FIELD_SET = frozenset(RING_STATE_FIELDS)


def state_problem(state: Any) -> str:
    """What is wrong with a ring state (empty: nothing): the five integers of
    the `ring_state` result, nothing else (checked with every reply: the
    usual answer is found without building a set or a list)."""
    if type(state) is dict and state.keys() == FIELD_SET:
        for name in RING_STATE_FIELDS:
            if type(state[name]) is not int:
                break
        else:
            return ""
    if not isinstance(state, dict) or set(state) != set(RING_STATE_FIELDS):
        return f"must be an object of exactly {', '.join(RING_STATE_FIELDS)}"
    wrong = [name for name in RING_STATE_FIELDS if type(state[name]) is not int]
    return f"has {', '.join(wrong)} not an integer" if wrong else ""


class RingStates:
    """Each ring's last known state, at the request count it was true at;
    and the ring of every object the program made (a storage's ring), so
    that a reply's state is placed without the program naming its ring."""

    def __init__(self) -> None:
        self.rings: dict[str, str] = {}  # ring or storage id -> its ring's id
        self.known: dict[str, tuple[int, dict[str, Any]]] = {}

    def made(self, op: str, arguments: dict[str, Any], result: Any) -> str | None:
        """Learn the objects a constructor's result names (nothing from a
        result that is not one: the proxy refuses it); the ring of the
        object it made (None: it made none)."""
        if not isinstance(result, dict):
            return None
        ring, storage = result.get("ring"), result.get("storage")
        if op == "create_ring" and isinstance(ring, str):
            self.rings[ring] = ring
            return ring
        if op == "create" and isinstance(storage, str):
            given = arguments.get("ring")
            if isinstance(given, str) and self.rings.get(given) == given:
                self.rings[storage] = given
                return given
        elif op == "attach" and isinstance(storage, str) and isinstance(ring, str):
            self.rings[ring] = self.rings[storage] = ring
            return ring
        return None

    def ring_of(self, target: str | None) -> str | None:
        return None if target is None else self.rings.get(target)

    def keep(self, ring: str, generation: int, state: dict[str, Any]) -> None:
        self.known[ring] = (generation, state)

    def now(self, ring: str, generation: int) -> dict[str, Any] | None:
        """The ring's state if it was learnt after the last request that may change it."""
        found = self.known.get(ring)
        return found[1] if found is not None and found[0] == generation else None
