"""shmref.core.vocabulary: the one table of actions and outcomes agrees with the
spec, the Driver and DESIGN.md, and outcomes are named by exception type and
step, never by message text (each check is shown to catch a broken input)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import refimpl
from shmref.contract import MissingCapability
from shmref.core import vocabulary
from shmref.core.paths import SPEC_DIR
from shmref.core.vocabulary import HandleRejected, InjectedCopyFailure, classify
from shmref.docgen import vocabulary_doc
from shmref.seed.impl import load_impl
from shmref.store.driver import Driver
from shmref.traces import itf_schema
from shmref.traces.recording import Recorder
from shmref.traces.replay import step_call

REPO = Path(__file__).resolve().parents[2]


# -- the table against DESIGN.md, the spec and the Driver ------------------------------


def test_design_md_shows_the_generated_tables() -> None:
    shown = vocabulary_doc.documented_section((REPO / "DESIGN.md").read_text())
    assert shown is not None, "DESIGN.md lacks the vocabulary markers"
    assert shown.strip() == vocabulary_doc.markdown().strip(), (
        "DESIGN.md is stale: paste `python -m shmref vocabulary --markdown` between the markers"
    )


def test_a_stale_design_md_is_detected() -> None:
    text = (REPO / "DESIGN.md").read_text()
    stale = text.replace("| `get_copy` | reader |", "| `get_copy` | writer |")
    assert stale != text
    assert vocabulary_doc.documented_section(stale) != vocabulary_doc.markdown()
    assert vocabulary_doc.documented_section("no markers here") is None


def test_every_spec_action_is_in_the_table_and_nothing_more() -> None:
    assert vocabulary.spec_problems(SPEC_DIR) == []
    assert vocabulary.table_problems() == []
    # the ITF schema is the same table: exactly the names the spec logs
    assert set(itf_schema.ACTION_FIELDS) == set(vocabulary.names_in_spec(SPEC_DIR))


def test_an_action_the_table_lacks_is_reported(tmp_path: Path) -> None:
    for path in SPEC_DIR.glob("*.tla"):
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "Evict.tla").write_text(
        "---- MODULE Evict ----\n"
        '\\* name |-> "commented" is no action\n'
        'Evict == last_action\' = [name |-> "evict", outcome |-> "ok"]\n'
        "====\n"
    )
    problems = vocabulary.spec_problems(tmp_path)
    assert problems == ["spec action 'evict' (Evict.tla) is not in the vocabulary"]
    lacking = tuple(a for a in vocabulary.ACTIONS if a.name != "get_copy")
    assert any("'get_copy'" in p for p in vocabulary.spec_problems(SPEC_DIR, lacking))


def test_a_wrong_spec_module_or_a_duplicate_is_reported() -> None:
    wrong = tuple(
        replace(a, spec=("StorageWriter.tla",)) if a.name == "get_end" else a
        for a in vocabulary.ACTIONS
    )
    problems = vocabulary.spec_problems(SPEC_DIR, wrong)
    assert any("'get_end'" in p and "StorageReader.tla" in p for p in problems), problems
    twice = (*vocabulary.ACTIONS, vocabulary.action("put"))
    assert vocabulary.table_problems(twice) == ["action 'put' is in the table twice"]
    odd = (vocabulary.Action("x", "cook", (), (), (), ("burnt",), ""),)
    assert vocabulary.table_problems(odd) == [
        "action 'x': unknown actor 'cook'",
        "action 'x': unknown outcome 'burnt'",
    ]


def test_driver_methods_take_the_tables_arguments() -> None:
    assert vocabulary.driver_problems(Driver) == []

    class Lacking:
        def put(self, key: str, size: int) -> None: ...

        def get_copy(self, reader: int) -> None: ...  # no `fail`

    problems = vocabulary.driver_problems(
        Lacking, [vocabulary.action(n) for n in ("put", "get_copy", "touch")]
    )
    assert len(problems) == 2
    assert "Lacking.get_copy" in problems[0] and "('reader', 'fail')" in problems[0]
    assert "Lacking.touch does not exist" in problems[1]


def test_check_and_markdown_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert vocabulary_doc.main(["--check"]) == 0
    assert "all consistent" in capsys.readouterr().out
    assert vocabulary_doc.main(["--markdown"]) == 0
    assert capsys.readouterr().out == vocabulary_doc.markdown()


def test_lookups_name_what_is_unknown() -> None:
    with pytest.raises(vocabulary.UnknownAction, match="'evict' is no action"):
        vocabulary.action("evict")
    with pytest.raises(ValueError, match="'lost' is no outcome"):
        vocabulary.outcome_type("lost")
    with pytest.raises(ValueError, match="trace step 'evict' has no implementation action"):
        step_call({"name": "evict"}, [])
    assert vocabulary.outcome_type("rejected") is HandleRejected
    assert vocabulary.exception_named("InjectedCopyFailure") is InjectedCopyFailure
    assert vocabulary.exception_named("SystemExit") is None


def test_step_call_is_the_tables_lookup() -> None:
    readers = ["r1", "r2"]
    assert step_call({"name": "put", "key": "a", "size": 2, "outcome": "ok"}, readers) == (
        "put",
        ("a", 2),
        {},
    )
    assert step_call({"name": "get_begin", "reader": "r2", "handle": ["a", 0, 1]}, readers) == (
        "get_begin",
        (1, ("a", 0, 1)),
        {},
    )
    failing = {"name": "get_copy", "reader": "r1", "outcome": "DeserializeError"}
    assert step_call(failing, readers) == ("get_copy", (0,), {"fail": True})
    assert step_call({"name": "drop_delivery", "reader": "r1", "handle": ()}, readers) is None


# -- outcomes: by type and step, never by text ------------------------------------------


def test_classify_ignores_the_message() -> None:
    # a stale read whose message talks of signatures is still stale ...
    assert classify("get_begin", ValueError("Invalid SHM handle signature")) == "stale"
    # ... a refused signature is the oracle's type, whatever it says
    assert classify("get_begin", HandleRejected("nope")) == "rejected"
    assert classify("reader_touch", HandleRejected("nope")) == "rejected"
    # the injected failure is a type, not the words
    assert classify("get_end", InjectedCopyFailure("x")) == "DeserializeError"
    assert classify("get_copy", ValueError("injected deserialize failure")) == "stale"
    # a ValueError of a call that is no read is a ValueError (subclasses too)
    assert classify("put", ValueError("signature")) == "ValueError"
    assert classify("put", refimpl.validate.BadArgumentType("key")) == "ValueError"
    assert classify("put", MemoryError()) == "MemoryError"
    assert classify("free_unused", KeyError(3)) == "KeyError"
    assert classify("writer_get", ValueError("modified")) == "stale"
    assert vocabulary.documented_kind(refimpl.validate.BadArgumentType("k")) == "ValueError"
    assert vocabulary.documented_kind(TypeError("k")) == "TypeError"


def test_an_exception_of_no_outcomes_type_is_named_by_its_class() -> None:
    """What the contract does not name is an outcome no spec step shows: its
    class name, with its module when the name is an outcome's (a store's own
    DeserializeError is not the injected failure)."""

    class DeserializeError(Exception):  # noqa: N818 - named as the outcome on purpose
        pass

    assert classify("get_copy", TypeError("x")) == "TypeError"
    assert classify("put", RuntimeError("x")) == "RuntimeError"
    assert classify("get_copy", DeserializeError()) == f"{__name__}.DeserializeError"
    assert vocabulary.is_undocumented("UnpicklingError")
    assert vocabulary.is_undocumented(f"{__name__}.DeserializeError")
    for name in ("DeserializeError", "stale", "ok", "no such thing", "", 3, None):
        assert not vocabulary.is_undocumented(name), name


class _Muffled:
    """Wraps a storage; every ValueError of a read's checks gets one message
    that names neither a signature nor an id (and `verify_signature` may be
    hidden), so only the step can tell a forged handle from a stale one."""

    MESSAGE = "handle refused"

    def __init__(self, inner: Any, hide_verify: bool) -> None:
        self.inner = inner
        self.hide_verify = hide_verify

    def __getattr__(self, name: str) -> Any:
        if name == "verify_signature" and self.hide_verify:
            raise AttributeError(name)
        attr = getattr(self.inner, name)
        if name not in ("verify_signature", "get_begin", "touch", "get") or not callable(attr):
            return attr

        def muffled(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            except ValueError:
                raise ValueError(self.MESSAGE) from None

        return muffled


def muffled(impl: ModuleType, hide_verify: bool = False) -> ModuleType:
    class Storage:
        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            return _Muffled(impl.SingleWriterShmObjectStorage(*args, **kwargs), hide_verify)

        @staticmethod
        def create_from_handle(handle: Any) -> Any:
            inner = impl.SingleWriterShmObjectStorage.create_from_handle(handle)
            return _Muffled(inner, hide_verify)

    module = ModuleType(f"muffled_{impl.__name__}")
    module.SingleWriterShmRingBuffer = impl.SingleWriterShmRingBuffer  # type: ignore[attr-defined]
    module.SingleWriterShmObjectStorage = Storage  # type: ignore[attr-defined]
    return module


def forged_then_stale(driver: Driver) -> list[str]:
    """Outcomes of: a forged handle's read, a valid read, and the read of
    that handle after its chunk was freed and reused by another key."""
    put = driver.put("a", 2)
    assert put.status == "ok", put
    handle = ("a", *put.result)
    statuses = [driver.get_begin(0, ("a", handle[1], handle[2] + 1)).status]
    statuses += [driver.get_begin(0, handle).status, driver.get_copy(0).status]
    statuses += [driver.get_end(0).status, driver.free_unused().status]
    again = driver.put("b", 2)
    assert again.result[0] == put.result[0], "the emptied ring did not start again at 0"
    statuses += [driver.get_begin(0, handle).status, driver.reader_touch(0, handle).status]
    statuses.append(driver.reader_touch(0, ("zz", 0, 0)).status)
    return statuses


@pytest.mark.parametrize("name", ["refimpl", "seed"])
def test_rejected_and_stale_are_told_apart_by_step_not_text(name: str) -> None:
    impl = muffled(load_impl(name))
    with Driver(impl, 8, n_readers=1, id_max=5, max_obj=3) as driver:
        assert forged_then_stale(driver) == [
            "rejected",
            "ok",
            "ok",
            "ok",
            "ok",
            "stale",
            "stale",
            "rejected",
        ]


def test_a_refusal_without_verify_signature_is_a_missing_capability() -> None:
    with Driver(muffled(refimpl, hide_verify=True), 8, n_readers=1, id_max=5, max_obj=3) as d:
        put = d.put("a", 2)
        with pytest.raises(MissingCapability, match="storage.verify_signature"):
            d.get_begin(0, ("a", put.result[0], put.result[1] + 1))
        assert d.get_begin(0, ("a", *put.result)).status == "ok"  # a good read still works
        assert d.get_copy(0).status == "ok" and d.get_end(0).status == "ok"


@pytest.mark.parametrize("name", ["refimpl", "seed"])
def test_the_injected_copy_failure_is_our_own_type(name: str) -> None:
    with Driver(load_impl(name), 8, n_readers=1, id_max=5, max_obj=3) as driver:
        put = driver.put("a", 2)
        assert driver.get_begin(0, ("a", *put.result)).status == "ok"
        copy, end = driver.get_copy(0, fail=True), driver.get_end(0)
        # refimpl keeps the failure for get_end (its read is still counted);
        # the seed's composed read raises it at the copy
        expected = ("ok", "DeserializeError") if name == "refimpl" else ("DeserializeError",)
        assert (copy.status, end.status)[: len(expected)] == expected


def test_the_recorder_logs_the_tables_fields() -> None:
    with Driver(refimpl, 8, n_readers=1, id_max=5, max_obj=3) as driver:
        rec = Recorder(driver)
        rec.put("a", 2)
        rec.get_begin(0, ("a", 0, 0))
        log = rec.recording().log
        assert list(log[0]) == ["name", "key", "size", "handle", "outcome"]
        assert list(log[1]) == ["name", "reader", "handle", "outcome"]
        with pytest.raises(ValueError, match="do not fit"):
            rec._add("touch", rec.driver.touch("a"))  # touch's argument `key` is missing
        with pytest.raises(ValueError, match="calls nothing"):
            rec._call("drop_delivery", 0, ())


# -- docs/itf.md's action table (hand-written for harness authors) ---------------------


def itf_doc_rows(text: str) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """name -> (fields, outcomes) of the `| name | fields | outcomes | call |` table."""
    rows: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    header = "| `name` | fields | outcomes | the call (bytes) |"
    body = text.split(header, 1)[1].split("\n\n", 1)[0]
    for line in body.splitlines()[2:]:
        cells = [c.strip() for c in line.strip()[1:-1].split("|")]
        name = cells[0].split()[0].strip("`")

        def names(cell: str) -> tuple[str, ...]:
            return tuple(n.strip().strip("`") for n in cell.split(",") if n.strip())

        rows[name] = (names(cells[1]), names(cells[2]))
    return rows


def table_rows() -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    return {a.name: (a.fields, a.outcomes) for a in vocabulary.spec_actions()}


def test_itf_doc_lists_the_tables_actions_fields_and_outcomes() -> None:
    text = (REPO / "docs" / "itf.md").read_text()
    assert itf_doc_rows(text) == table_rows()
    broken = text.replace(
        "| `get_copy` | `reader` | `ok`, `DeserializeError` |", "| `get_copy` | `reader` | `ok` |"
    )
    assert broken != text and itf_doc_rows(broken) != table_rows()
