# `make test` and `make demo` do all their own set-up from a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint typecheck unit venv clean run demo emulators system-deps

venv: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

system-deps:
	bash scripts/system-deps.sh

EMULATORS := emulators/node_modules/.installed

emulators: $(EMULATORS)

$(EMULATORS): emulators/package.json | system-deps
	cd emulators && npm install --no-audit --no-fund --loglevel=error
	touch $(EMULATORS)

unit: system-deps $(STAMP) $(EMULATORS)
	$(BIN)/python -m pytest -n auto

test: lint typecheck unit

clean:
	rm -rf $(VENV) emulators/node_modules .data .devhost .demo .pytest_cache .mypy_cache .ruff_cache .hypothesis

local.settings.json:
	cp local.settings.embedded.json local.settings.json

run: $(STAMP) local.settings.json
	$(BIN)/python -m devhost start

demo: $(STAMP)
	$(BIN)/python -m demo
