# `make test` and `make demo` do all their own set-up from a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint typecheck unit venv clean run demo emulators system-deps iac iac-venvs

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

# Offline checks of infra/ (tools/iac/README.md). Each tool gets its own venv: checkov pins
# pycep-parser 0.5.1, the project checker needs 0.7.1, and neither belongs in the app's venv.
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
BICEP_VENV := .venv-bicep
BICEP_STAMP := $(BICEP_VENV)/.installed

$(CHECKOV_STAMP): tools/iac/requirements-checkov.txt
	rm -rf $(CHECKOV_VENV)
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -r tools/iac/requirements-checkov.txt
	touch $(CHECKOV_STAMP)

$(BICEP_STAMP): tools/iac/requirements-bicep.txt
	rm -rf $(BICEP_VENV)
	$(PYTHON) -m venv $(BICEP_VENV)
	$(BICEP_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BICEP_VENV)/bin/python -m pip install --quiet -r tools/iac/requirements-bicep.txt
	touch $(BICEP_STAMP)

iac-venvs: $(CHECKOV_STAMP) $(BICEP_STAMP)

iac: iac-venvs
	$(BICEP_VENV)/bin/python -m tools.iac .
	$(CHECKOV_VENV)/bin/python -m tools.iac.checkov_check .

system-deps:
	bash scripts/system-deps.sh

EMULATORS := emulators/node_modules/.installed

emulators: $(EMULATORS)

$(EMULATORS): emulators/package.json | system-deps
	cd emulators && npm install --no-audit --no-fund --loglevel=error
	touch $(EMULATORS)

# tests/iac runs both checkers on broken copies of the repo: it needs their venvs.
unit: system-deps $(STAMP) $(EMULATORS) iac-venvs
	$(BIN)/python -m pytest -n auto

test: lint typecheck iac unit

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) $(BICEP_VENV) emulators/node_modules .data .devhost .demo .pytest_cache .mypy_cache .ruff_cache .hypothesis

local.settings.json:
	cp local.settings.embedded.json local.settings.json

run: $(STAMP) local.settings.json
	$(BIN)/python -m devhost start

demo: $(STAMP)
	$(BIN)/python -m demo
