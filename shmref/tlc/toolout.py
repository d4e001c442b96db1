"""TLC's ``-tool`` message stream, counterexample traces and ``-simulate`` trace files."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shmref.tlc.tlavalues import TlcError, parse_state

# --------------------------------------------------------------------------
# -tool messages


@dataclass(frozen=True)
class Message:
    """One ``-tool`` message: code (e.g. 2217 = a trace state), severity, text.

    A nested message (TLC puts one inside code 1000) is listed after its
    parent, and its text is also part of the parent's body.
    """

    code: int
    severity: int
    body: str


_MARKER = re.compile(r"@!@!@(?:STARTMSG (\d+):(\d+)|ENDMSG (\d+)) @!@!@\n?")


def split_tool_output(text: str) -> tuple[list[Message], str]:
    """Messages in start order, plus the text outside any message (SANY's)."""
    if not text.strip():
        raise TlcError("TLC produced no output")
    outside: list[str] = []
    done: list[tuple[int, Message]] = []
    # stack entries: (order, code, severity, body parts)
    stack: list[tuple[int, int, int, list[str]]] = []
    pos = 0
    order = 0
    for m in _MARKER.finditer(text):
        chunk = text[pos : m.start()]
        for entry in stack:
            entry[3].append(chunk)
        if not stack:
            outside.append(chunk)
        pos = m.end()
        if m.group(1) is not None:
            stack.append((order, int(m.group(1)), int(m.group(2)), []))
            order += 1
            continue
        code = int(m.group(3))
        if not stack or stack[-1][1] != code:
            raise TlcError(f"malformed TLC -tool output: ENDMSG {code} without a matching STARTMSG")
        nth, start_code, severity, parts = stack.pop()
        done.append((nth, Message(start_code, severity, "".join(parts).rstrip("\n"))))
    if stack:
        raise TlcError(
            f"malformed TLC -tool output: message {stack[-1][1]} never ends (output cut off?)"
        )
    outside.append(text[pos:])
    if not done:
        first = text.strip().splitlines()[0][:120]
        raise TlcError(f"no TLC -tool messages in output (not TLC -tool output?): {first!r}")
    done.sort(key=lambda item: item[0])
    return [msg for _, msg in done], "".join(outside)


def parse_tool_output(text: str) -> list[Message]:
    """Split TLC ``-tool`` output into messages; malformed text is a TlcError."""
    return split_tool_output(text)[0]


# --------------------------------------------------------------------------
# traces


@dataclass
class State:
    """One state of a trace; ``action`` is None for the initial state and for
    simulation files (which do not name actions)."""

    index: int
    action: str | None
    vars: dict[str, Any]


@dataclass
class Trace:
    """A behaviour; ``back_to`` marks a lasso (liveness counterexample)."""

    states: list[State]
    back_to: int | None = None
    stuttering: bool = False
    back_to_action: str | None = None  # action closing the lasso, if any


_STATE_HEADER = re.compile(r"^(\d+): (.*)$")
_LOCATION = re.compile(r"^(.*?) line \d+, col \d+ to line \d+, col \d+ of module \S+$")


def _action_name(text: str) -> str | None:
    """``<put line 11, col 11 to ... of module M>`` -> ``put``."""
    text = text.strip()
    if text.startswith("<") and text.endswith(">"):
        text = text[1:-1]
    if text in ("Initial predicate", ""):
        return None
    m = _LOCATION.match(text)
    return m.group(1) if m else text


def parse_traces(messages: Sequence[Message]) -> list[Trace]:
    """Every trace in a run's output (several only with ``-continue``)."""
    traces: list[Trace] = []
    current: Trace | None = None

    def close() -> None:
        nonlocal current
        if current is not None and current.states:
            traces.append(current)
        current = None

    for msg in messages:
        if msg.code in (2121, 2264):  # "The behavior up to this point is:" / counterexample intro
            close()
        elif msg.code == 2107:  # invariant violated by an initial state; the state is in the body
            close()
            _, _, rest = msg.body.partition("\n")
            traces.append(Trace([State(1, None, parse_state(rest))]))
        elif msg.code == 2217:
            header, _, rest = msg.body.partition("\n")
            m = _STATE_HEADER.match(header.strip())
            if m is None:
                raise TlcError(f"cannot parse trace state header {header!r}")
            index = int(m.group(1))
            if current is not None and index == 1 and current.states:
                close()
            if current is None:
                current = Trace([])
            current.states.append(State(index, _action_name(m.group(2)), parse_state(rest)))
        elif msg.code == 2122:  # "1: Back to state: <action ...>"
            m = re.match(r"^(\d+): Back to state(?::\s*(.*))?$", msg.body.strip())
            if m is None or current is None:
                raise TlcError(f"cannot parse lasso message {msg.body!r}")
            current.back_to = int(m.group(1))
            current.back_to_action = _action_name(m.group(2) or "")
        elif msg.code == 2218:  # "2: Stuttering"
            if current is None:
                raise TlcError("stuttering message without a trace")
            current.stuttering = True
    close()
    return traces


def parse_trace(messages: Sequence[Message]) -> Trace | None:
    """The (first) error trace in a run's output, or None."""
    traces = parse_traces(messages)
    return traces[0] if traces else None


# --------------------------------------------------------------------------
# simulation files

_SIM_STATE = re.compile(r"^STATE_(\d+) ==[ \t]*$", re.MULTILINE)
SIM_FILE = re.compile(r"^(?P<prefix>.*)_(?P<worker>\d+)_(?P<k>\d+)$")


def parse_simulation_file(path: Path) -> Trace:
    """Parse one ``-simulate file=PREFIX`` trace (``STATE_i ==`` blocks)."""
    return parse_simulation_text(Path(path).read_text(encoding="utf-8", errors="replace"), path)


def parse_simulation_text(
    text: str, path: Path | str, cache: dict[str, Any] | None = None
) -> Trace:
    """One ``-simulate`` trace file's text; `path` names it in errors; `cache`
    as for parse_state (the traces of one corpus share most values)."""
    blocks = list(_SIM_STATE.finditer(text))
    if not blocks:
        raise TlcError(f"{path}: not a TLC simulation trace file (no STATE_i == blocks)")
    states: list[State] = []
    for i, m in enumerate(blocks):
        end = blocks[i + 1].start() if i + 1 < len(blocks) else len(text)
        body = text[m.end() : end]
        footer = re.search(r"^====", body, re.MULTILINE)
        if footer is not None:
            body = body[: footer.start()]
        try:
            states.append(State(int(m.group(1)), None, parse_state(body, cache)))
        except TlcError as exc:
            raise TlcError(f"{path}: STATE_{m.group(1)}: {exc}") from None
    return Trace(states)


def read_simulation_traces(directory: Path) -> list[Trace]:
    """All trace files ``<prefix>_<worker>_<k>`` in a folder, ordered by
    (prefix, worker, k) numerically, so a fixed seed gives a fixed list."""
    directory = Path(directory)
    if not directory.is_dir():
        raise TlcError(f"simulation trace folder {directory} does not exist")
    found: list[tuple[str, int, int, Path]] = []
    for path in directory.iterdir():
        m = SIM_FILE.match(path.name)
        if m and path.is_file():
            found.append((m.group("prefix"), int(m.group("worker")), int(m.group("k")), path))
    found.sort(key=lambda item: item[:3])
    return [parse_simulation_file(item[3]) for item in found]


# --------------------------------------------------------------------------
# state graphs (-dump dot,actionlabels)
