# Two commands set everything up on a fresh machine with Python and pip:
#   make demo   - create .venv, install the core, compress the bundled real transcripts,
#                 print the report and how long it all took
#   make test   - add the dev tools, then lint, type-check and run every test (offline)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# One stamp per install: the demo needs the core only; every other target the dev tools.
CORE_STAMP := $(VENV)/.installed-core
DEV_STAMP := $(VENV)/.installed-dev
# When make started, so that the demo's time includes setting up .venv.
START := $(shell date +%s)

.PHONY: install install-core demo test lint typecheck unit integration package-check notebooks bench bench-quick test-real-llm mutation-check clean

# pip >= 25.1 reads the dev dependency group (PEP 735) from pyproject.toml.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(CORE_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(DEV_STAMP): $(CORE_STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet --group dev
	touch $@

install-core: $(CORE_STAMP)

install: $(DEV_STAMP)

demo: install-core
	$(BIN)/context-pipeline report examples/transcripts/*.json --threshold 16000 --tail-budget 4000
	@echo "make demo: done in $$(( $$(date +%s) - $(START) )) s, setting up $(VENV) included" \
		"($$($(BIN)/python -m pip list --format=freeze | wc -l) packages)"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

unit: install
	$(BIN)/python -m pytest tests/unit_tests -q

integration: install
	bash scripts/with-postgres.sh $(BIN)/python -m pytest tests/integration_tests -q

package-check: install
	bash scripts/check-package.sh $(BIN)/python

test: lint typecheck
	bash scripts/with-postgres.sh $(BIN)/python -m pytest tests -q
	bash scripts/check-package.sh $(BIN)/python

bench: install
	$(BIN)/python -m benchmarks.run --out BENCHMARKS.md
	$(BIN)/python -m benchmarks.parse

bench-quick: install
	$(BIN)/python -m benchmarks.run --quick

test-real-llm: install
	bash scripts/real-llm.sh

mutation-check: install
	$(BIN)/python scripts/mutation_check.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
