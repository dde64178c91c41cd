# `make test` and `make demo` do all their own set-up from a fresh clone.
# The app runs on Python 3.13, the first version whose Functions worker (azure-functions-runtime)
# is a package the app pins; harness/scripts/find-python.sh finds one (PATH, then pyenv) or says what to
# install. `make PYTHON=/path/to/python3.13 ...` names one explicitly.
PYTHON_VERSION := 3.13
PYTHON ?= $(shell bash harness/scripts/find-python.sh $(PYTHON_VERSION) 2>/dev/null)
VENV := .venv
BIN := $(VENV)/bin
# Named for the version, so a venv made by another Python is rebuilt rather than reused.
STAMP := $(VENV)/.installed-$(PYTHON_VERSION)
# devhost's copy of the Functions worker protocol, compiled by grpcio-tools (harness/devhost/protocol/).
PROTO := harness/devhost/protocol/function_rpc.proto
PROTO_PY := harness/devhost/protocol/function_rpc_pb2.py

.PHONY: test check lint typecheck unit venv clean run demo emulators system-deps iac iac-venvs python devhost-envs lock

venv: $(STAMP) $(PROTO_PY)

python:
	@test -n "$(PYTHON)" || bash harness/scripts/find-python.sh $(PYTHON_VERSION)

# The artefacts' locks are installed first, each as it ships (hash-checked, no resolver), then the
# dev tools around them, then `pip check`: a hashed lock cannot be a constraint of the dev install,
# since one hash puts the whole install in hash-checking mode.
LOCKS := requirements.txt agent_worker/requirements.txt simulator/requirements.txt

$(STAMP): $(LOCKS) requirements-dev.txt | python
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	for lock in $(LOCKS); do $(BIN)/python -m pip install --quiet --no-deps --require-hashes -r $$lock || exit 1; done
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	$(BIN)/python -m pip check
	touch $(STAMP)

# After a change to requirements.in (or the agent's or simulator's): the locks again, from PyPI.
lock: $(STAMP)
	$(BIN)/python -m harness.tools.locks

$(PROTO_PY): $(PROTO) $(STAMP)
	$(BIN)/python harness/devhost/protocol/build.py

lint: $(STAMP) $(PROTO_PY)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP) $(PROTO_PY)
	$(BIN)/mypy

# Offline checks of infra/ (harness/tools/iac/README.md). Each tool gets its own venv: checkov pins
# pycep-parser 0.5.1, the project checker needs 0.7.1, and neither belongs in the app's venv.
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed-$(PYTHON_VERSION)
BICEP_VENV := .venv-bicep
BICEP_STAMP := $(BICEP_VENV)/.installed-$(PYTHON_VERSION)

$(CHECKOV_STAMP): harness/tools/iac/requirements-checkov.txt | python
	rm -rf $(CHECKOV_VENV)
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -r harness/tools/iac/requirements-checkov.txt
	touch $(CHECKOV_STAMP)

$(BICEP_STAMP): harness/tools/iac/requirements-bicep.txt | python
	rm -rf $(BICEP_VENV)
	$(PYTHON) -m venv $(BICEP_VENV)
	$(BICEP_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BICEP_VENV)/bin/python -m pip install --quiet -r harness/tools/iac/requirements-bicep.txt
	touch $(BICEP_STAMP)

iac-venvs: $(CHECKOV_STAMP) $(BICEP_STAMP)

iac: iac-venvs
	$(BICEP_VENV)/bin/python -m harness.tools.iac .
	$(CHECKOV_VENV)/bin/python -m harness.tools.iac.checkov_check .

system-deps:
	bash harness/scripts/system-deps.sh

EMULATORS := harness/emulators/node_modules/.installed

emulators: $(EMULATORS)

$(EMULATORS): harness/emulators/package.json | system-deps
	cd harness/emulators && npm install --no-audit --no-fund --loglevel=error
	touch $(EMULATORS)

# devhost runs each app's deployment package in worker processes with its requirements.txt alone
# (harness/devhost/app_package.py): built into ~/.cache/devhost once per content of each file, here, so
# no test with a deadline waits for pip. The apps: this one, and the two the tests and benches run.
DEVHOST_APPS := . tests/devhost/sample_app harness/bench/chain_app

devhost-envs: $(STAMP) $(PROTO_PY)
	$(BIN)/python -m harness.devhost.app_package $(DEVHOST_APPS)

# tests/iac runs both checkers on broken copies of the repo: it needs their venvs. The 15
# slowest tests are listed at the end: where the suite's time goes, run by run.
unit: system-deps $(STAMP) $(PROTO_PY) $(EMULATORS) iac-venvs devhost-envs
	$(BIN)/python -m pytest -n auto --durations=15

test: lint typecheck iac unit

# The fast tier, for a run before each commit: lint, types and the tests that need only the venv
# (marker `fast`: no other tier marker, docs/testing.md): no system packages, node emulators or
# iac venvs, so none of their set-up targets. The app's tests run it in devhost's worker processes, whose
# environments devhost-envs builds once. `make test` (CI) still runs everything.
check: lint typecheck $(STAMP) $(PROTO_PY) devhost-envs
	$(BIN)/python -m pytest -n auto -m fast

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) harness/devhost/protocol/function_rpc_pb2.py harness/devhost/protocol/function_rpc_pb2.pyi $(BICEP_VENV) harness/emulators/node_modules .data .devhost .demo .pytest_cache .mypy_cache .ruff_cache .hypothesis

local.settings.json:
	cp local.settings.embedded.json local.settings.json

# `make run PROFILE=emulators`: the Cosmos DB server, Azurite, schema, settings, simulator, an
# agent and devhost, in one command (harness/demo/emulators.py); the default is the embedded profile.
# The local issuer (harness/standins/local_issuer.py) serves the front end's signing keys while devhost
# runs; `python -m ops token --app app-a` gets a submitting app's token from it.
PROFILE ?= embedded
ifeq ($(PROFILE),emulators)
run: $(STAMP) $(PROTO_PY) $(EMULATORS) devhost-envs
	$(BIN)/python -m harness.demo.emulators
else
run: $(STAMP) $(PROTO_PY) local.settings.json devhost-envs
	$(BIN)/python -m harness.standins.local_issuer -- $(BIN)/python -m harness.devhost start
endif

demo: $(STAMP) $(PROTO_PY) devhost-envs
	$(BIN)/python -m harness.demo
