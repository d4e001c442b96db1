"""Recording a run of an implementation for trace validation (implementation
-> spec, the direction opposite to replay): `Recorder` wraps a `Driver` and logs
every call with its arguments in units and the outcome the implementation showed,
exactly as the spec's `last_action` record names them (DESIGN.md), and
optionally the state it showed after each call; `random_workload` drives it;
`Recording` is what comes out, saved and loaded as ITF or the older
{"constants", "log"} JSON and checked on loading.

One idea, making the log, apart from judging it (shmref.traces.tracecheck,
TLC's side): a recording is made here in Python, or written by an
implementation in any language and only loaded here, and checked the same way.

    rec = Recorder(Driver(impl, 8, n_readers=2, id_max=5, max_obj=3))
    random_workload(rec, steps=120, seed=1)
    result = validate_recording(rec.recording())
    assert result.accepted, result.explain()
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from shmref.contract import MissingCapability
from shmref.core import vocabulary
from shmref.store.driver import Driver, Outcome
from shmref.store.values import MD_SIZE
from shmref.traces import itf
from shmref.traces.itf_schema import OBSERVABLE, ItfError

# -- the recording ----------------------------------------------------------------


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


# -- the recorder -----------------------------------------------------------------


class Recorder:
    """A `Driver` whose every call is logged as the spec's `last_action`;
    with `observe`, the implementation's state (what `Driver.observe` can
    see of itf_schema.OBSERVABLE) is recorded too, before the first call
    and after each, and trace validation checks it step by step."""

    def __init__(self, driver: Driver, observe: bool = False) -> None:
        if driver.writer is None:
            raise ValueError("the recorder needs a storage driver (storage=True)")
        self.driver = driver
        self.log: list[dict[str, Any]] = []
        self.open: dict[int, tuple[Any, ...]] = {}  # reader -> handle of its read in flight
        self.raised_at_copy: set[int] = set()  # readers whose copy raised (seed's get)
        self.observed: list[dict[str, Any]] | None = [self._observe()] if observe else None

    def _observe(self) -> dict[str, Any]:
        return {k: v for k, v in self.driver.observe().items() if k in OBSERVABLE}

    def recording(self) -> Recording:
        writer = self.driver.writer
        if writer is None:
            raise ValueError("the recorder needs a storage driver (storage=True)")
        unit = self.driver.unit
        max_obj, rest = divmod(writer.max_object_size + MD_SIZE, unit)
        if rest:
            raise ValueError(f"max_object_size {writer.max_object_size} is not {unit}*k - 8")
        constants = {
            "N": self.driver.n_units,
            "ID_MAX": int(self.driver.ring.ID_MAX),
            "MAX_OBJ": max_obj,
            "R": len(self.driver.readers),
        }
        observed = [dict(o) for o in self.observed] if self.observed is not None else None
        return Recording(constants, [dict(e) for e in self.log], observed)

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Outcome:
        """The Driver method of action `name` (shmref.core.vocabulary). What
        the call raised is its outcome, whatever the type: the Driver names
        the contract's exceptions, and any other is named by its class
        (vocabulary.undocumented), an outcome no spec step shows, so that
        TLC rejects the log at this step (a FAIL with its reason) instead
        of the recording stopping there (an ERROR that judges nothing)."""
        method = vocabulary.action(name).driver
        if method is None:
            raise ValueError(f"action {name!r} calls nothing: there is no call to record")
        try:
            outcome: Outcome = getattr(self.driver, method)(*args, **kwargs)
        except MissingCapability:
            raise  # the property is not run: nothing to judge
        except Exception as exc:  # noqa: BLE001 - the store's, recorded as the step's outcome
            return Outcome(vocabulary.classify(name, exc), f"{type(exc).__name__}: {exc}")
        return outcome

    def _add(self, name: str, outcome: Outcome, *args: Any, **results: Any) -> Outcome:
        """Log the call as the spec's `last_action`: its arguments under the
        vocabulary's names, then the results it showed, then the outcome."""
        spec = vocabulary.action(name)
        unknown = set(results) - set(spec.results)
        if len(args) != len(spec.arguments) or unknown:
            raise ValueError(f"{name}: arguments {args}, results {sorted(unknown)} do not fit")
        arguments = dict(zip(spec.arguments, args, strict=True))
        self.log.append({"name": name, **arguments, **results, "outcome": outcome.status})
        if self.observed is not None:
            self.observed.append(self._observe())
        return outcome

    def _handle(self, key: str, outcome: Outcome) -> tuple[Any, ...]:
        if outcome.status != "ok":
            return ()
        address, monotonic_id = outcome.result
        return (key, address, monotonic_id)

    # -- writer ------------------------------------------------------------------

    def put(self, key: str, size: int) -> Outcome:
        outcome = self._call("put", key, size)
        return self._add("put", outcome, key, size, handle=self._handle(key, outcome))

    def get_cached(self, key: str) -> Outcome:
        outcome = self._call("get_cached", key)
        return self._add("get_cached", outcome, key, handle=self._handle(key, outcome))

    def touch(self, key: str) -> Outcome:
        return self._add("touch", self._call("touch", key), key)

    def release_touches(self) -> Outcome:
        return self._add("release_touches", self._call("release_touches"))

    def free_unused(self) -> Outcome:
        """Logged with the ids it freed, oldest first: the live ids before and
        after come from the contract (`is_cached`, through Driver.observe),
        their age from the order of this log's puts."""
        before = set(self.driver.observe()["metadata"])
        outcome = self._call("free_unused")
        gone = before - set(self.driver.observe()["metadata"])
        placed = [e["handle"][2] for e in self.log if e["name"] == "put" and e["handle"]]
        last_put = {monotonic_id: k for k, monotonic_id in enumerate(placed)}
        freed = tuple(sorted(gone, key=lambda i: last_put.get(i, -1)))
        return self._add("free_unused", outcome, freed=freed)

    def clear(self) -> Outcome:
        return self._add("clear", self._call("clear"))

    # -- readers -----------------------------------------------------------------

    def get_begin(
        self, reader: int, handle: tuple[Any, ...], signature: list[int] | None = None
    ) -> Outcome:
        """`signature`: the one the delivery carries (default: the handle's
        latest issue's; an earlier issue of the same handle, before the
        secret rotated, carries an older one)."""
        handle = tuple(handle)
        signatures = self.driver.signatures
        latest = signatures.get(handle)
        if signature is not None:
            signatures[handle] = signature
        try:
            outcome = self._call("get_begin", reader, handle)
        finally:
            if latest is not None:
                signatures[handle] = latest
        if outcome.status == "ok":
            self.open[reader] = handle
        return self._add("get_begin", outcome, reader, handle)

    def get_copy(self, reader: int, fail: bool = False) -> Outcome:
        outcome = self._call("get_copy", reader, fail=fail)
        if fail and outcome.status == "ok":
            # the injected failure is kept for get_end (refimpl) or raised
            # now (a held get, shmref.store.splitread): in the spec it happens at get_copy
            outcome = Outcome("DeserializeError")
        elif outcome.status == "DeserializeError":
            self.raised_at_copy.add(reader)
        return self._add("get_copy", outcome, reader)

    def get_end(self, reader: int) -> Outcome:
        handle = self.open.pop(reader, ())
        abandon = getattr(self.driver.readers[reader], "abandon", None)
        if reader in self.raised_at_copy and abandon is not None:
            # The seed's get raised in deserialize: the read ended there, with
            # no increment, which the spec logs as get_end DeserializeError.
            self.raised_at_copy.discard(reader)
            abandon()
            return self._add("get_end", Outcome("DeserializeError"), reader, handle=handle)
        self.raised_at_copy.discard(reader)
        outcome = self._call("get_end", reader)
        if outcome.status == "ok":
            return self._add("get_end", outcome, reader, handle=handle, value=outcome.result)
        return self._add("get_end", outcome, reader, handle=handle)


