# Two commands set everything up on a fresh machine with Python and pip:
#   make demo   - create .venv, install, compress a bundled real transcript, print the report
#   make test   - install, then lint, type-check and run every test (offline)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint typecheck unit integration package-check notebooks bench bench-quick test-real-llm mutation-check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/context-pipeline report examples/transcripts/*.json --threshold 16000 --tail-budget 4000

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

bench-quick: install
	$(BIN)/python -m benchmarks.run --quick

test-real-llm: install
	bash scripts/real-llm.sh

mutation-check: install
	$(BIN)/python scripts/mutation_check.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
