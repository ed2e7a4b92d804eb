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

.PHONY: install demo test test-fast lint bench
install: $(STAMP)

demo: $(STAMP)
	$(BIN)/taxonomy run pipelines/paperbench.toml

# The tests run on every core (pytest-xdist). A file that builds a module-scoped fixture runs whole on one worker,
# so the fixture is built once; the other tests spread one by one (tests/conftest.py's pytest_xdist_make_scheduler).
XDIST := -n auto

# Every test, as CI runs it.
test: $(STAMP)
	$(BIN)/python -m pytest $(XDIST)

# A developer's first answer, in under a minute on two cores: the tests marked neither slow nor e2e
# ([tool.pytest.ini_options] markers; tests/conftest.py's MARKED says which).
test-fast: $(STAMP)
	$(BIN)/python -m pytest $(XDIST) -m "not slow and not e2e"

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
