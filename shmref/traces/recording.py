"""A recording: the constants and the log of calls (and, if recorded, the
observed states) of one run of an implementation, saved and loaded as ITF or the
older {"constants", "log"} JSON, checked on loading."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shmref.traces import itf
from shmref.traces.itf_schema import ItfError


@dataclass
class Recording:
    """The constants of the run, its log (one dict per call) and, optionally,
    the implementation's state before the first call and after each call
    (`observed`, variables of itf_schema.OBSERVABLE, in units)."""

    constants: dict[str, int]  # N, ID_MAX, MAX_OBJ, R
    log: list[dict[str, Any]] = field(default_factory=list)
    observed: list[dict[str, Any]] | None = None

    def save(self, path: Path) -> None:
        """The plain form (no observed states: use save_itf for those)."""
        if self.observed is not None:
            raise ValueError("a recording with observed states is saved as ITF (save_itf)")
        Path(path).write_text(
            json.dumps({"constants": self.constants, "log": self.log}, indent=1) + "\n"
        )

    def to_itf(self) -> dict[str, Any]:
        return itf.recording_to_itf(self.constants, self.log, self.observed)

    def save_itf(self, path: Path) -> None:
        itf.write_json(self.to_itf(), Path(path))

    @classmethod
    def load(cls, path: Path) -> Recording:
        """Either form; bad input raises ValueError (ItfError) naming the
        step and the field."""
        data = itf.load_json(path)
        try:
            if isinstance(data, dict) and "states" in data:
                constants, log, observed = itf.recording_from_itf(data)
                return cls(constants, [dict(e) for e in log], observed)
            return cls.from_plain(data)
        except ItfError as exc:
            raise ItfError(f"{path}: {exc}") from None

    @classmethod
    def from_plain(cls, data: Any) -> Recording:
        """The `{"constants": {...}, "log": [...]}` form, schema-checked by
        going through the ITF encoder (lists become tuples)."""
        if not isinstance(data, dict) or set(data) != {"constants", "log"}:
            raise ItfError(
                'top level: expected {"constants": {...}, "log": [...]} or an ITF '
                "recording (docs/itf.md)"
            )
        constants, log = data["constants"], data["log"]
        if not isinstance(constants, dict) or not isinstance(log, list):
            raise ItfError("constants must be an object and log an array")
        entries = [
            {k: tuple(v) if isinstance(v, list) else v for k, v in e.items()}
            if isinstance(e, dict)
            else e
            for e in log
        ]
        for name in ("N", "ID_MAX", "MAX_OBJ", "R"):
            if name not in constants:
                raise ItfError(f"constants: missing {name}")
        # validates every entry and constant, with "state k" = log entry k (1-based)
        doc = json.loads(json.dumps(itf.recording_to_itf(constants, entries)))
        checked, checked_log, _ = itf.recording_from_itf(doc)
        return cls(checked, [dict(e) for e in checked_log])