def random_workload(
    rec: Recorder,
    steps: int,
    seed: int,
    keys: tuple[str, ...] = ("a", "b", "c", "d", "e"),
    copy_failures: bool = True,
    keep_a3: bool = True,
) -> None:
    """A seeded random run that keeps to A1 (each delivery is read at most
    once by each reader): puts (some too large), get_cached, touch,
    release_touches, free_unused, clear (even with reads in flight),
    three-step reads interleaved with the writer, and drains (every idle
    reader reads all its mail, so that the ring can empty)."""
    rng = random.Random(seed)
    driver = rec.driver
    writer = driver.writer
    if writer is None:
        raise ValueError("the workload needs a storage driver (storage=True)")
    mail = Mail(rec)
    max_obj = rec.recording().constants["MAX_OBJ"]
    for _ in range(steps):
        roll = rng.random()
        cached = [k for k in keys if writer.is_cached(k)]
        if roll < 0.22:
            key = rng.choice(keys)
            size = rng.randint(1, max_obj + 1)
            next_id = getattr(driver.ring, "monotonic_id_end", None)
            if not keep_a3 or next_id not in mail.outstanding():
                mail.deliver(rec.put(key, size), key)
        elif roll < 0.30 and cached:
            key = rng.choice(cached)
            mail.deliver(rec.get_cached(key), key)
        elif roll < 0.36:
            rec.touch(rng.choice(cached or list(keys)))
        elif roll < 0.40:
            rec.release_touches()
        elif roll < 0.48:
            rec.free_unused()
        elif roll < 0.50:
            rec.clear()
        elif roll < 0.56:  # every idle reader reads all its mail: the ring can empty
            mail.drain()
        else:
            mail.read_on(rng.choice(list(mail.readers)), rng, copy_failures)
    mail.finish()


