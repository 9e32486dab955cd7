# mtia_lab set-up. Two targets for people: `make lab` and `make test`.
#
# Both build .venv the same way. torch goes in FIRST and pinned: on a machine without torch, a
# bare or ranged `torch` requirement makes pip fetch a multi-GB CUDA build, while
# `torch==2.13.0` takes the CPU wheel (2.13.0+cpu sorts above 2.13.0). The install is redone only
# when pyproject.toml is newer than the stamp file, so a second `make test` starts at once.

PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC := torch==2.13.0

PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.mtia_lab-installed
NOTEBOOKS := $(wildcard notebooks/*.ipynb)
# Only paths that exist: git keeps no empty folder, and pytest fails on a missing path.
TEST_PATHS := $(wildcard tests) $(NOTEBOOKS)
NBVAL_ARGS := --nbval --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg
# Jupyter refuses to start as root unless told it may.
ROOT_ARGS := $(if $(filter 0,$(shell id -u)),--allow-root,)
LAB_ARGS ?=
PYTEST_ARGS ?=
# Two workers, a test file each at a time (pytest-xdist): the machines here and CI's have two
# cores, and most tests spend their time in single-threaded Python (the device's dispatch,
# Triton's interpreter). Whole files keep module fixtures and a notebook's cells together.
# Files go to the workers in collection order, which tests/conftest.py sorts longest first:
# `--no-loadscope-reorder` keeps that order (since pytest-xdist 3.8 the default re-sorts files by
# their number of tests, which put the few-test, longest file last and left one worker running
# it alone for minutes). `make test XDIST_ARGS=` runs in one process.
XDIST_ARGS ?= -n 2 --dist loadfile --no-loadscope-reorder
# JupyterLab's settings defaults for this venv (see jupyter/lab/settings/overrides.d/): saved
# notebooks keep their widget state, so a learner's own notebook reopens with its widgets.
LAB_SETTINGS_SRC := jupyter/lab/settings/overrides.d/mtia_lab.json
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.d/mtia_lab.json

.PHONY: lab test clean chromium lab-settings

lab: $(STAMP) $(LAB_SETTINGS)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(ROOT_ARGS) $(LAB_ARGS)

# Lint and tests both run, so one report shows every problem; either failing fails the target.
# pytest exits 5 when it collected no test at all: say so plainly instead of failing.
PYTEST_CMD = $(VENV)/bin/pytest $(TEST_PATHS) $(if $(NOTEBOOKS),$(NBVAL_ARGS),) $(XDIST_ARGS) $(PYTEST_ARGS)
test: $(STAMP) chromium
	@echo "$(VENV)/bin/ruff check ."; lint=0; $(VENV)/bin/ruff check . || lint=$$?; \
	echo "$(PYTEST_CMD)"; status=0; $(PYTEST_CMD) || status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests"; status=0; fi; \
	if [ $$lint -ne 0 ]; then echo "make test: ruff check failed (see above)"; fi; \
	if [ $$status -ne 0 ]; then exit $$status; fi; exit $$lint

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

$(PY):
	$(PYTHON) -m venv $(VENV)

# pip's editable install leaves out data files, so the settings file is copied here instead.
lab-settings: $(LAB_SETTINGS)
$(LAB_SETTINGS): $(LAB_SETTINGS_SRC) | $(PY)
	mkdir -p $(dir $@)
	cp $(LAB_SETTINGS_SRC) $@

$(STAMP): pyproject.toml | $(PY)
	$(PIP) install "$(TORCH_SPEC)"
	$(PIP) install -e '.[test]'
	@$(PY) -c "import torch, sys; sys.exit(torch.version.cuda and \
		'torch ' + torch.__version__ + ' is a CUDA build: run make clean, then retry')"
	touch $@

# Browser tests drive Debian's Chromium (Playwright's own browser download cannot work here).
# Installed only when missing and when we may; otherwise those tests skip.
chromium:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "Installing Debian chromium for the browser tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	else echo "note: /usr/bin/chromium is missing and we are not root; browser tests will skip"; \
	fi
