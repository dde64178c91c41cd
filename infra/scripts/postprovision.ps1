# azd postprovision hook (Windows): the same steps as postprovision.sh. Needs the Azure CLI signed
# in as the deploying principal and go-sqlcmd.
$ErrorActionPreference = 'Stop'

foreach ($name in 'AZURE_RESOURCE_GROUP', 'AZURE_SQL_SERVER_NAME', 'AZURE_SQL_SERVER_FQDN', 'AZURE_SQL_DATABASE_NAME', 'API_IDENTITY_NAME') {
    if (-not (Get-Item "env:$name" -ErrorAction SilentlyContinue)) { throw "postprovision: $name is not set; run through azd" }
}
foreach ($tool in 'az', 'sqlcmd') {
    if (-not (Get-Command $tool -ErrorAction SilentlyContinue)) { throw "postprovision: '$tool' is not installed; install it, then run: azd hooks run postprovision" }
}

$sqlDir = Join-Path $PSScriptRoot '..\sql'
$rule = 'azd-postprovision'
$clientIp = if ($env:SAS_CLIENT_IP) { $env:SAS_CLIENT_IP } else { (Invoke-RestMethod -Uri 'https://api.ipify.org').Trim() }
Write-Host "postprovision: allowing $clientIp on $env:AZURE_SQL_SERVER_NAME while the scripts run"
az sql server firewall-rule create --resource-group $env:AZURE_RESOURCE_GROUP --server $env:AZURE_SQL_SERVER_NAME `
    --name $rule --start-ip-address $clientIp --end-ip-address $clientIp --output none
if ($LASTEXITCODE -ne 0) { throw 'postprovision: could not add the firewall rule' }

function Invoke-Sql([string[]] $SqlArgs) {
    for ($attempt = 1; $attempt -le 5; $attempt++) {
        sqlcmd -S "tcp:$($env:AZURE_SQL_SERVER_FQDN),1433" -d $env:AZURE_SQL_DATABASE_NAME `
            --authentication-method ActiveDirectoryDefault -b @SqlArgs
        if ($LASTEXITCODE -eq 0) { return }
        Start-Sleep -Seconds 10
    }
    throw 'postprovision: sqlcmd failed 5 times'
}

try {
    Write-Host 'postprovision: orders schema'
    # The app's own schema (adapters/sql/schema.py), written as T-SQL by the app's venv; idempotent.
    $python = if ($env:SAS_PYTHON) { $env:SAS_PYTHON } else { '.venv\Scripts\python.exe' }
    $schema = New-TemporaryFile
    & $python -m ops schema --script sqlserver | Set-Content -Path $schema -Encoding utf8
    if ($LASTEXITCODE -ne 0) { throw "postprovision: $python -m ops schema failed (make venv, or set SAS_PYTHON)" }
    Invoke-Sql @('-i', $schema.FullName)
    Remove-Item $schema
    Write-Host "postprovision: database user for $env:API_IDENTITY_NAME"
    Invoke-Sql @('-v', "APP_IDENTITY_NAME=$($env:API_IDENTITY_NAME)", '-i', (Join-Path $sqlDir 'users.sql'))
    Write-Host "postprovision: the front end's Orders.Submit app role and its submitting apps' assignments"
    & $python (Join-Path $PSScriptRoot 'app_roles.py')
    if ($LASTEXITCODE -ne 0) { throw 'app_roles.py failed' }
    Write-Host 'postprovision: done'
}
finally {
    az sql server firewall-rule delete --resource-group $env:AZURE_RESOURCE_GROUP --server $env:AZURE_SQL_SERVER_NAME `
        --name $rule --output none
}
