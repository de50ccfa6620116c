# The habits of this project. `make run` and `make test` are the two commands a fresh
# machine needs (README.md); everything else is for people working on kvplan.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Two stamps in one virtualenv: RUNTIME (`pip install -e .`, what `make run` needs) and STAMP
# (`.[dev]`: the tests, linters and type checker). Installing dev also installs the runtime, so
# it touches both; `make run` after `make test` installs nothing, `make test` after `make run`
# adds the dev tools to the same .venv.
STAMP := $(VENV)/.installed
RUNTIME := $(VENV)/.runtime
HOST ?= 127.0.0.1
PORT ?= 8000
TEST_DATABASE_URL ?= postgresql+psycopg://postgres@127.0.0.1:5432/test
LINT_PATHS := $(wildcard service bench tests migrations)

.PHONY: run test faults lint format openapi bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(RUNTIME): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $(RUNTIME)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(RUNTIME) $(STAMP)

install: $(STAMP)

## Serve on the embedded SQLite default (DATABASE_URL, else ~/.local/share/kvplan/kvplan.db):
## migrate, seed, then serve on $(HOST):$(PORT). Installs the service alone, not the dev tools.
run: $(RUNTIME)
	$(BIN)/kvplan migrate
	$(BIN)/kvplan seed
	$(BIN)/kvplan serve --host $(HOST) --port $(PORT)

## The whole suite against PostgreSQL (KVPLAN_TEST_DATABASE_URL; fails if unreachable).
test: $(STAMP)
	KVPLAN_TEST_DATABASE_URL="$${KVPLAN_TEST_DATABASE_URL:-$(TEST_DATABASE_URL)}" \
		$(BIN)/python -m pytest --ignore=tests/faults $(PYTEST_ARGS)

## Faults measured from outside: a throwaway PostgreSQL cluster (initdb + pg_ctl) and two
## replicas; prints the figures. Needs PostgreSQL's server binaries, not a running server.
faults: $(STAMP)
	KVPLAN_TEST_DATABASE_URL="$${KVPLAN_TEST_DATABASE_URL:-$(TEST_DATABASE_URL)}" \
		$(BIN)/python -m pytest tests/faults -p no:cacheprovider $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format $(LINT_PATHS)
	$(BIN)/ruff check --fix $(LINT_PATHS)

## Write the app's OpenAPI spec to openapi/openapi.json (a test fails when they differ).
openapi: $(STAMP)
	$(BIN)/python -m service.openapi_export openapi/openapi.json

## Medians of the sizing engine's speed, the calibration tables, and the HTTP benchmark (kvplan
## served beside a bare FastAPI route, on SQLite and on a throwaway database of the PostgreSQL
## server at KVPLAN_BENCH_DATABASE_URL; wrk where installed). BENCH_ARGS=--http-only, --no-http.
bench: $(STAMP)
	KVPLAN_BENCH_DATABASE_URL="$${KVPLAN_BENCH_DATABASE_URL:-$(TEST_DATABASE_URL)}" \
		$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