class Mail:
    """random_workload's readers: each one's deliveries not yet read (each
    with the signature it was issued with: a handle issued again after the
    secret rotated, F4, is another delivery, signed otherwise), the stage of
    its read and the handle of the read in flight."""

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.readers = range(len(rec.driver.readers))
        self.inbox: dict[int, list[tuple[tuple[Any, ...], list[int] | None]]] = {
            r: [] for r in self.readers
        }
        self.stage: dict[int, str] = {r: "idle" for r in self.readers}
        self.flight: dict[int, tuple[Any, ...]] = {}  # reader -> handle of its read in flight

    def deliver(self, outcome: Outcome, key: str) -> None:
        """A handle issued (put, get_cached) is delivered to every reader."""
        if outcome.status == "ok":
            handle = (key, *outcome.result)
            for r in self.readers:
                self.inbox[r].append((handle, self.rec.driver.signatures.get(handle)))

    def outstanding(self) -> set[Any]:
        """The ids of the handles delivered and not yet read, or in flight (A3)."""
        ids = {h[2] for r in self.readers for h, _ in self.inbox[r]}
        return ids | {h[2] for h in self.flight.values()}

    def drain(self) -> None:
        """Every idle reader reads all its mail, each read in its three steps."""
        rec = self.rec
        for r in self.readers:
            while self.stage[r] == "idle" and self.inbox[r]:
                if rec.get_begin(r, *self.inbox[r].pop(0)).status == "ok":
                    rec.get_copy(r)
                    rec.get_end(r)

    def read_on(self, r: int, rng: random.Random, copy_failures: bool) -> None:
        """Reader `r`'s read one step on: begun on a random delivery, copied
        (failing now and then), or ended."""
        rec, stage, inbox = self.rec, self.stage, self.inbox
        if stage[r] == "idle" and inbox[r]:
            handle, signature = inbox[r].pop(rng.randrange(len(inbox[r])))
            stage[r] = "open" if rec.get_begin(r, handle, signature).status == "ok" else "idle"
            if stage[r] == "open":
                self.flight[r] = handle
        elif stage[r] == "open":
            rec.get_copy(r, fail=copy_failures and rng.random() < 0.05)
            stage[r] = "copied"
        elif stage[r] == "copied":
            rec.get_end(r)
            stage[r] = "idle"
            self.flight.pop(r)

    def finish(self) -> None:
        """The reads in flight finished."""
        for r in self.readers:
            if self.stage[r] == "open":
                self.rec.get_copy(r)
                self.stage[r] = "copied"
            if self.stage[r] == "copied":
                self.rec.get_end(r)


# the store a recorded workload runs on: small, so TLC checks it in seconds
WORKLOAD = {"n_units": 8, "n_readers": 2, "id_max": 5, "max_obj": 3}


def record(impl: ModuleType, steps: int, seed: int) -> Recording:
    """A random run of `impl` recorded for trace validation (the workload a
    conformance run records, and `shmref.testing.record`)."""
    with Driver(
        impl,
        WORKLOAD["n_units"],
        n_readers=WORKLOAD["n_readers"],
        id_max=WORKLOAD["id_max"],
        max_obj=WORKLOAD["max_obj"],
    ) as driver:
        recorder = Recorder(driver)
        try:
            random_workload(recorder, steps, seed)
        finally:
            recording = recorder.recording()
    return recording
