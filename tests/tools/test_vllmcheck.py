"""`make vllm-check` (vllmcheck/): its record, docs/vllm-check.json, is of
refimpl's current files (a changed copy makes it stale, naming the file);
README.md's drop-in block is the record's; and the driver's parts on inputs
made here, without vLLM: bad input is one line and exit 2, the shm-cache tests
are found by name, junit reports and oracle reports are read, refimpl stands
in for vLLM's module, the offline stand-in replaces the model hub."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from vllmcheck import MODULE, MODULE_FILE, README, RECORD, dropin, ledger
from vllmcheck.fetch import requirements
from vllmcheck.findingruns import node_outcome, verdicts
from vllmcheck.inplace import RefimplInPlace
from vllmcheck.offline import offline_classes
from vllmcheck.oracleruns import judged_mixed, summarize
from vllmcheck.sides import paired_serde, storage_with_default
from vllmcheck.suiteruns import (
    CACHE,
    CACHE_GROUP,
    Outcome,
    cache_tests,
    groups,
    junit_key,
    junit_outcomes,
)

REPO = Path(__file__).resolve().parents[2]


def vllmcheck(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vllmcheck", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(Path.home())},
    )


# -- the record and the README ---------------------------------------------------------------


def test_the_record_is_of_refimpls_current_files() -> None:
    """docs/vllm-check.json, written by `make vllm-check`, holds for refimpl as it is."""
    done = vllmcheck("--check-record")
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(RECORD.read_text())
    for entry in data["releases"].values():
        assert entry["refimpl_sha256"] == ledger.digests()
        for side in ("release", "refimpl"):
            assert entry["tests"][side]["files"], side


def test_a_changed_refimpl_file_makes_the_record_stale(tmp_path: Path) -> None:
    """The broken inputs of the record's check, on a copy of refimpl/."""
    shutil.copytree(REPO / "refimpl", tmp_path / "refimpl", ignore=shutil.ignore_patterns("*.pyc"))
    record = tmp_path / "vllm-check.json"
    assert "cannot be read" in ledger.problem(tmp_path, record)
    record.write_text(json.dumps({"schema": ledger.SCHEMA, "releases": {}}))
    assert "records no release" in ledger.problem(tmp_path, record)
    entry = {"refimpl_sha256": ledger.digests(tmp_path)}
    ledger.store("0.34.0", entry, record)
    ledger.store("0.32.0", {"refimpl_sha256": {}}, record)
    assert list(json.loads(record.read_text())["releases"]) == ["0.34.0", "0.32.0"]
    assert "stale for vLLM 0.32.0" in ledger.problem(tmp_path, record)
    assert "make vllm-check VLLM=0.32.0" in ledger.problem(tmp_path, record)
    ledger.store("0.32.0", entry, record)
    assert ledger.problem(tmp_path, record) == ""
    serde = tmp_path / "refimpl" / "serde.py"
    serde.write_text(serde.read_text() + "\n# edited\n")
    said = ledger.problem(tmp_path, record)
    assert "stale for vLLM 0.34.0: refimpl/serde.py changed since" in said
    assert said.endswith("run `make vllm-check`")
    serde.unlink()
    (tmp_path / "refimpl" / "extra.py").write_text("x = 1\n")
    assert "refimpl/extra.py, refimpl/serde.py changed" in ledger.problem(tmp_path, record)


def test_the_readmes_dropin_block_is_the_records() -> None:
    """`python -m vllmcheck --write-docs` has been run since the record changed."""
    doc = README.read_text()
    assert dropin.render(doc, ledger.load()) == doc, "run: python -m vllmcheck --write-docs"
    assert doc.count(dropin.BEGIN) == 1


def test_a_stale_or_missing_readme_block_is_caught() -> None:
    data = ledger.load()
    doc = f"intro\n{dropin.BEGIN}\nold words\n{dropin.END}\nrest\n"
    made = dropin.render(doc, data)
    assert made != doc and "old words" not in made and made.endswith(f"{dropin.END}\nrest\n")
    assert dropin.render(made, data) == made
    with pytest.raises(dropin.DocError, match="exactly one"):
        dropin.render("no block here\n", data)
    assert "No vLLM release" in dropin.block({"releases": {}})


# -- bad input: one line, exit 2 ------------------------------------------------------------


