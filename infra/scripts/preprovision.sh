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

# With networkIsolation off, Cosmos DB and the compensation log admit the app's subnet and one
# operator address (main.bicep operatorIpAddress). A first deployment's deployer runs `ops --azd`
# from this machine, so with grantDeployerOperatorRoles on and no address chosen yet, admit this
# machine's. Not in a pipeline (CI set): a hosted runner's address is shared with other customers
# and gone after the run. SAS_CLIENT_IP overrides the lookup (a proxy), as in postprovision.sh.
if [ "${SAS_GRANT_DEPLOYER_OPERATOR_ROLES:-true}" != "false" ] && [ -z "${SAS_OPERATOR_IP:-}" ] \
    && [ -z "${CI:-}" ]; then
  operator_ip="${SAS_CLIENT_IP:-$(curl -fsS https://api.ipify.org)}"
  echo "preprovision: admitting $operator_ip to Cosmos DB and the compensation log (SAS_OPERATOR_IP)"
  azd env set SAS_OPERATOR_IP "$operator_ip"
fi
