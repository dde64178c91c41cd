# azd preprovision hook (Windows): the same step as preprovision.sh (infra/scripts/registrations.py
# with the app's venv). Needs the Azure CLI signed in.
$ErrorActionPreference = 'Stop'

$python = if ($env:SAS_PYTHON) { $env:SAS_PYTHON } else { '.venv\Scripts\python.exe' }
if (-not (Test-Path $python)) { throw "preprovision: no $python; create the venv (make venv) or set SAS_PYTHON, then: azd provision" }
if (-not (Get-Command az -ErrorAction SilentlyContinue)) { throw "preprovision: 'az' is not installed; install the Azure CLI, then: azd provision" }
& $python (Join-Path $PSScriptRoot 'registrations.py')
if ($LASTEXITCODE -ne 0) { throw 'preprovision: registrations.py failed' }

# The operator's address Cosmos DB and the compensation log admit (preprovision.sh says why).
if ($env:SAS_GRANT_DEPLOYER_OPERATOR_ROLES -ne 'false' -and -not $env:SAS_OPERATOR_IP -and -not $env:CI) {
    $operatorIp = if ($env:SAS_CLIENT_IP) { $env:SAS_CLIENT_IP } else { (Invoke-RestMethod -Uri 'https://api.ipify.org').Trim() }
    Write-Host "preprovision: admitting $operatorIp to Cosmos DB and the compensation log (SAS_OPERATOR_IP)"
    azd env set SAS_OPERATOR_IP $operatorIp
    if ($LASTEXITCODE -ne 0) { throw 'preprovision: azd env set SAS_OPERATOR_IP failed' }
}
