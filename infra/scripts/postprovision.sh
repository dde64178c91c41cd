#!/bin/sh
# azd postprovision hook: create the orders schema and the Function App's database user in Azure
# SQL. The server is Entra-only; this runs as the deploying principal, its Entra administrator
# (main.bicep principalId). azd passes its environment (the outputs of main.bicep) to hooks.
#
# Needs: the Azure CLI signed in as that principal (`az login`), and go-sqlcmd
# (https://learn.microsoft.com/sql/tools/sqlcmd/go-sqlcmd-utility), which signs in with
# --authentication-method ActiveDirectoryDefault (the Azure CLI's credential), and the app's venv
# (make venv; or SAS_PYTHON), which writes the orders schema (python -m ops schema --script sqlserver).
# Idempotent: safe to run again (`azd hooks run postprovision`).
set -eu

: "${AZURE_RESOURCE_GROUP:?run through azd, which sets the outputs of main.bicep}"
: "${AZURE_SQL_SERVER_NAME:?}"
: "${AZURE_SQL_SERVER_FQDN:?}"
: "${AZURE_SQL_DATABASE_NAME:?}"
: "${API_IDENTITY_NAME:?}"

for tool in az sqlcmd; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "postprovision: '$tool' is not installed; install it, then run: azd hooks run postprovision" >&2
    exit 1
  fi
done

sql_dir="$(cd "$(dirname "$0")/../sql" && pwd)"
rule="azd-postprovision"

# The server admits the Function App's subnet only (no "allow Azure services" rule); open it to
# this machine for the length of the script. SAS_CLIENT_IP overrides the address lookup (a proxy).
client_ip="${SAS_CLIENT_IP:-$(curl -fsS https://api.ipify.org)}"
echo "postprovision: allowing $client_ip on $AZURE_SQL_SERVER_NAME while the scripts run"
az sql server firewall-rule create --resource-group "$AZURE_RESOURCE_GROUP" --server "$AZURE_SQL_SERVER_NAME" \
  --name "$rule" --start-ip-address "$client_ip" --end-ip-address "$client_ip" --output none
cleanup() {
  az sql server firewall-rule delete --resource-group "$AZURE_RESOURCE_GROUP" --server "$AZURE_SQL_SERVER_NAME" \
    --name "$rule" --output none || true
}
trap cleanup EXIT

run_sql() {
  # A new firewall rule can take a few seconds to apply: retry the first connection.
  attempt=1
  until sqlcmd -S "tcp:${AZURE_SQL_SERVER_FQDN},1433" -d "$AZURE_SQL_DATABASE_NAME" \
      --authentication-method ActiveDirectoryDefault -b "$@"; do
    if [ "$attempt" -ge 5 ]; then
      echo "postprovision: sqlcmd failed $attempt times" >&2
      return 1
    fi
    attempt=$((attempt + 1))
    sleep 10
  done
}

echo "postprovision: orders schema"
# The app's own schema (adapters/sql/schema.py), written as T-SQL by the app's venv; idempotent.
python="${SAS_PYTHON:-.venv/bin/python}"
if [ ! -x "$python" ]; then
  echo "postprovision: no $python; create the venv (make venv) or set SAS_PYTHON, then: azd hooks run postprovision" >&2
  exit 1
fi
schema="$(mktemp)"
"$python" -m ops schema --script sqlserver > "$schema"
run_sql -i "$schema"
rm -f "$schema"
echo "postprovision: database user for $API_IDENTITY_NAME"
run_sql -v APP_IDENTITY_NAME="$API_IDENTITY_NAME" -i "$sql_dir/users.sql"
echo "postprovision: the front end's Orders.Submit app role and its submitting apps' assignments"
"$python" "$(dirname "$0")/app_roles.py"
echo "postprovision: done"
