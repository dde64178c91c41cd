"""The hooks' Entra scripts against stand-ins for the `az` and `azd` CLIs that keep a directory in
a JSON file. infra/scripts/registrations.py (preprovision) creates the registrations and the
sample app's certificate once, uploads only the certificate, sets the azd values, does nothing new
when run again, and, refused, says what to run and with which privilege, without failing the
provision; with the sample app off it makes none, and removes an earlier run's credentials.
infra/scripts/app_roles.py (postprovision) assigns the front end's app role to each submitting app
and, refused (not an owner, no right to assign, no service principal), says in one line what to
run and with which privilege, without failing the hook."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "infra" / "scripts" / "registrations.py"
APP_ROLES = REPO / "infra" / "scripts" / "app_roles.py"

# A tiny `az`: app list/show/create/update, sp show/create, credential reset/delete, account show,
# and `rest` on appRoleAssignedTo. It refuses, as Graph does, a command starting with an entry of
# "refuse"; an unknown service principal exits 3, as the CLI's ResourceNotFoundError does.
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
def fail(code, message):
    state.write_text(json.dumps(d)); print(f"ERROR: {message}", file=sys.stderr); sys.exit(code)
def opt(name):
    return args[args.index(name) + 1]
if any(args[: len(prefix)] == prefix for prefix in d.get("refuse", [])):
    fail(1, "Insufficient privileges to complete the operation.")
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
    if opt("--id") in d["apps"]:
        save(d["apps"][opt("--id")])
    fail(3, f"Resource '{opt('--id')}' does not exist.")
if args[:3] == ["ad", "app", "update"]:
    app = d["apps"][opt("--id")]
    if "--identifier-uris" in args:
        app["identifierUris"] = [opt("--identifier-uris")]
    if "--set" in args:
        app["api"]["requestedAccessTokenVersion"] = 2
    if "--app-roles" in args:
        app["appRoles"] = json.loads(Path(opt("--app-roles")[1:]).read_text())
    save()
if args[:4] == ["ad", "app", "credential", "reset"]:
    d.setdefault("uploaded", []).append(Path(opt("--cert")[1:]).read_text())
    d["apps"][opt("--id")]["keyCredentials"].append({"customKeyIdentifier": None, "keyId": str(uuid.uuid4())})
    save()
if args[:4] == ["ad", "app", "credential", "delete"] and "--cert" in args:
    keys = d["apps"][opt("--id")]["keyCredentials"]
    d["apps"][opt("--id")]["keyCredentials"] = [k for k in keys if k["keyId"] != opt("--key-id")]
    save()
if args[:3] == ["ad", "sp", "show"]:
    if opt("--id") in d["sps"]:
        save({"id": d["sps"][opt("--id")]})
    fail(3, f"Resource '{opt('--id')}' does not exist.")
if args[:2] == ["rest", "--method"] and opt("--url").endswith("/appRoleAssignedTo"):
    if opt("--method") == "GET":
        save({"value": d.get("assignments", [])})
    d.setdefault("assignments", []).append(json.loads(opt("--body")))
    save({})
if args[:3] == ["ad", "sp", "create"]:
    d["sps"][opt("--id")] = str(uuid.uuid4())
    save({"id": d["sps"][opt("--id")]})
if args[:4] == ["ad", "app", "federated-credential", "list"]:
    save(d["apps"][opt("--id")].get("federated", []))
if args[:4] == ["ad", "app", "federated-credential", "create"]:
    wanted = json.loads(Path(opt("--parameters")[1:]).read_text())
    d["apps"][opt("--id")].setdefault("federated", []).append(wanted)
    save({})
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


def run(
    project: Path, bin_dir: Path, values: dict[str, str], script: Path = SCRIPT
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **values, "AZURE_ENV_NAME": "dev", "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    for name in ("SAS_SAMPLE_APP", "SAS_DEPLOY_SIMULATOR"):  # only as each test says
        if name not in values:
            env.pop(name, None)
    return subprocess.run(
        [sys.executable, str(script)], cwd=project, env=env, capture_output=True, text=True, check=False
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
    refuse = [["ad", "app", "create"]]
    (bin_dir / "directory.json").write_text(
        json.dumps({"apps": {}, "sps": {}, "calls": [], "refuse": refuse})
    )
    refused = run(project, bin_dir, {})
    assert refused.returncode == 0
    assert "Application Developer" in refused.stdout and "Application.ReadWrite.OwnedBy" in refused.stdout
    assert "azd hooks run preprovision" in refused.stdout
    assert [line for line in refused.stdout.splitlines() if "could not" in line] == [
        refused.stdout.strip().splitlines()[-1]
    ]
    assert "SAS_FRONTEND_CLIENT_ID" not in azd_values(project)


# --- the sample app's switch ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "remote"),
    [({"SAS_SAMPLE_APP": "false"}, True), ({"SAS_DEPLOY_SIMULATOR": "false"}, False)],
    ids=["switched-off", "production-follows-the-simulator"],
)
def test_with_the_sample_app_off_no_sample_app_nor_certificate(
    tmp_path: Path, values: dict[str, str], remote: bool
) -> None:
    bin_dir, project = tools(tmp_path), tmp_path / "project"
    project.mkdir()
    done = run(project, bin_dir, values)
    assert done.returncode == 0, done.stdout + done.stderr
    names = {a["displayName"] for a in directory(bin_dir)["apps"].values()}
    assert names == {"sas-api-dev", *(["sas-remote-dev"] if remote else [])}
    assert not (project / ".azure" / "dev" / "sample-app.pem").exists()
    assert "uploaded" not in directory(bin_dir)
    assert not any(
        azd_values(project).get(name) for name in ("SAS_SAMPLE_APP_CLIENT_ID", "SAS_SAMPLE_APP_CERT_PATH")
    )


def test_the_sample_app_is_its_own_switch(tmp_path: Path) -> None:
    """Production's remote service with the sample app asked for (a staging environment)."""
    bin_dir, project = tools(tmp_path), tmp_path / "project"
    project.mkdir()
    done = run(project, bin_dir, {"SAS_DEPLOY_SIMULATOR": "false", "SAS_SAMPLE_APP": "true"})
    assert done.returncode == 0, done.stdout + done.stderr
    names = {a["displayName"] for a in directory(bin_dir)["apps"].values()}
    assert names == {"sas-api-dev", "sas-sample-app-dev"}
    assert Path(azd_values(project)["SAS_SAMPLE_APP_CERT_PATH"]).is_file()


