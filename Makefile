# Two commands do all the set-up on a fresh machine: `make evaluate` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
MODEL ?= efficientnet_lite0
PYTEST_ARGS ?=

.PHONY: evaluate test lint bench clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Installs the package (torch + torchvision together from PyPI) and records it with a stamp file.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(VENV)/.installed $@

evaluate: $(VENV)/.installed
	$(BIN)/modelval shape-bias --model $(MODEL)

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check src tests benchmarks conftest.py

bench: $(VENV)/.installed-test
	$(BIN)/python benchmarks/run_all.py

clean-venv:
	rm -rf $(VENV)
