"""azd preprovision step: the Entra registrations a first deployment needs, before Bicep reads them.

Idempotent (found by display name, or by the client ID already in the azd environment):

- the front end's API, ``sas-api-<env>``: App ID URI ``api://<client ID>``, v2.0 tokens, a service
  principal; ``SAS_FRONTEND_CLIENT_ID`` (main.bicep ``frontEndClientId``). Its ``Orders.Submit``
  app role and the role assignments come after provisioning (app_roles.py, postprovision);
- with the simulator (``SAS_DEPLOY_SIMULATOR`` not ``false``), the remote service's audience,
  ``sas-remote-<env>``, the same way; ``SAS_REMOTE_CLIENT_ID`` (main.bicep ``remoteClientId``): the
  agent asks a token for it and the simulator admits only the agent's;
- the sample submitting app ``sample-app`` (main.bicep ``sampleAppName``, listed in
  main.parameters.json ``submittingApps``), registered as ``sas-sample-app-<env>``, with a
  certificate credential whose private key never leaves this machine: generated here, kept with
  its certificate in ``.azure/<env>/<name>.pem`` (mode 0600; ``.azure/`` is git-ignored); only the
  certificate is uploaded. No client secret. ``SAS_SAMPLE_APP_CLIENT_ID``,
  ``SAS_SAMPLE_APP_PRINCIPAL_ID`` (its status queue's Receiver), ``SAS_SAMPLE_APP_CERT_PATH``,
  ``SAS_SAMPLE_APP_NAME``, and ``AZURE_TENANT_ID``.

azd reads the environment again after a hook, so the provision that follows uses these values. If
the signed-in principal may not create registrations, this prints the commands to run and the least
privilege they need, and exits 0: the provision goes on without them (every submission is then
refused until they exist and ``azd provision`` runs again).

Run with the app's venv (it has ``cryptography``): preprovision.sh / preprovision.ps1.
"""

import base64
import json
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

CERT_YEARS = 1
# main.bicep sampleAppName; main.parameters.json lists it in submittingApps (its status queue).
SAMPLE_APP = "sample-app"
LEAST_PRIVILEGE = (
    "a member user may register applications while the tenant lets users do so (its default); "
    "otherwise the Entra role Application Developer; a pipeline's service principal needs the "
    "Microsoft Graph application permission Application.ReadWrite.OwnedBy"
)


class NotAllowed(Exception):
    pass