def test_switching_the_sample_app_off_removes_its_credentials(tmp_path: Path) -> None:
    bin_dir, project = tools(tmp_path), tmp_path / "project"
    project.mkdir()
    assert run(project, bin_dir, {}).returncode == 0
    values = azd_values(project)
    sample = values["SAS_SAMPLE_APP_CLIENT_ID"]
    assert directory(bin_dir)["apps"][sample]["keyCredentials"]
    off = run(project, bin_dir, {**values, "SAS_SAMPLE_APP": "false"})
    assert off.returncode == 0, off.stdout + off.stderr
    assert directory(bin_dir)["apps"][sample]["keyCredentials"] == []
    assert not Path(values["SAS_SAMPLE_APP_CERT_PATH"]).exists()
    now = azd_values(project)
    assert [now[name] for name in SAMPLE_VALUES] == [""] * len(SAMPLE_VALUES)
    assert now["SAS_FRONTEND_CLIENT_ID"] == values["SAS_FRONTEND_CLIENT_ID"]


# --- app_roles.py: the front end's app role and its assignments ----------------------------------

FRONT = "f0000000-0000-4000-8000-00000000000f"
SAMPLE = "c1000000-0000-4000-8000-000000000001"
APP_B = "c2000000-0000-4000-8000-000000000002"
DEPLOYER = "d0000000-0000-4000-8000-00000000000d"
SAMPLE_VALUES = (
    "SAS_SAMPLE_APP_NAME",
    "SAS_SAMPLE_APP_CLIENT_ID",
    "SAS_SAMPLE_APP_PRINCIPAL_ID",
    "SAS_SAMPLE_APP_CERT_PATH",
    "SAS_SAMPLE_APP_CERT_THUMBPRINT",
)
HOOK_VALUES = {
    "SAS_FRONTEND_CLIENT_ID": FRONT,
    "SAS_SUBMITTERS": f"sample-app={SAMPLE},app-b={APP_B}",
    "API_AUDIENCE": f"api://{FRONT}",
    "AZURE_PRINCIPAL_ID": DEPLOYER,
}


