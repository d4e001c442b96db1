"""The state machine started from a prefix of a TLC simulation of spec/MCStorage:
Hypothesis picks the trace and the prefix length, then goes on with invented steps."""

from __future__ import annotations

import functools

import hypothesis.strategies as st
from hypothesis.stateful import (
    initialize,
)

from shmref import tlc
from shmref.core.paths import SPEC_DIR
from shmref.testing.machine import StoreMachine
from shmref.traces import shipped
from shmref.traces.replay import read_constants, step_call


class TraceSeededMachine(StoreMachine):
    """Starts from a prefix of a TLC simulation of spec/MCStorage (same
    constants), then goes on with invented steps: Hypothesis picks the trace
    and the prefix length, and shrinks both like any other choice."""

    _c = read_constants(SPEC_DIR / "MCStorage.cfg")  # the traces' constants
    N, R, ID_MAX, MAX_OBJ = _c["N"], len(_c["Readers"]), _c["ID_MAX"], _c["MAX_OBJ"]

    @initialize(data=st.data())
    def replay_tlc_prefix(self, data: st.DataObject) -> None:
        """Hypothesis's first step: the chosen trace's first steps, taken on store and models."""
        traces = storage_traces()
        trace = traces[data.draw(st.integers(0, len(traces) - 1), label="TLC trace")]
        length = data.draw(st.integers(0, len(trace.states) - 1), label="prefix length")
        readers = sorted(self._c["Readers"])
        for state in trace.states[1 : 1 + length]:
            call = step_call(state.vars["last_action"], readers)
            if call is None:
                continue
            _method, args, _kwargs = call  # MCStorage has no failing copies
            name = state.vars["last_action"]["name"]
            if name == "get_begin":
                reader, handle = args
                self.take(reader, handle)  # the trace reads a delivery
            self.step(name, *args)


@functools.cache
def storage_traces() -> list[tlc.Trace]:
    """The shipped MCStorage simulation traces the machine starts from (read once)."""
    return shipped.corpus("MCStorage-seeded")
