#!/usr/bin/env bash
# System packages the tests need beyond Python: the ODBC driver manager with the SQLite and
# PostgreSQL ODBC drivers and the PostgreSQL server (the orders repository's pyodbc paths; the
# tests start their own throwaway cluster), Node.js for the emulators, and Chromium for the
# dashboard's browser test (Playwright drives /usr/bin/chromium; it cannot download a browser here). Installs what is
# missing when run as root (CI, or a container); otherwise says what to install.
set -euo pipefail

missing=()
odbcinst -q -d 2>/dev/null | grep -q '^\[SQLite3\]$' || missing+=(unixodbc libsqliteodbc)
odbcinst -q -d 2>/dev/null | grep -q '^\[PostgreSQL Unicode\]$' || missing+=(unixodbc odbc-postgresql)
# Debian keeps the server binaries out of PATH, one directory per major version.
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || missing+=(postgresql)
command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
[ -x /usr/bin/chromium ] || missing+=(chromium)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "missing system packages: ${missing[*]}" >&2
  echo "install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }
echo "installed: ${missing[*]}"