def fake_wheel(folder: Path, release: str, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"vllm-{release}-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    (folder / f"vllm-{release}.tar.gz").write_bytes(b"")
    return wheel


def one_line_exit_2(done: subprocess.CompletedProcess[str], says: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert says in done.stderr, done.stderr


def test_an_unknown_release_or_no_registry_is_one_line(tmp_path: Path) -> None:
    index = tmp_path / "simple"
    (index / "vllm").mkdir(parents=True)
    (index / "vllm" / "index.html").write_text(
        '<a href="../../files/vllm-0.34.0.tar.gz#sha256=00">vllm-0.34.0.tar.gz</a>\n'
    )
    args = ["--build", str(tmp_path / "build"), "--index", f"file://{index}"]
    one_line_exit_2(vllmcheck("--vllm", "9.9.9", *args), "vLLM 9.9.9 is not in the registry")
    assert not (tmp_path / "build" / "9.9.9").exists()
    nowhere = ["--build", str(tmp_path / "build"), "--index", f"file://{tmp_path}/none"]
    one_line_exit_2(vllmcheck("--vllm", "0.34.0", *nowhere), "no registry reachable")
    one_line_exit_2(vllmcheck("--vllm", "latest; rm", *args), "is not a release number")


def test_a_release_without_the_module_is_named(tmp_path: Path) -> None:
    fake_wheel(tmp_path / "build" / "0.10.0", "0.10.0", {"vllm/__init__.py": ""})
    done = vllmcheck("--vllm", "0.10.0", "--build", str(tmp_path / "build"))
    one_line_exit_2(done, "vLLM 0.10.0 has no shm_object_storage")


def test_the_requirements_leave_out_extras_and_what_is_not_served(tmp_path: Path) -> None:
    metadata = "\n".join(
        [
            "Name: vllm",
            "Requires-Dist: torch==2.14.0",
            "Requires-Dist: flashinfer-python==0.7.3",
            'Requires-Dist: numba==0.65.0; python_version == "3.11"',
            'Requires-Dist: ray[cgraph]>=2.48; extra == "ray"',
        ]
    )
    wheel = fake_wheel(tmp_path, "1.0", {"vllm-1.0.dist-info/METADATA": metadata})
    assert requirements(wheel) == (
        ["torch==2.14.0", 'numba==0.65.0; python_version == "3.11"'],
        ["flashinfer-python==0.7.3"],
    )


# -- the release's tests --------------------------------------------------------------------


def test_the_shm_cache_tests_are_found_by_the_classes_they_build(tmp_path: Path) -> None:
    source = (
        "def _helper():\n    return ShmObjectStoreSenderCache(None)\n"
        "def test_lru():\n    LruCache()\n"
        "def test_sender():\n    ShmObjectStoreSenderCache(cfg)\n"
        "async def test_both():\n    x = ShmObjectStoreReceiverCache(cfg, lock)\n"
    )
    assert cache_tests(source) == ["test_sender", "test_both"]
    (tmp_path / "tests" / "multimodal").mkdir(parents=True)
    (tmp_path / CACHE).write_text(source)
    planned, missing = groups(tmp_path)
    assert missing == [
        "tests/distributed/test_shm_buffer.py",
        "tests/distributed/test_shm_storage.py",
    ]
    assert planned == {CACHE_GROUP: [[f"{CACHE}::test_sender"], [f"{CACHE}::test_both"]]}


def test_a_junit_report_gives_each_test_and_its_first_line(tmp_path: Path) -> None:
    report = tmp_path / "r.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.distributed.test_shm_storage.TestStore" name="test_a"/>'
        '<testcase classname="tests.multimodal.test_cache" name="test_b">'
        '<properties><property name="stand-in" value="ModelConfig -&gt; stub"/></properties>'
        '<failure message="ValueError: no&#10;second line">trace</failure></testcase>'
        '<testcase classname="tests.multimodal.test_cache" name="test_c">'
        '<error message="">\n\nE   boom\nmore</error></testcase>'
        "</testsuite></testsuites>"
    )
    found = [(o.test, o.status, o.first_line, o.notes) for o in junit_outcomes(report)]
    assert found == [
        ("TestStore::test_a", "pass", "", []),
        ("test_b", "fail", "ValueError: no", ["stand-in: ModelConfig -> stub"]),
        ("test_c", "error", "E   boom", []),
    ]
    assert junit_key("tests/findings/test_x.py::TestA::test_b[1]") == (
        "tests.findings.test_x.TestA",
        "test_b[1]",
    )


def test_refimpl_stands_in_for_vllms_module() -> None:
    finder = RefimplInPlace()
    assert finder.find_spec("vllm.other", None) is None
    spec = finder.find_spec(MODULE, None)
    assert spec is not None and spec.origin == "refimpl"
    module = ModuleType(MODULE)
    finder.exec_module(module)
    import refimpl

    assert module.SingleWriterShmObjectStorage is refimpl.SingleWriterShmObjectStorage
    assert module.__all__ == list(refimpl.__all__)
    assert MODULE_FILE.endswith("device_communicators/shm_object_storage.py")


def test_the_offline_stand_in_takes_the_multimodal_options() -> None:
    @dataclasses.dataclass
    class MultiModalConfig:
        mm_processor_cache_gb: float = 4
        mm_shm_cache_max_object_size_mb: int = 128

    class _StubModelConfig:
        def __init__(self, mm_processor_cache_gb: float) -> None:
            self._mm_config = MultiModalConfig(mm_processor_cache_gb=mm_processor_cache_gb)

        def get_multimodal_config(self) -> MultiModalConfig:
            return self._mm_config

    module = SimpleNamespace(
        _StubModelConfig=_StubModelConfig,
        MultiModalConfig=MultiModalConfig,
        VllmConfig=lambda **kw: ("real", kw),
    )
    used: list[str] = []
    model_config, vllm_config = offline_classes(module, used)  # type: ignore[arg-type]
    made = model_config(model="hub/model", mm_shm_cache_max_object_size_mb=1, trust=True)
    assert isinstance(made, _StubModelConfig)
    assert made.get_multimodal_config() == MultiModalConfig(4, 1)
    assert used == ["ModelConfig('hub/model') -> _StubModelConfig"]
    config = vllm_config(model_config=made)
    assert config.parallel_config.world_size == 1 and config.model_config is made
    assert vllm_config(model_config="other") == ("real", {"model_config": "other"})


def test_a_side_writes_with_one_serde_and_reads_with_another() -> None:
    import refimpl

    class Tagged(refimpl.MsgpackSerde):
        def deserialize(self, data: Any) -> Any:
            return ("tagged", super().deserialize(data))

    pair = paired_serde("somewhere", refimpl.MsgpackSerde, Tagged)
    assert (pair.__module__, pair.__qualname__) == ("somewhere", "MsgpackSerde")
    serde = pair()
    payload, _size, header, _md = serde.serialize([1, "a"])
    parts = payload if isinstance(payload, list) else [payload]
    data = memoryview(bytes(header) + b"".join(bytes(p) for p in parts))
    assert serde.deserialize(data) == ("tagged", [1, "a"])
    storage = storage_with_default("somewhere", refimpl.SingleWriterShmObjectStorage, pair)
    import inspect

    assert inspect.signature(storage).parameters["serde_class"].default is pair
    assert issubclass(storage, refimpl.SingleWriterShmObjectStorage)


# -- what the oracle and the findings runs report -------------------------------------------


def test_an_oracle_report_is_summed_up_against_the_seed() -> None:
    def check(name: str, status: str, seed: str) -> dict[str, str]:
        return {"name": name, "status": status, "seed": seed}

    report = {
        "ok": False,
        "quick": False,
        "seconds": 9.5,
        "levels": {
            "seed-compatible": {
                "status": "pass",
                "seed": "pass",
                "checks": [check("a", "pass", "pass"), check("b", "FAIL", "pass")],
            },
            "seed-layout": {
                "status": "FAIL",
                "seed": "pass",
                "checks": [check("c", "pass", "FAIL"), check("d", "skip", "absent")],
            },
        },
    }
    summary = summarize(report)
    assert (summary["properties"], summary["seed_status"]) == (4, 1)
    assert summary["worse"] == ["seed-compatible: b (FAIL; seed: pass)"]
    assert summary["better"] == ["seed-layout: c (pass; seed: FAIL)"]
    assert summary["other"] == ["seed-layout: d (skip; seed: absent)"]
    assert judged_mixed("m", summary) == [
        "m: seed-layout FAIL",
        "m: 1 properties worse than the seed's",
    ]
    assert judged_mixed("m", {"error": "exit 2: no"}) == ["m: exit 2: no"]


def test_a_finding_is_reproduced_when_each_of_its_seed_tests_passes() -> None:
    tests = {"1": ("one", ["f.py::a", "f.py::b"]), "2": ("two", ["f.py::c"]), "3": ("three", [])}
    outcomes = {"f.py::a": ("pass", ""), "f.py::b": ("pass", ""), "f.py::c": ("fail", "no")}
    said = verdicts(tests, outcomes)
    assert said["reproduced"] == ["1"]
    assert said["not_reproduced"] == [
        {"id": "2", "title": "two", "tests": [{"test": "c", "status": "fail", "first_line": "no"}]}
    ]
    assert [f["id"] for f in said["not_judged"]] == ["3"]


def test_a_parametrized_seed_test_passes_when_each_of_its_cases_does() -> None:
    where = "tests.findings.test_x"
    cases = [
        Outcome("test_a[1]", "pass", classname=where),
        Outcome("test_a[2]", "fail", "AssertionError: no", classname=where),
        Outcome("test_ab", "pass", classname=where),
        Outcome("TestK::test_c", "pass", classname=where + ".TestK"),
    ]
    assert node_outcome("tests/findings/test_x.py::test_a", cases) == ("fail", "AssertionError: no")
    assert node_outcome("tests/findings/test_x.py::test_a[1]", cases) == ("pass", "")
    assert node_outcome("tests/findings/test_x.py::test_ab", cases) == ("pass", "")
    assert node_outcome("tests/findings/test_x.py::TestK::test_c", cases) == ("pass", "")
    assert node_outcome("tests/findings/test_y.py::test_a", cases) == ("not run", "")
