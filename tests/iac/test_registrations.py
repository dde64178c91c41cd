"""infra/scripts/registrations.py (the preprovision hook) against stand-ins for the `az` and `azd`
CLIs that keep a directory in a JSON file: it creates the registrations and the sample app's
certificate once, uploads only the certificate, sets the azd values, does nothing new when run
again, and, refused, says what to run and with which privilege, without failing the provision."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "infra" / "scripts" / "registrations.py"

# A tiny `az`: app list/show/create/update, sp show/create, credential reset, account show.
FAKE_AZ = r"""
import json, sys, uuid
from pathlib import Path
state = Path(__file__).with_name("directory.json")
d = json.loads(state.read_text()) if state.exists() else {"apps": {}, "sps": {}, "calls": []}
args = [a for a in sys.argv[1:] if a not in ("--output", "json")]
d["calls"].append(args)
def save(out=None):
    state.write_text(json.dumps(d))
    if out is not None:
        print(json.dumps(out))
    sys.exit(0)
def opt(name):
    return args[args.index(name) + 1]
if d.get("refuse") and args[:3] == ["ad", "app", "create"]:
    state.write_text(json.dumps(d)); print("Insufficient privileges", file=sys.stderr); sys.exit(1)
if args[:2] == ["account", "show"]:
    save({"tenantId": "7e000000-0000-4000-8000-000000000007"})
if args[:3] == ["ad", "app", "list"]:
    save([a for a in d["apps"].values() if a["displayName"] == opt("--display-name")])
if args[:3] == ["ad", "app", "create"]:
    app_id = str(uuid.uuid4())
    d["apps"][app_id] = {"appId": app_id, "displayName": opt("--display-name"), "identifierUris": [],
                         "api": {"requestedAccessTokenVersion": None}, "keyCredentials": []}
    save(d["apps"][app_id])
if args[:3] == ["ad", "app", "show"]:
    save(d["apps"][opt("--id")])
if args[:3] == ["ad", "app", "update"]:
    app = d["apps"][opt("--id")]
    if "--identifier-uris" in args:
        app["identifierUris"] = [opt("--identifier-uris")]
    if "--set" in args:
        app["api"]["requestedAccessTokenVersion"] = 2
    save()
if args[:4] == ["ad", "app", "credential", "reset"]:
    d.setdefault("uploaded", []).append(Path(opt("--cert")[1:]).read_text())
    d["apps"][opt("--id")]["keyCredentials"].append({"customKeyIdentifier": None})
    save()
if args[:3] == ["ad", "sp", "show"]:
    if opt("--id") in d["sps"]:
        save({"id": d["sps"][opt("--id")]})
    state.write_text(json.dumps(d)); sys.exit(3)
if args[:3] == ["ad", "sp", "create"]:
    d["sps"][opt("--id")] = str(uuid.uuid4())
    save({"id": d["sps"][opt("--id")]})
sys.exit(f"fake az: {args}")
"""
# A tiny `azd env set`: into .azure/<env>/.env, as NAME="value" lines.
FAKE_AZD = r"""
import os, sys
from pathlib import Path
_, _, name, value = sys.argv[1:5] if sys.argv[1:3] == ["env", "set"] else sys.exit("fake azd")
path = Path(".azure", os.environ["AZURE_ENV_NAME"], ".env")
path.parent.mkdir(parents=True, exist_ok=True)
lines = [l for l in (path.read_text().splitlines() if path.exists() else []) if not l.startswith(name + "=")]
path.write_text("\n".join([*lines, f'{name}="{value}"']) + "\n")
"""


def tools(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, source in (("az", FAKE_AZ), ("azd", FAKE_AZD)):
        (bin_dir / f"{name}.py").write_text(source)
        launcher = bin_dir / name
        launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{bin_dir / name}.py" "$@"\n')
        launcher.chmod(launcher.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def azd_values(project: Path) -> dict[str, str]:
    text = (project / ".azure" / "dev" / ".env").read_text()
    return {k: v.strip('"') for k, _, v in (line.partition("=") for line in text.splitlines())}


def run(project: Path, bin_dir: Path, values: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **values, "AZURE_ENV_NAME": "dev", "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return subprocess.run(
        [sys.executable, str(SCRIPT)], cwd=project, env=env, capture_output=True, text=True, check=False
    )


def directory(bin_dir: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((bin_dir / "directory.json").read_text())
    return loaded


def test_registrations_once_with_the_key_kept_local(tmp_path: Path) -> None:
    bin_dir, project = tools(tmp_path), tmp_path / "project"
    project.mkdir()
    first = run(project, bin_dir, {})
    assert first.returncode == 0, first.stdout + first.stderr
    values = azd_values(project)
    apps = directory(bin_dir)["apps"]
    assert {a["displayName"] for a in apps.values()} == {
        "sas-api-dev",
        "sas-remote-dev",
        "sas-sample-app-dev",
    }
    assert apps[values["SAS_FRONTEND_CLIENT_ID"]]["identifierUris"] == [
        f"api://{values['SAS_FRONTEND_CLIENT_ID']}"
    ]
    assert apps[values["SAS_REMOTE_CLIENT_ID"]]["api"]["requestedAccessTokenVersion"] == 2
    assert values["SAS_SAMPLE_APP_NAME"] == "sample-app"
    assert values["AZURE_TENANT_ID"] == "7e000000-0000-4000-8000-000000000007"
    pem = Path(values["SAS_SAMPLE_APP_CERT_PATH"])
    assert pem == (project / ".azure" / "dev" / "sample-app.pem").resolve()
    assert stat.S_IMODE(pem.stat().st_mode) == 0o600
    load_pem_private_key(pem.read_bytes(), password=None)  # the key is there, unencrypted, for ops
    cert = x509.load_pem_x509_certificate(pem.read_bytes())
    uploaded = directory(bin_dir)["uploaded"]
    assert len(uploaded) == 1 and "PRIVATE KEY" not in uploaded[0]
    assert x509.load_pem_x509_certificate(uploaded[0].encode()) == cert

    # Again, with the values azd now holds: nothing created, nothing uploaded, the same values.
    calls = len(directory(bin_dir)["calls"])
    again = run(project, bin_dir, values)
    assert again.returncode == 0, again.stdout + again.stderr
    new_calls = directory(bin_dir)["calls"][calls:]
    assert not [
        c for c in new_calls if c[:3] == ["ad", "app", "create"] or c[:3] == ["ad", "app", "credential"]
    ]
    assert azd_values(project) == values
    assert x509.load_pem_x509_certificate(pem.read_bytes()) == cert


def test_without_the_right_it_says_what_to_run_and_lets_the_provision_go_on(tmp_path: Path) -> None:
    bin_dir, project = tools(tmp_path), tmp_path / "project"
    project.mkdir()
    (bin_dir / "directory.json").write_text(json.dumps({"apps": {}, "sps": {}, "calls": [], "refuse": True}))
    refused = run(project, bin_dir, {})
    assert refused.returncode == 0
    assert "Application Developer" in refused.stdout and "Application.ReadWrite.OwnedBy" in refused.stdout
    assert "azd hooks run preprovision" in refused.stdout
    assert "SAS_FRONTEND_CLIENT_ID" not in azd_values(project)
