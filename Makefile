# shmref: `make check` (TLC on the spec), `make ci` (the tests as CI runs them; `make test`: the quick loop).
PYTHON ?= python3
IMPL ?= refimpl
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: ci wheel-check setup check check-deep check-sim test test-slow proofs fuzz bench mutation-score conformance seed-snapshot findings findings-check lint clean native native-mutants native-conformance

setup:
	$(PYTHON) -m pip install --quiet -e '.[dev]'
	@command -v java >/dev/null || { \
	  echo "Java not found: installing default-jre-headless"; \
	  (apt-get update -qq && apt-get install -y -qq default-jre-headless) >/dev/null; }

# make check MODEL=MCRing runs one model; a full run records the measured
# states/depth/time in spec/models.toml and regenerates spec/README.md's table.
check: setup
	$(PYTHON) -m shmref.check $(if $(MODEL),--only $(MODEL),--record)

# The deep profiles (models.toml: deep = true) on TLC's distributed mode:
# a TLCServer and WORKERS local TLCWorkers; workers on other machines join
# with the command it prints (python -m shmref.deep --help). check-sim: the
# fast alternative, random behaviours up to DEPTH states.
WORKERS ?= 2
DEPTH ?= 60
check-deep: setup
	$(PYTHON) -m shmref.deep --workers $(WORKERS) $(if $(MODEL),--only $(MODEL))

check-sim: setup
	$(PYTHON) -m shmref.deep --simulate --depth $(DEPTH) $(if $(MODEL),--only $(MODEL))

# make test: everything but the `slow` tests, on 2 workers (under 5 minutes on
# 2 cores); the conformance CLI runs share one worker (xdist_group), hence
# --dist loadgroup. make test-slow: the `slow` ones (CLI end to end, full fuzz,
# every quick TLC model, CrossHair's long runs; each bounded at 30 min, not the
# plugin's 10: some run the oracle on a store end to end). -m "not tlc": no Java.
PYTEST_WORKERS ?= 2
test: setup lint
	$(PYTHON) -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup -m "not slow"

test-slow: setup
	$(PYTHON) -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup -m slow --shmref-test-timeout 1800

# make ci: what CI runs (.ci/run): the tests, the slow tier, then the installed
# wheel judged from an empty folder.
ci: test test-slow wheel-check

wheel-check: setup
	PYTHON=$(PYTHON) bash .ci/wheel-check

proofs: setup
	$(PYTHON) -m proofs

fuzz: setup
	SHMREF_PROFILE=shmref-long $(PYTHON) -m pytest -q shmref/suite/test_stateful.py shmref/suite/test_replay.py
	$(PYTHON) -m shmref.fuzz --impl $(IMPL) --calls 200000 --random
	$(PYTHON) -O -m shmref.fuzz --impl $(IMPL) --calls 200000 --random

bench: setup native
	$(PYTHON) -m bench

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

conformance: setup
	$(PYTHON) -m shmref.conformance --impl $(IMPL)

# The oracle's report on the seed (docs/seed-conformance.json) and FINDINGS.md's
# oracle section from it; a slow test fails when the snapshot is older than the oracle.
seed-snapshot: setup
	$(PYTHON) -m shmref.conformance --impl seed || [ $$? -eq 1 ]  # 1: the seed fails hardened
	$(PYTHON) -m shmref.findings --conformance build/conformance/shmref_seed/conformance.json

# FINDINGS.md's generated sections (tables, the audit's coverage, the oracle's report) from
# docs/findings.toml and docs/coverage.toml;
# CONFORMANCE=build/conformance/shmref_seed/conformance.json refreshes the oracle snapshot.
findings:
	$(PYTHON) -m shmref.findings $(if $(CONFORMANCE),--conformance $(CONFORMANCE))

# The same, checking instead of writing: exit 1 if FINDINGS.md is stale or (with
# CONFORMANCE=...) if docs/seed-conformance.json is not that report's summary.
findings-check:
	$(PYTHON) -m shmref.findings --check $(if $(CONFORMANCE),--conformance $(CONFORMANCE))

lint: setup
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m mypy --strict refimpl shmref examples/native_store/native_store examples/native_store/build.py

clean:
	rm -rf build .hypothesis .pytest_cache
