# shmref: `make check` (TLC on the spec), `make test` (the test suite, as CI runs it).
PYTHON ?= python3
IMPL ?= refimpl
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: setup check test proofs fuzz bench conformance findings lint clean

setup:
	$(PYTHON) -m pip install --quiet -e '.[dev]'
	@command -v java >/dev/null || { \
	  echo "Java not found: installing default-jre-headless"; \
	  (apt-get update -qq && apt-get install -y -qq default-jre-headless) >/dev/null; }

check: setup
	$(PYTHON) -m shmref.check

test: setup
	$(PYTHON) -m pytest -q

proofs: setup
	$(PYTHON) -m proofs

fuzz: setup
	HYPOTHESIS_PROFILE=long SHMREF_SLOW=1 $(PYTHON) -m pytest -q tests/test_stateful.py tests/test_replay.py
	$(PYTHON) -m shmref.fuzz --impl $(IMPL) --calls 200000 --random
	$(PYTHON) -O -m shmref.fuzz --impl $(IMPL) --calls 200000 --random

bench: setup
	$(PYTHON) -m bench

conformance: setup
	$(PYTHON) -m shmref.conformance --impl $(IMPL)

# FINDINGS.md's generated sections (tables, the oracle's report) from docs/findings.toml;
# CONFORMANCE=build/conformance/shmref_seed/conformance.json refreshes the oracle snapshot.
findings:
	$(PYTHON) -m shmref.findings $(if $(CONFORMANCE),--conformance $(CONFORMANCE))

lint:
	$(PYTHON) -m ruff check .

clean:
	rm -rf build .hypothesis .pytest_cache