def az(*args: str) -> Any:
    done = subprocess.run(["az", *args, "--output", "json"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise NotAllowed(
            f"az {' '.join(args[:3])}: {done.stderr.strip().splitlines()[-1:] or done.returncode}"
        )
    return json.loads(done.stdout) if done.stdout.strip() else None


def azd_set(name: str, value: str) -> None:
    subprocess.run(["azd", "env", "set", name, value], check=True)
    print(f"registrations: {name}={value}")


def registration(display_name: str, known_client_id: str) -> dict[str, Any]:
    """The registration with this client ID, else the one with this display name, else a new one."""
    if known_client_id:
        found: dict[str, Any] = az("ad", "app", "show", "--id", known_client_id)
        return found
    same = [
        a
        for a in az("ad", "app", "list", "--display-name", display_name) or []
        if a["displayName"] == display_name
    ]
    if len(same) > 1:
        raise NotAllowed(
            f"{len(same)} registrations are named {display_name}: set the client ID with azd env set"
        )
    if same:
        first: dict[str, Any] = same[0]
        return first
    print(f"registrations: creating {display_name}")
    created: dict[str, Any] = az(
        "ad", "app", "create", "--display-name", display_name, "--sign-in-audience", "AzureADMyOrg"
    )
    return created


def service_principal(client_id: str) -> str:
    """The object ID of the registration's service principal in this tenant, created if missing."""
    try:
        return str(az("ad", "sp", "show", "--id", client_id)["id"])
    except NotAllowed:
        return str(az("ad", "sp", "create", "--id", client_id)["id"])


def api(display_name: str, known_client_id: str) -> str:
    """An API registration: App ID URI api://<client ID> and v2.0 tokens (their ``aud`` is the client
    ID and their issuer the tenant's v2.0 one, as the verifiers expect); its client ID."""
    app = registration(display_name, known_client_id)
    client_id = str(app["appId"])
    uri = f"api://{client_id}"
    if uri not in (app.get("identifierUris") or []):
        az("ad", "app", "update", "--id", client_id, "--identifier-uris", uri)
    if (app.get("api") or {}).get("requestedAccessTokenVersion") != 2:
        az("ad", "app", "update", "--id", client_id, "--set", "api.requestedAccessTokenVersion=2")
    service_principal(client_id)
    return client_id


def thumbprint(cert: x509.Certificate) -> bytes:
    # Entra names a key credential by its SHA-1 thumbprint.
    return cert.fingerprint(hashes.SHA1())


def new_certificate(path: Path, subject: str) -> x509.Certificate:
    """A self-signed certificate and its private key, written together as PEM (0600) to ``path``."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=365 * CERT_YEARS))
        .sign(key, hashes.SHA256())
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(private + cert.public_bytes(serialization.Encoding.PEM))
    print(f"registrations: new certificate and private key in {path} (never uploaded)")
    return cert


def sample_app(
    display_name: str, known_client_id: str, pem: Path, known_thumbprint: str
) -> tuple[str, str, str]:
    """The sample submitting app with this machine's certificate as its credential; its client ID,
    service principal's object ID and the certificate's thumbprint (hex)."""
    app = registration(display_name, known_client_id)
    client_id = str(app["appId"])
    cert = (
        x509.load_pem_x509_certificate(pem.read_bytes())
        if pem.is_file()
        else new_certificate(pem, display_name)
    )
    uploaded = {
        base64.b64decode(k["customKeyIdentifier"]).hex().upper()
        for k in app.get("keyCredentials") or []
        if k.get("customKeyIdentifier")
    } | {known_thumbprint.upper()}
    own = thumbprint(cert).hex().upper()
    if own not in uploaded:
        with tempfile.NamedTemporaryFile("wb", suffix=".pem", delete=False) as public:
            public.write(cert.public_bytes(serialization.Encoding.PEM))
        try:
            az("ad", "app", "credential", "reset", "--id", client_id, "--cert", f"@{public.name}", "--append")
        finally:
            os.unlink(public.name)
        print(f"registrations: uploaded the certificate (public part only) to {display_name}")
    return client_id, service_principal(client_id), own


def main() -> int:
    env = os.environ
    env_name = env.get("AZURE_ENV_NAME", "")
    if not env_name:
        print(
            "registrations: AZURE_ENV_NAME is not set: run through azd "
            "(azd provision, or azd hooks run preprovision)"
        )
        return 1
    sample = SAMPLE_APP
    pem = Path(".azure", env_name, f"{sample}.pem").resolve()
    simulator = env.get("SAS_DEPLOY_SIMULATOR", "true").lower() != "false"
    try:
        tenant = str(az("account", "show")["tenantId"])
        azd_set("AZURE_TENANT_ID", tenant)
        azd_set("SAS_FRONTEND_CLIENT_ID", api(f"sas-api-{env_name}", env.get("SAS_FRONTEND_CLIENT_ID", "")))
        if simulator:
            azd_set(
                "SAS_REMOTE_CLIENT_ID", api(f"sas-remote-{env_name}", env.get("SAS_REMOTE_CLIENT_ID", ""))
            )
        client_id, principal, cert = sample_app(
            f"sas-{sample}-{env_name}",
            env.get("SAS_SAMPLE_APP_CLIENT_ID", ""),
            pem,
            env.get("SAS_SAMPLE_APP_CERT_THUMBPRINT", ""),
        )
    except NotAllowed as refused:
        print(
            f"registrations: could not create the Entra registrations ({refused}).\n"
            f"  Needed: {LEAST_PRIVILEGE}.\n"
            "  Ask someone who has it to run, from this repository with this azd environment selected:\n"
            "    azd hooks run preprovision\n"
            "  (or create them by hand: infra/README.md, 'Entra registrations'), then: azd provision\n"
            "  Until then the provision goes on without them, and the front end refuses every submission."
        )
        return 0
    azd_set("SAS_SAMPLE_APP_NAME", sample)
    azd_set("SAS_SAMPLE_APP_CLIENT_ID", client_id)
    azd_set("SAS_SAMPLE_APP_PRINCIPAL_ID", principal)
    azd_set("SAS_SAMPLE_APP_CERT_PATH", str(pem))
    azd_set("SAS_SAMPLE_APP_CERT_THUMBPRINT", cert)
    return 0


if __name__ == "__main__":
    sys.exit(main())