def roles_directory(tmp_path: Path, *, refuse: list[list[str]], principals: tuple[str, ...]) -> Path:
    """The stand-in CLIs with the front end registered and these apps' service principals."""
    bin_dir = tools(tmp_path)
    front = {"appId": FRONT, "displayName": "sas-api-dev", "appRoles": [], "api": {}}
    sps = {client: f"sp-{client[:2]}" for client in (FRONT, *principals)}
    state = {"apps": {FRONT: front}, "sps": sps, "calls": [], "refuse": refuse}
    (bin_dir / "directory.json").write_text(json.dumps(state))
    return bin_dir


def posts(bin_dir: Path) -> list[list[str]]:
    return [c for c in directory(bin_dir)["calls"] if c[:3] == ["rest", "--method", "POST"]]


def test_app_roles_assigns_every_submitting_app_once(tmp_path: Path) -> None:
    bin_dir = roles_directory(tmp_path, refuse=[], principals=(SAMPLE, APP_B))
    done = run(tmp_path, bin_dir, HOOK_VALUES, APP_ROLES)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 of 2 submitting app(s) hold Orders.Submit" in done.stdout
    state = directory(bin_dir)
    assert [r["value"] for r in state["apps"][FRONT]["appRoles"]] == ["Orders.Submit"]
    role = state["apps"][FRONT]["appRoles"][0]["id"]
    assert {(a["principalId"], a["appRoleId"]) for a in state["assignments"]} == {
        (f"sp-{SAMPLE[:2]}", role),
        (f"sp-{APP_B[:2]}", role),
    }
    before = len(posts(bin_dir))
    again = run(tmp_path, bin_dir, HOOK_VALUES, APP_ROLES)
    assert again.returncode == 0 and len(posts(bin_dir)) == before


@pytest.mark.parametrize(
    ("refuse", "principals", "needles", "lines"),
    [
        (
            [["ad", "app", "update"]],
            (SAMPLE, APP_B),
            (
                f"az ad app owner add --id {FRONT} --owner-object-id {DEPLOYER}",
                "Cloud Application Administrator",
                "Insufficient privileges",
            ),
            1,
        ),
        (
            [["rest", "--method", "POST"]],
            (SAMPLE, APP_B),
            (
                "az rest --method POST --url https://graph.microsoft.com/v1.0/servicePrincipals/",
                "AppRoleAssignment.ReadWrite.All",
                "0 of 2 submitting app(s)",
                "remains: sample-app, app-b",
            ),
            2,
        ),
        (
            [],
            (SAMPLE,),
            (f"az ad sp create --id {APP_B}", "no service principal", "1 of 2", "remains: app-b"),
            1,
        ),
    ],
    ids=["not-an-owner", "no-right-to-assign", "no-service-principal"],
)
def test_app_roles_refused_says_what_to_run_and_the_hook_goes_on(
    tmp_path: Path, refuse: list[list[str]], principals: tuple[str, ...], needles: tuple[str, ...], lines: int
) -> None:
    bin_dir = roles_directory(tmp_path, refuse=refuse, principals=principals)
    done = run(tmp_path, bin_dir, HOOK_VALUES, APP_ROLES)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    for needle in needles:
        assert needle in done.stdout, done.stdout
    refusals = [line for line in done.stdout.splitlines() if "could not" in line]
    assert len(refusals) == lines and all("It needs" in line and "runs:" in line for line in refusals)


