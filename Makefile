# shmref: `make check` (TLC on the spec), `make ci` (the tests as CI runs them; `make test`: the quick loop).
PYTHON ?= python3
IMPL ?= refimpl
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: ci wheel-check setup spec-traces spec-checks check spec-record check-deep check-sim test test-slow proofs fuzz bench bench-plots mutation-score conformance seed-snapshot findings findings-check vllm-check lint clean native native-mutants native-conformance rust rust-mutants rust-test rust-conformance ci-time

setup:
	$(PYTHON) -m pip install --quiet -e '.[dev]'
	@command -v java >/dev/null || { \
	  echo "Java not found: installing default-jre-headless"; \
	  (apt-get update -qq && apt-get install -y -qq default-jre-headless) >/dev/null; }
	@command -v chromium >/dev/null || { \
	  echo "Chromium not found: installing chromium (tests/report/test_report_browser.py opens the report in it)"; \
	  (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null \
	  || echo "chromium could not be installed: the browser test will say it is not run"; }

# The TLC output the oracle replays, made once from the spec and shipped in the
# package (spec/traces/, shmref/spec/traces/ in the wheel: each hazard's counterexamples, the simulation
# corpora, MCRing's state graph); a test fails naming this target when the spec
# changed since. ONLY=MCCopyFail remakes one model's entries.
spec-traces: setup
	$(PYTHON) -m shmref.docgen.spec_traces $(foreach name,$(ONLY),--only $(name))

# The spec's checks whose answer depends only on its files: every symmetric
# model's small state graph closed under its SYMMETRY (TLC dumps each), the
# counting invariants inductive and in need of A3 (about 200 CPU seconds),
# kept in spec/checks.json with the SHA-256 of what they read: a test fails
# naming this target when any of them changed since (every check runs again:
# none is kept from the last record). ONLY=MODEL runs one, shown, not recorded.
spec-checks: setup
	$(PYTHON) -m shmref.tlc.checkrecord $(if $(ONLY),--only $(ONLY),--write)

# make check MODEL=MCRing runs one model; what a run measures goes to
# build/tlc/measured.json, and the checkout stays as it was. make spec-record:
# a full run that records the measured states/depth/time in spec/models.toml
# and regenerates spec/README.md's table (tests hold the states to the record).
check: setup
	$(PYTHON) -m shmref check $(if $(MODEL),--only $(MODEL))

spec-record: setup
	$(PYTHON) -m shmref check --record

# The deep profiles (models.toml: deep = true) on TLC's distributed mode:
# a TLCServer and WORKERS local TLCWorkers; workers on other machines join
# with the command it prints (python -m shmref deep --help). check-sim: the
# fast alternative, random behaviours up to DEPTH states.
WORKERS ?= 2
DEPTH ?= 60
check-deep: setup
	$(PYTHON) -m shmref deep --workers $(WORKERS) $(if $(MODEL),--only $(MODEL))

check-sim: setup
	$(PYTHON) -m shmref deep --simulate --depth $(DEPTH) $(if $(MODEL),--only $(MODEL))

# make test: everything but the `slow` tests, on 2 workers (under 5 minutes on
# 2 cores); the conformance CLI runs share one worker (xdist_group), hence
# --dist loadgroup. make test-slow: the `slow` ones (CLI end to end, full fuzz,
# every quick TLC model, CrossHair's long runs; each bounded at 30 min, not the
# plugin's 10: some run the oracle on a store end to end). -m "not tlc": no Java.
# Both print their 15 slowest tests and leave a junit report with each test's
# CPU seconds in $(CI_TIME_DIR) (bench/citime_plugin.py) for `make ci-time`.
PYTEST_WORKERS ?= 2
CI_TIME_DIR ?= build/ci
TIMED = --durations=15 -p bench.citime_plugin --junitxml=$(CI_TIME_DIR)/$@.xml
# In make ci, the suite's state machines on refimpl (their three functions'
# nine tests: about 65 CPU seconds) run once, in the wheel check's full
# oracle run of refimpl: the same tests under the same derandomized profile
# (shmref-ci), so the same examples; make test alone runs them here too.
# tests/tools/test_ci_scripts.py holds each one to a level group (what the
# oracle runs) and the wheel check to that full run.
IN_WHEEL_RUN = shmref/suite/test_stateful.py::test_store_machine[ \
  shmref/suite/test_stateful.py::test_store_machine_from_tlc_traces[ \
  shmref/suite/test_stateful.py::test_store_machine_small_ids[
test: setup lint
	$(PYTHON) -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup -m "not slow" \
	  $(if $(SUITE_IN_WHEEL_RUN),$(foreach node,$(IN_WHEEL_RUN),--deselect '$(node)')) $(TIMED)

test-slow: setup
	$(PYTHON) -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup -m slow --shmref-test-timeout 1800 $(TIMED)

# make ci: what CI runs (.ci/run): lint, then the installed wheel judged from
# an empty folder in the background (most of its time is waiting: for a store
# that hangs, for pip) beside the tests and the slow tier; each step's time
# printed as it ends and all of them at the end (.ci/steps; kept in
# $(CI_TIME_DIR)/steps.tsv, the wheel check's output in $(CI_TIME_DIR)/wheel-check.log).
ci: setup
	MAKE="$(MAKE)" PYTHON=$(PYTHON) CI_TIME_DIR=$(CI_TIME_DIR) SUITE_IN_WHEEL_RUN=1 \
	  bash .ci/steps lint 'wheel-check&' test test-slow

wheel-check: setup
	PYTHON=$(PYTHON) CI_TIME_DIR=$(abspath $(CI_TIME_DIR)) bash .ci/wheel-check

# docs/ci-time.md's tables (and docs/ci-time.json) from what the last `make ci` left
# in $(CI_TIME_DIR): NOTE="2 cores, fresh clone" says how it was measured.
ci-time:
	$(PYTHON) -m bench.citime --build $(CI_TIME_DIR) $(if $(NOTE),--note "$(NOTE)")

proofs: setup
	$(PYTHON) -m proofs --write-record

fuzz: setup
	SHMREF_PROFILE=shmref-long $(PYTHON) -m pytest -q shmref/suite/test_stateful.py shmref/suite/test_replay.py
	$(PYTHON) -m shmref fuzz --impl $(IMPL) --calls 200000 --random
	$(PYTHON) -O -m shmref fuzz --impl $(IMPL) --calls 200000 --random

bench: setup native rust
	$(PYTHON) -m bench

# Measure nothing: README.md's benchmark section (plots, compact tables),
# docs/bench.md (every table) and docs/bench/*.svg from bench/results.json.
bench-plots:
	$(PYTHON) -m bench --report-only bench/results.json --update-readme > /dev/null

# The seed-compatible level's mutation score: small defects in the seed's own
# code, each judged by `pytest --shmref-impl MUTANT -m seed_compatible`
# (ALL=1: every site once, resumable; SHMREF_PROFILE=shmref-baseline skips
# shrinking; then `python -m bench.seedmutants --table`).
mutation-score: setup
	$(PYTHON) -m bench.seedmutants $(if $(ALL),--all --resume --out bench/seed-mutants-full.json,--sample $(or $(SAMPLE),40))

# native_store (examples/native_store/README.md): its C core built in place by
# cffi into examples/native_store/build/; the mutants are the same source with
# one -DNS_MUT_* defect each; native-conformance: the oracle's quick run on it.
NATIVE_PATH := $(CURDIR):$(CURDIR)/examples/native_store
native:
	$(PYTHON) examples/native_store/build.py

native-mutants:
	$(PYTHON) examples/native_store/build.py --mutants

native-conformance: native
	PYTHONPATH=$(NATIVE_PATH) $(PYTHON) -m shmref.conformance --impl native_store --quick \
	  --level seed-compatible --level hardened --level protocol-safe \
	  --out build/conformance/native_store

# rust_store (examples/rust_store/README.md): the seed's writer and reader in
# Rust (std only) behind the process protocol; built offline into
# examples/rust_store/target/ (git-ignored). Without cargo: one line, nothing fails.
# The mutants are the same source with one cargo feature each, side by side in
# examples/rust_store/target/mutants/FEATURE/release/rust_store.
RUST_DIR := examples/rust_store
RUST_MUTANTS := free_without_readers unsigned_count short_header zero_secret uncounted_read
RUST_BIN := $(RUST_DIR)/target/release/rust_store
HAVE_CARGO := $(shell command -v cargo 2>/dev/null)
NO_CARGO := rust_store: cargo not found, the Rust checks are not run (install Rust: https://rustup.rs)
rust:
ifdef HAVE_CARGO
	cargo build --offline --release --quiet --manifest-path $(RUST_DIR)/Cargo.toml
else
	@echo "$(NO_CARGO)"
endif

rust-mutants: rust
ifdef HAVE_CARGO
	@for f in $(RUST_MUTANTS); do \
	  cargo build --offline --release --quiet --manifest-path $(RUST_DIR)/Cargo.toml \
	    --features $$f --target-dir $(RUST_DIR)/target/mutants/$$f || exit 1; \
	  echo "$(RUST_DIR)/target/mutants/$$f/release/rust_store"; \
	done
endif

rust-test:
ifdef HAVE_CARGO
	cargo test --offline --quiet --manifest-path $(RUST_DIR)/Cargo.toml
else
	@echo "$(NO_CARGO)"
endif

# The oracle's three runs: alone, as the writer beside the seed's readers, as
# the readers beside refimpl's writer; each gates on every level with the
# expectations file that lists what it fails on purpose (exit 0 iff every
# result is the one listed: a new failure or an unexpected pass is named).
RUST_EXPECT := $(RUST_DIR)/expectations
rust-conformance: rust
ifdef HAVE_CARGO
	$(PYTHON) -m shmref.conformance --impl exec:$(RUST_BIN) --quick \
	  --expect $(RUST_EXPECT)/alone.toml --out build/conformance/rust_store
	$(PYTHON) -m shmref.conformance --writer exec:$(RUST_BIN) --readers seed --quick \
	  --expect $(RUST_EXPECT)/writer-beside-seed-readers.toml --out build/conformance/rust_store_writer
	$(PYTHON) -m shmref.conformance --writer refimpl --readers exec:$(RUST_BIN) --quick \
	  --expect $(RUST_EXPECT)/readers-beside-refimpl-writer.toml --out build/conformance/rust_store_readers
endif

conformance: setup
	$(PYTHON) -m shmref.conformance --impl $(IMPL)

# The oracle's report on the seed (docs/seed-conformance.json) and FINDINGS.md's
# oracle section from it; a slow test fails when the snapshot is older than the oracle.
seed-snapshot: setup
	$(PYTHON) -m shmref.conformance --impl seed || [ $$? -eq 1 ]  # 1: the seed fails hardened
	$(PYTHON) -m shmref findings --conformance build/conformance/shmref_seed/conformance.json

# FINDINGS.md's generated sections (tables, the audit's coverage, the oracle's report) from
# docs/findings.toml and docs/coverage.toml, and the hazards' pictures (docs/pictures, also in
# spec/README.md) from the shipped counterexamples (make spec-traces);
# CONFORMANCE=build/conformance/shmref_seed/conformance.json refreshes the oracle snapshot.
findings:
	$(PYTHON) -m shmref findings $(if $(CONFORMANCE),--conformance $(CONFORMANCE))

# The same, checking instead of writing: exit 1 if FINDINGS.md is stale or (with
# CONFORMANCE=...) if docs/seed-conformance.json is not that report's summary.
findings-check:
	$(PYTHON) -m shmref findings --check $(if $(CONFORMANCE),--conformance $(CONFORMANCE))

# refimpl beside vLLM's real releases (issue 48): the release VLLM from the registry set up
# under build/vllm/$(VLLM)/ (venv: wheel --no-deps, its requirements, this checkout; the
# sdist's tests), each step skipped when done; then its own tests of shm_object_storage on it
# and with refimpl in its place, the oracle on it, mixed deployments, the seed-findings tests
# with it as the seed. Writes its entry in docs/vllm-check.json (make test checks it is of
# refimpl's current files) and README.md's drop-in block from the record. Exit 1: recorded,
# something short of the bar (named); 2: bad input (one line).
VLLM ?= 0.34.0
vllm-check:
	$(PYTHON) -m vllmcheck --vllm $(VLLM); status=$$?; \
	  [ $$status -eq 2 ] || $(PYTHON) -m vllmcheck --write-docs || status=1; exit $$status

# Every public name (no leading underscore, as ruff decides) of what implementers
# and users call has a docstring: ruff's pydocstyle rules for a missing one, on
# DOCUMENTED only (the one list; tests/tools/test_docstrings.py reads it from here).
# Not selected: D105 (a magic method means what Python says it means) and D107
# (__init__: the class docstring says how one is built).
DOCSTRING_RULES = D100,D101,D102,D103,D104,D106
DOCUMENTED = refimpl shmref/contract.py shmref/testing shmref/calls \
  shmref/__main__.py shmref/conformance.py shmref/oracle/cli.py shmref/pytest_plugin.py \
  shmref/tlc/check.py shmref/tlc/deep.py shmref/docgen/findings.py shmref/fuzzing/fuzz.py \
  shmref/traces/itf_cli.py shmref/docgen/vocabulary_doc.py vllmcheck

# `ruff check .` also holds each function of shmref/ and refimpl/ to a screen's worth of
# statements and branches (pyproject.toml: PLR0915, PLR0912; the exact bound, 80 lines,
# is tests/tools/test_architecture.py's). No dead code: vulture over the same code at 80%
# confidence (unused imports, variables and arguments, unreachable code; an unused
# function is only 60% sure, too often one pytest, Hypothesis or a getattr calls: those
# are swept by hand), with vulture_allowlist.py naming what vulture cannot see used
# (tests/tools/test_lint.py runs this very command on broken inputs).
lint: setup
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m ruff check --select=$(DOCSTRING_RULES) --output-format=full $(DOCUMENTED)
	$(PYTHON) -m vulture --min-confidence 80 shmref refimpl vulture_allowlist.py
	$(PYTHON) -m mypy --strict refimpl shmref vllmcheck examples/native_store/native_store examples/native_store/build.py

clean:
	rm -rf build .hypothesis .pytest_cache
