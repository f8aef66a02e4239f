# Two commands do all the set-up on a fresh machine: `make evaluate` and `make test`.
# They need only Python >= 3.10 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
MODEL ?= efficientnet_lite0
PYTEST_ARGS ?=
MIN_PYTHON := 3.10
# The data home (docs/data.md): ../shared beside the checkout when it holds the stimuli, as `make test` finds
# it; else what MODELVAL_DATA_HOME says; else empty, and modelval uses the per-user cache (fetched on first use).
MODELVAL_DATA_HOME ?= $(if $(wildcard ../shared/cue-conflict),$(abspath ../shared))
export MODELVAL_DATA_HOME

.PHONY: evaluate test test-fast test-gpu test-oldest lint stimuli docs bench clean-venv check-python constraints \
	constraints-oldest

# Refuse an old or missing interpreter with one clear line, before a virtual environment is made.
check-python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null || { \
		found=$$($(PYTHON) --version 2>&1 | head -n 1); \
		echo "modelval needs Python >= $(MIN_PYTHON); '$(PYTHON)' is $${found:-not found}. Run with PYTHON=/path/to/python3.10+ (e.g. make test PYTHON=python3.12)." >&2; \
		exit 1; }

$(BIN)/python: | check-python
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Installs the package (torch + torchvision together from PyPI) and records it with a stamp file.
# pyproject.toml gives ranges (a user's own torch is kept); constraints.txt pins what CI runs. pip byte-compiles
# the environment's 20,000 Python files: `--no-compile` saved 60 s of CI's install and cost 115 s more in its tests,
# whose many processes then compiled the same modules as they imported them (issue 28).
$(VENV)/.installed: pyproject.toml constraints.txt | check-python $(BIN)/python
	$(BIN)/python -m pip install --quiet -c constraints.txt -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml constraints.txt | check-python $(BIN)/python
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[test]"
	touch $(VENV)/.installed $@

# Re-pin constraints.txt to what the test environment holds now (after a dependency change).
constraints: $(VENV)/.installed-test
	{ sed -n '1,3p' constraints.txt; $(BIN)/python -m pip freeze --exclude-editable | grep -v '^modelval'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

# The oldest torch/torchvision pair modelval supports (pyproject.toml's lower bounds), in an environment of its own:
# CI runs the fast tier against it (`make test-oldest`), so the lower bounds are a pair that really ran.
OLDEST := .venv-oldest
# Its pinned packages first, without the checkout: CI installs them while the main environment installs (two
# editable installs of one checkout at once would share its build folder; this step builds nothing of it).
$(OLDEST)/.pinned: constraints-oldest.txt | check-python
	$(PYTHON) -m venv $(OLDEST)
	$(OLDEST)/bin/python -m pip install --quiet --upgrade pip
	$(OLDEST)/bin/python -m pip install --quiet -r constraints-oldest.txt
	touch $@

$(OLDEST)/.installed-test: pyproject.toml constraints-oldest.txt $(OLDEST)/.pinned | check-python
	$(OLDEST)/bin/python -m pip install --quiet -c constraints-oldest.txt -e ".[test]"
	touch $@

constraints-oldest: $(OLDEST)/.installed-test
	{ sed -n '1,2p' constraints-oldest.txt; $(OLDEST)/bin/python -m pip freeze --exclude-editable | grep -v '^modelval'; } \
		> constraints-oldest.txt.new
	mv constraints-oldest.txt.new constraints-oldest.txt

evaluate: $(VENV)/.installed
	$(BIN)/modelval shape-bias --model $(MODEL)

# The stimuli, fetched once (into the data home, else the per-user cache) when no copy is there
# (with ../shared beside the checkout, or a data home set as in CI, nothing is fetched). Offline,
# the one-line error is printed and the data tests then skip (or fail in strict mode).
stimuli: $(VENV)/.installed
	@if [ ! -d "$${MODELVAL_DATA_HOME:-/nonexistent}/cue-conflict" ]; then \
		$(BIN)/modelval data download || echo "make: the stimuli were not fetched; tests that need them will skip" >&2; \
	fi

# Everything: CI's command. One session spread over the cores: xdist's workers (one torch thread each, see
# conftest.py) get whole test files (a module's fixtures are computed once), the files with `slow` tests first
# (conftest.py's pytest_collection_modifyitems), so the short ones fill the end. Measured for issue 28 on 2 cores:
# the slow tests alone took 702 s wall and 1053 s of CPU in one process (149% of a core: the work between forwards
# is single-threaded), 645 s and 1224 s over two workers, and CI went from 21:07 to 16:32 with the oldest pair's
# tier beside it. (An earlier whole-suite xdist run doubled the CPU time: its workers ran two torch threads each.)
XDIST := -n auto --dist loadfile --no-loadscope-reorder
test: $(VENV)/.installed-test lint stimuli
	$(BIN)/python -m pytest $(XDIST) --durations=20 $(PYTEST_ARGS) || [ $$? -eq 5 ]  # 5: PYTEST_ARGS chose none here

# The edit loop: every test but the `slow` ones, i.e. no full 1280-image evaluation, no sensitivity
# card, no wheel install, spread over the cores (these tests are short and mostly single-threaded, so
# xdist pays here): about 2 min on 2 quiet cores (the README states it; the closing notes give each measurement).
# CI runs `make test`, which runs everything.
test-fast: $(VENV)/.installed-test stimuli
	$(BIN)/python -m pytest -m "not slow" $(XDIST) $(PYTEST_ARGS)

# The GPU tier (the nightly's first step; docs/nightly.md): CUDA against CPU decisions of every bundled model,
# bf16/fp16 autocast within their flip budgets, the front door, validate and the plugin on CUDA. Where no CUDA
# device exists every one of them skips with that reason.
test-gpu: $(VENV)/.installed-test stimuli
	$(BIN)/python -m pytest -m gpu -rs $(PYTEST_ARGS)

# The fast tier (as test-fast) against the oldest supported torch/torchvision pair (CI's second environment).
# What the oldest pair can change: the wings whose code calls torch or torchvision (the forward, decoding,
# preprocessing, the models, the stores' digests, temperature scaling, the pipeline, the runner and the plugin).
# The command line's formatting, the figures, the docs, the human data's reading (behaviour/ but its one torch
# function, in categories), the data's downloads and archives (datasets/ but decoding) and the layout checks
# run the same under any torch: `make test` runs them once (issue 39).
OLDEST_TESTS := tests/api tests/behaviour/test_categories.py tests/datasets/test_stimuli.py \
	tests/datasets/test_decode_cache.py tests/datasets/test_stimulus_integrity.py tests/evaluation tests/judgement \
	tests/metrics tests/models tests/records tests/runner tests/pytest_plugin tests/test_preprocessing.py \
	tests/test_light_import.py tests/test_public_docstrings.py
test-oldest: $(OLDEST)/.installed-test stimuli
	$(OLDEST)/bin/python -m pytest -m "not slow" $(XDIST) $(PYTEST_ARGS) $(OLDEST_TESTS)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check src tests benchmarks conftest.py
	$(BIN)/mypy

docs: $(VENV)/.installed-test
	$(BIN)/python -m mkdocs build --strict

bench: $(VENV)/.installed-test
	$(BIN)/python benchmarks/run_all.py

clean-venv:
	rm -rf $(VENV)
