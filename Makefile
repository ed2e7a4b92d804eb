# Two entry points for a fresh machine: `make demo` (the main job) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev,openjudge]"
	touch $(STAMP)

.PHONY: install demo test lint bench
install: $(STAMP)

demo: $(STAMP)
	$(BIN)/taxonomy run pipelines/paperbench.toml

test: $(STAMP)
	$(BIN)/python -m pytest

# The structure's guards, as .ci/run runs them (together about a second): ruff's rules ([tool.ruff]) on the whole
# repository, the formatting it keeps ([tool.ruff.format]) and the layers contract ([tool.importlinter]).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check --quiet .
	$(BIN)/lint-imports --no-cache

bench: $(STAMP)
	$(BIN)/python benchmarks/stage1_throughput.py
	$(BIN)/python benchmarks/quality.py
	$(BIN)/python benchmarks/clustering_scale.py
	$(BIN)/python benchmarks/stability.py
