"""What one TLC run found: its outcome from the exit code and the `-tool`
messages, counts, the counterexample, and an error text without TLC's boilerplate."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from shmref.tlc.toolout import (
    Message,
    Trace,
)


@dataclass
class TlcRun:
    """What one TLC run found.  ``outcome`` is one of ok, invariant, deadlock,
    liveness (temporal or action property), assumption, error."""

    exit_code: int
    outcome: str
    violated: str | None
    distinct_states: int | None
    generated_states: int | None
    depth: int | None
    seconds: float
    trace: Trace | None
    output: str
    messages: list[Message]
    error: str | None = None  # one-line description when outcome == "error" or "assumption"
    command: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    def summary(self) -> str:
        """One line for humans, e.g. ``invariant Small: 9 distinct states, depth 4, 0.4 s``."""
        head = self.outcome + (f" {self.violated}" if self.violated else "")
        parts = []
        if self.distinct_states is not None:
            parts.append(f"{self.distinct_states:,} distinct states")
        if self.generated_states is not None:
            parts.append(f"{self.generated_states:,} generated")
        if self.depth is not None:
            parts.append(f"depth {self.depth}")
        parts.append(f"{self.seconds:.1f} s")
        text = f"{head}: {', '.join(parts)}"
        if self.error:
            text += f" ({self.error})"
        return text


EXIT_OUTCOMES = {0: "ok", 10: "assumption", 11: "deadlock", 12: "invariant", 13: "liveness"}


BOILERPLATE = (
    "TLC threw an unexpected exception.\n"
    "This was probably caused by an error in the spec or model.\n"
    "See the User Output or TLC Console for clues to what happened.\n"
)


def error_text(messages: Sequence[Message], outside: str, exit_code: int, output: str) -> str:
    """A one-line reason for a failed run: SANY's errors or TLC's error messages."""
    parts: list[str] = []
    if exit_code == 150 or any(m.code == 3002 for m in messages):
        outside = re.sub(r"Residual stack trace follows:\n(?:.+\n)*", "", outside)
        sany = [
            ln.strip()
            for ln in outside.splitlines()
            if ln.strip()
            and not ln.startswith(("Parsing file", "Semantic processing", "*** Errors"))
            and ln.strip() != "Semantic errors:"
        ]
        parts.append("parse error: " + " | ".join(sany[:4]) if sany else "parse error")
    skip = {2121, 2217, 2122, 2218, 2264, 3002}
    for m in messages:
        if m.severity == 1 and m.code not in skip:
            body = m.body.replace(BOILERPLATE, "")
            parts.append(" ".join(body.split()))
    if not parts:
        tail = [ln.strip() for ln in output.splitlines() if ln.strip() and "@!@!@" not in ln]
        parts.append(tail[-1] if tail else "no error message")
    text = "; ".join(parts)
    return text if len(text) <= 500 else text[:497] + "..."
