# shmref: `make check` (TLC on the spec), `make test` (the test suite, as CI runs it).
PYTHON ?= python3
IMPL ?= refimpl
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: setup check test proofs fuzz bench conformance lint clean

setup:
	$(PYTHON) -m pip install --quiet -e '.[dev]'
	@command -v java >/dev/null || { \
	  echo "Java not found: installing default-jre-headless"; \
	  (apt-get update -qq && apt-get install -y -qq default-jre-headless) >/dev/null; }

# make check MODEL=MCRing runs one model; a full run records the measured
# states/depth/time in spec/models.toml and regenerates spec/README.md's table.
check: setup
	$(PYTHON) -m shmref.check $(if $(MODEL),--only $(MODEL),--record)

test: setup
	$(PYTHON) -m pytest -q

proofs: setup
	$(PYTHON) -m proofs

fuzz: setup
	HYPOTHESIS_PROFILE=long SHMREF_SLOW=1 $(PYTHON) -m pytest -q tests/test_stateful.py tests/test_replay.py

bench: setup
	$(PYTHON) -m bench

conformance: setup
	$(PYTHON) -m shmref.conformance --impl $(IMPL)

lint:
	$(PYTHON) -m ruff check .

clean:
	rm -rf build .hypothesis .pytest_cache
