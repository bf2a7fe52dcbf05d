# MiniCache developer entry points. `make run` and `make test` are the README's quick start.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: setup run lint test test-unit test-real models bench-spec lock clean help

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

setup:  ## venv + pinned deps (builds llama-cpp-python once) + embedded models
	@PYTHON=$(PYTHON) VENV=$(VENV) scripts/setup.sh

run: setup  ## the main job on the embedded default models
	$(BIN)/minicache run

lint: setup  ## ruff format --check, ruff (lint rules and import order) and mypy (--strict flags on the stages); settings in pyproject.toml
	$(BIN)/ruff format --check
	$(BIN)/ruff check
	$(BIN)/mypy

# In CI a missing PostgreSQL server is an error, not a skip.
PG_REQUIRED = MINICACHE_TEST_PG_REQUIRED=$${CI:+1}

test: setup  ## all tests: unit tests (fake models), PostgreSQL store, server, and the real-model suite
	$(PG_REQUIRED) $(BIN)/python -m pytest $(PYTEST_ARGS)

test-unit: setup  ## only the tests that need no real model
	$(PG_REQUIRED) $(BIN)/python -m pytest -m "not real_model" $(PYTEST_ARGS)

test-real: setup  ## only the real-model suite
	$(BIN)/python -m pytest -m real_model $(PYTEST_ARGS)

bench-spec: setup  ## speculative decoding on this machine
	$(BIN)/minicache bench-spec

lock:  ## re-pin every installed package into requirements.lock
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^minicache' > requirements.lock

clean:  ## remove the venv and build droppings (not the model cache)
	rm -rf $(VENV) build *.egg-info .pytest_cache
