# famiglia — every entry point a developer or operator needs. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
VAR := var
export PYTHONPATH := libs:.
export PYTHONDONTWRITEBYTECODE := 1

.DEFAULT_GOAL := help
.PHONY: help setup run test soak up down status protos protos-check protos-contract lint fmt bench bench-quick golden clean

help: ## list the targets
	@echo "famiglia — make targets"
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-15s %s\n", $$1, $$2}'

# .venv is built on the fastest build of $(PYTHON)'s version on PATH (tools/pick_python.py:
# a distribution's PGO+LTO build runs famiglia 3-10 % faster than a pyenv one), and built
# again when that choice changes.
$(STAMP): pyproject.toml tools/pick_python.py
	@base="$$($(PYTHON) tools/pick_python.py)"; \
	if [ -x $(PY) ] && [ "$$(cat $(VENV)/.base-python 2>/dev/null)" != "$$base" ]; then \
	  echo "rebuilding $(VENV) on $$base"; rm -rf $(VENV); fi; \
	if [ ! -x $(PY) ]; then \
	  $$base -m venv $(VENV) || { base=$(PYTHON); rm -rf $(VENV); $(PYTHON) -m venv $(VENV); }; fi; \
	echo "$$base" > $(VENV)/.base-python
	@$(PY) -m pip install -q --upgrade pip >/dev/null
	@$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP) ## create .venv on the fastest Python build on PATH (tools/pick_python.py), install famiglia
	@$(PY) -m famiglia.localstack.redis_server --ensure >/dev/null

run: setup ## the main job: start the embedded stack and play a bot tournament over every game
	@$(PY) -m famiglia.cli.main run $(ARGS)

test: setup ## run the whole test suite (quick profile) against a real redis-server
	@$(PY) -m pytest -q -n 2 --dist loadgroup $(ARGS)

soak: setup ## long randomized runs: thousands of games per engine, load and fault suites
	@FAMIGLIA_PROFILE=soak $(PY) -m pytest -q -n 2 --dist loadgroup --timeout 7200 $(ARGS)

up: setup ## start the embedded stack in the background (redis-server + services + worker; only what is not running)
	@$(PY) -m famiglia.cli.main up

down: ## stop the embedded stack
	@test -x $(PY) && $(PY) -m famiglia.cli.main down || true

status: setup ## show what the embedded stack is running (fails when only some of it runs)
	@$(PY) -m famiglia.cli.main status

protos: setup ## regenerate Python code and mypy stubs from protos/ (and say what the wire contract lacks)
	@$(PY) tools/gen_protos.py
	@$(PY) tools/proto_contract.py --remind

protos-check: setup ## fail when generated code is stale or protos/ break their wire contract
	@$(PY) tools/gen_protos.py --check
	@$(PY) tools/proto_contract.py

protos-contract: setup ## record additions to protos/ in protos/contract.json (refuses a breaking change)
	@$(PY) tools/proto_contract.py --update

golden: setup ## regenerate golden playthroughs (GAME=id for one game; review the diff like code)
	@$(PY) -m famiglia.testing.playthrough regen $(if $(GAME),--game $(GAME))

lint: setup ## ruff everywhere, mypy on libs/ and services/
	@$(PY) -m ruff check libs services tests tools
	@$(PY) -m mypy

fmt: setup ## format and fix imports
	@$(PY) -m ruff check --fix libs services tests tools
	@$(PY) -m ruff format libs services tests tools

bench: setup ## benchmarks, printed as ratios against baselines measured in the same run
	@$(PY) -m famiglia.bench $(ARGS)

bench-quick: setup ## a short version of `make bench` (~1 minute: fewer, shorter repeats)
	@$(PY) -m famiglia.bench --quick $(ARGS)

clean: down ## remove the venv, local data and caches
	rm -rf $(VENV) $(VAR) .pytest_cache .hypothesis .ruff_cache .mypy_cache
