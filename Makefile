# Two commands do all the set-up on a fresh machine:
#   make run    virtualenv + install, start the embedded PostgreSQL, migrate, serve REST + MCP
#   make test   virtualenv + install, lint, then the whole test suite on a real PostgreSQL
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.memsys-installed

.PHONY: install run test lint bench clean

install: $(STAMP)

# torch==2.13.0 first: a CPU wheel; a bare `torch` would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/memsys model export
	touch $(STAMP)

run: install
	$(BIN)/memsys serve

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy memsys

test: lint
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python benchmarks/bench_memory.py
	$(BIN)/python benchmarks/bench_indexing.py
	$(BIN)/python benchmarks/bench_retrieval.py
	$(BIN)/python benchmarks/bench_calibration.py
	$(BIN)/python benchmarks/bench_concurrency.py

clean:
	rm -rf $(VENV) build dist *.egg-info
