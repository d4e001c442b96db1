"""spec/models.toml: the one list of TLC models, read by `python -m shmref check`.

Each entry says what a model must do (pass, or violate a named property),
whether it is in the quick profile, its bounds and why, the code it
describes, and its last measured distinct states, depth and time.  `make
check` (``--record``) rewrites the measured values in place (tomlkit keeps
the comments) and regenerates spec/README.md's models table between the
markers below, so the table cannot drift from the manifest.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tabulate import tabulate  # type: ignore[import-untyped]

PASS = "pass"
INVARIANT = "invariant"
LIVENESS = "liveness"
EXPECTS = (PASS, INVARIANT, LIVENESS)

TABLE_BEGIN = "<!-- models table: generated from spec/models.toml by `make spec-record` -->"
TABLE_END = "<!-- end of models table -->"


class ManifestError(Exception):
    """The manifest is missing or malformed; the message is one line naming the file."""


@dataclass(frozen=True)
class Measured:
    distinct: int | None = None
    depth: int | None = None
    seconds: float | None = None
    workers: int | None = None  # TLC workers of the recorded run (deep: distributed workers)


@dataclass(frozen=True)
class Model:
    """One TLC model and what it must do."""

    name: str
    expect: str  # PASS, INVARIANT or LIVENESS
    prop: str | None  # the invariant / temporal property that must fail
    quick: bool  # part of --quick
    what: str  # one line: what the model checks
    code: str = ""  # the code it describes: seed or refimpl, which switches
    bounds: str = ""
    why: str = ""  # why these bounds, what they weaken
    module: str = ""  # spec/<module>.tla (default: name)
    cfg: str = ""  # spec/<cfg> (default: <name>.cfg)
    deadlock: str | None = None  # why TLC runs with -deadlock; None: deadlock is checked
    deep: bool = False  # a deep profile: `make check-deep` only, not `make check`
    measured: Measured = Measured()

    @property
    def expected_text(self) -> str:
        return "pass" if self.expect == PASS else f"FAIL {self.prop}"

    @property
    def tla_file(self) -> str:
        return f"{self.module or self.name}.tla"

    @property
    def cfg_file(self) -> str:
        return self.cfg or f"{self.name}.cfg"


@dataclass(frozen=True)
class CheckRun:
    """The last full `make check` (every model but the deep ones): its wall time."""

    models: int
    seconds: float
    jobs: int
    cores: int

    def line(self) -> str:
        return (
            f"Last full `make spec-record`: {self.models} models in "
            f"{self.seconds:.0f} s of wall time, {self.jobs} at a time on {self.cores} cores."
        )


@dataclass(frozen=True)
class Manifest:
    path: Path
    tolerance: float  # relative: a measured state count may differ by this much
    modules: tuple[str, ...]  # spec modules that are not models (RingBuffer, ...)
    models: tuple[Model, ...]
    check: CheckRun | None = None

    def named_files(self) -> set[str]:
        files = {f"{m}.tla" for m in self.modules}
        for model in self.models:
            files |= {model.tla_file, model.cfg_file}
        return files


def _model(path: Path, index: int, entry: Mapping[str, Any]) -> Model:
    where = f"{path}: model #{index + 1}"
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ManifestError(f"{where}: missing 'name'")
    expect = entry.get("expect")
    if expect not in EXPECTS:
        raise ManifestError(f"{where} ({name}): 'expect' must be one of {', '.join(EXPECTS)}")
    prop = entry.get("property")
    if (expect == PASS) != (prop is None):
        raise ManifestError(f"{where} ({name}): 'property' is required exactly for hazards")
    measured = entry.get("measured", {})
    try:
        return Model(
            name=name,
            expect=expect,
            prop=prop,
            quick=bool(entry.get("quick", False)),
            what=str(entry.get("what", "")),
            code=str(entry.get("code", "")),
            bounds=str(entry.get("bounds", "")),
            why=str(entry.get("why", "")),
            module=str(entry.get("module", "")),
            cfg=str(entry.get("cfg", "")),
            deadlock=entry.get("deadlock"),
            deep=bool(entry.get("deep", False)),
            measured=Measured(**measured),
        )
    except TypeError as exc:
        raise ManifestError(f"{where} ({name}): bad 'measured' table: {exc}") from None


def load_manifest(path: Path) -> Manifest:
    """Read spec/models.toml; ManifestError (one line) when it is unusable."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path}: {exc}") from None
    entries = data.get("model", [])
    models = tuple(_model(path, i, e) for i, e in enumerate(entries))
    names = [m.name for m in models]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ManifestError(f"{path}: model named twice: {', '.join(duplicates)}")
    try:
        check = CheckRun(**data["check"]) if "check" in data else None
    except TypeError as exc:
        raise ManifestError(f"{path}: bad 'check' table: {exc}") from None
    return Manifest(
        path=path,
        tolerance=float(data.get("tolerance", 0.05)),
        modules=tuple(data.get("modules", ())),
        models=models,
        check=check,
    )


def record(manifest: Manifest, runs: Iterable[tuple[str, Measured]]) -> Manifest:
    """Write the measured values of `runs` (model name, measurement) into the manifest file."""
    doc = tomlkit.parse(manifest.path.read_text())
    by_name = {entry["name"]: entry for entry in doc["model"]}
    for name, measured in runs:
        table = tomlkit.table()
        table.add("distinct", measured.distinct)
        table.add("depth", measured.depth)
        table.add("seconds", round(measured.seconds or 0.0, 1))
        if measured.workers is not None:
            table.add("workers", measured.workers)
        by_name[name]["measured"] = table
    manifest.path.write_text(tomlkit.dumps(doc))
    return load_manifest(manifest.path)