def test_app_roles_other_failures_are_one_line_and_fail_the_hook(tmp_path: Path) -> None:
    """Not a missing right (here: the front end's registration is unknown): exit 1, no traceback."""
    bin_dir = roles_directory(tmp_path, refuse=[], principals=(SAMPLE, APP_B))
    state = directory(bin_dir)
    state["apps"] = {}
    (bin_dir / "directory.json").write_text(json.dumps(state))
    done = run(tmp_path, bin_dir, HOOK_VALUES, APP_ROLES)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "app_roles: could not set the Orders.Submit app role" in done.stdout


PIPELINE_SUBJECT = "repo:contoso/orders:ref:refs/heads/main"


def test_the_sample_app_trusts_the_pipeline_once(tmp_path: Path) -> None:
    bin_dir = tools(tmp_path)
    for _ in range(2):
        done = run(tmp_path, bin_dir, {"SAS_PIPELINE_SUBJECT": PIPELINE_SUBJECT})
        assert done.returncode == 0, done.stdout + done.stderr
    apps = directory(bin_dir)["apps"].values()
    sample = next(app for app in apps if app["displayName"] == "sas-sample-app-dev")
    assert sample["federated"] == [
        {
            "name": "github-pipeline",
            "issuer": "https://token.actions.githubusercontent.com",
            "subject": PIPELINE_SUBJECT,
            "audiences": ["api://AzureADTokenExchange"],
            "description": "the deploying pipeline's smoke test signs in as the sample app",
        }
    ]
    assert not any(app.get("federated") for app in apps if app is not sample)


def test_in_the_pipeline_nothing_is_registered_and_the_values_are_checked(tmp_path: Path) -> None:
    bin_dir = tools(tmp_path)
    values = {
        "SAS_PIPELINE": "true",
        "SAS_FRONTEND_CLIENT_ID": "11111111-0000-4000-8000-000000000001",
        "SAS_REMOTE_CLIENT_ID": "11111111-0000-4000-8000-000000000002",
        "SAS_SAMPLE_APP_NAME": "sample-app",
        "SAS_SAMPLE_APP_CLIENT_ID": "11111111-0000-4000-8000-000000000003",
        "SAS_SAMPLE_APP_PRINCIPAL_ID": "11111111-0000-4000-8000-000000000004",
    }
    done = run(tmp_path, bin_dir, values)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "skipped in the pipeline (SAS_PIPELINE=true): they need Microsoft Graph rights" in done.stdout
    assert not (bin_dir / "directory.json").exists()  # az never ran

    done = run(tmp_path, bin_dir, {**values, "SAS_REMOTE_CLIENT_ID": "", "SAS_SAMPLE_APP_CLIENT_ID": ""})
    assert done.returncode == 1
    assert "it lacks SAS_REMOTE_CLIENT_ID, SAS_SAMPLE_APP_CLIENT_ID" in done.stdout
    assert "azd hooks run preprovision, then azd pipeline config" in done.stdout


def test_app_roles_in_the_pipeline_says_a_person_runs_it(tmp_path: Path) -> None:
    bin_dir = tools(tmp_path)
    done = run(tmp_path, bin_dir, {"SAS_PIPELINE": "true", "SAS_FRONTEND_CLIENT_ID": "x"}, script=APP_ROLES)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "skipped in the pipeline (SAS_PIPELINE=true)" in done.stdout
    assert "azd hooks run postprovision" in done.stdout
    assert not (bin_dir / "directory.json").exists()
