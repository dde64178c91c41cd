# azd preprovision hook (Windows): the same step as preprovision.sh (infra/scripts/registrations.py
# with the app's venv). Needs the Azure CLI signed in.
$ErrorActionPreference = 'Stop'

$python = if ($env:SAS_PYTHON) { $env:SAS_PYTHON } else { '.venv\Scripts\python.exe' }
if (-not (Test-Path $python)) { throw "preprovision: no $python; create the venv (make venv) or set SAS_PYTHON, then: azd provision" }
if (-not (Get-Command az -ErrorAction SilentlyContinue)) { throw "preprovision: 'az' is not installed; install the Azure CLI, then: azd provision" }
& $python (Join-Path $PSScriptRoot 'registrations.py')
if ($LASTEXITCODE -ne 0) { throw 'preprovision: registrations.py failed' }