def record_check(manifest: Manifest, run: CheckRun) -> Manifest:
    """Write the wall time of a full `make check` into the manifest file."""
    doc = tomlkit.parse(manifest.path.read_text())
    table = tomlkit.table()
    table.add("models", run.models)
    table.add("seconds", round(run.seconds, 1))
    table.add("jobs", run.jobs)
    table.add("cores", run.cores)
    doc["check"] = table
    manifest.path.write_text(tomlkit.dumps(doc))
    return load_manifest(manifest.path)


def _count(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def models_table(models: Iterable[Model], check: CheckRun | None = None) -> str:
    """spec/README.md's models table (GitHub Markdown), and the last full run's time."""
    rows = [
        (
            m.name,
            m.code,
            m.bounds,
            m.expected_text,
            _count(m.measured.distinct),
            _count(m.measured.depth),
            "-" if m.measured.seconds is None else f"{m.measured.seconds:.0f} s",
            "-" if m.measured.workers is None else str(m.measured.workers),
        )
        for m in models
    ]
    header = (
        "model",
        "code it describes",
        "bounds",
        "expected",
        "distinct",
        "depth",
        "time",
        "workers",
    )
    table = str(tabulate(rows, headers=header, tablefmt="github"))
    return table if check is None else f"{table}\n\n{check.line()}"


def regenerate_readme(readme: Path, models: Iterable[Model], check: CheckRun | None = None) -> None:
    """Replace the text between the table markers with the generated table."""
    text = readme.read_text()
    try:
        head, rest = text.split(TABLE_BEGIN, 1)
        _, tail = rest.split(TABLE_END, 1)
    except ValueError:
        raise ManifestError(f"{readme}: models table markers not found") from None
    table = models_table(models, check)
    readme.write_text(f"{head}{TABLE_BEGIN}\n{table}\n{TABLE_END}{tail}")


def drift(model: Model, distinct: int | None, tolerance: float) -> str | None:
    """Why a run's distinct-state count disagrees with the manifest, or None.

    Only must-pass models: a hazard model's search stops at its first
    counterexample, and where that is found varies with the TLC workers.
    """
    if model.expect != PASS:
        return None
    expected = model.measured.distinct
    if expected is None or distinct is None:
        return f"{model.name}: no distinct-state count (manifest {expected}, run {distinct})"
    if abs(distinct - expected) > tolerance * expected:
        return (
            f"{model.name}: {distinct:,} distinct states, the manifest says {expected:,} "
            f"(tolerance {tolerance:.0%}): run `make spec-record` to record, or fix the model"
        )
    return None


def unnamed_files(spec_dir: Path, manifest: Manifest) -> list[str]:
    """The .tla/.cfg files in spec_dir that the manifest does not name."""
    present = {p.name for p in spec_dir.iterdir() if p.suffix in (".tla", ".cfg")}
    return sorted(present - manifest.named_files())


def model_files(name: str, spec_dir: Path) -> tuple[Path, Path]:
    """The module and cfg TLC runs for model `name`, from spec_dir's manifest.

    Several models share one module (MCRing.tla, MCStorage.tla), so a model's
    module is not `<name>.tla`; its cfg is.  ManifestError when the manifest
    does not name the model.
    """
    manifest = load_manifest(spec_dir / "models.toml")
    for model in manifest.models:
        if model.name == name:
            return spec_dir / model.tla_file, spec_dir / model.cfg_file
    raise ManifestError(f"{spec_dir / 'models.toml'}: no model {name}")


def _strip_comments(text: str) -> str:
    """TLA+ text without `\\*` line comments and (nested) `(* *)` comments."""
    out: list[str] = []
    depth = 0
    i = 0
    while i < len(text):
        pair = text[i : i + 2]
        if pair == "(*":
            depth += 1
            i += 2
        elif pair == "*)" and depth:
            depth -= 1
            i += 2
        elif depth:
            i += 1
        elif pair == "\\*":
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def module_body(text: str) -> str:
    """A module's text between its MODULE line and its closing `====`, without
    comments and with whitespace collapsed: what two model modules would share
    if one duplicated the other."""
    body = _strip_comments(text)
    lines = body.splitlines()
    start = next((i + 1 for i, line in enumerate(lines) if "MODULE" in line), 0)
    kept = [line for line in lines[start:] if not line.strip().startswith("====")]
    return " ".join(" ".join(kept).split())


def duplicate_bodies(spec_dir: Path) -> list[tuple[str, str]]:
    """Pairs of MC*.tla modules whose bodies (module_body) are the same."""
    seen: dict[str, str] = {}
    pairs: list[tuple[str, str]] = []
    for path in sorted(spec_dir.glob("MC*.tla")):
        body = module_body(path.read_text())
        if body in seen:
            pairs.append((seen[body], path.name))
        else:
            seen[body] = path.name
    return pairs


def long_modules(spec_dir: Path, limit: int) -> list[tuple[str, int]]:
    """The .tla modules in spec_dir longer than `limit` lines, with their length."""
    lengths = ((p.name, len(p.read_text().splitlines())) for p in sorted(spec_dir.glob("*.tla")))
    return [(name, n) for name, n in lengths if n > limit]
