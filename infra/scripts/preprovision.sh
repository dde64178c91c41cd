#!/bin/sh
# azd preprovision hook: the Entra registrations a first deployment needs before Bicep reads them
# (the front end's API, the remote service's audience, the sample submitting app and its
# certificate, each with its option): infra/scripts/registrations.py, with the app's venv (make venv; or SAS_PYTHON),
# which has `cryptography` for the certificate. Needs the Azure CLI signed in (`az login`).
# Idempotent: safe to run again (`azd hooks run preprovision`).
set -eu

python="${SAS_PYTHON:-.venv/bin/python}"
if [ ! -x "$python" ]; then
  echo "preprovision: no $python; create the venv (make venv) or set SAS_PYTHON, then: azd provision" >&2
  exit 1
fi
if ! command -v az >/dev/null 2>&1; then
  echo "preprovision: 'az' is not installed; install the Azure CLI, then: azd provision" >&2
  exit 1
fi
"$python" "$(dirname "$0")/registrations.py"
