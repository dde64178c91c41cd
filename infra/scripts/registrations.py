"""azd preprovision step: the Entra registrations a first deployment needs, before Bicep reads them.

Idempotent (found by display name, or by the client ID already in the azd environment):

- the front end's API, ``sas-api-<env>``: App ID URI ``api://<client ID>``, v2.0 tokens, a service
  principal; ``SAS_FRONTEND_CLIENT_ID`` (main.bicep ``frontEndClientId``). Its ``Orders.Submit``
  app role and the role assignments come after provisioning (app_roles.py, postprovision);
- with the simulator (``SAS_DEPLOY_SIMULATOR`` not ``false``), the remote service's audience,
  ``sas-remote-<env>``, the same way; ``SAS_REMOTE_CLIENT_ID`` (main.bicep ``remoteClientId``): the
  agent asks a token for it and the simulator admits only the agent's;
- with the sample app (``SAS_SAMPLE_APP``; unset or empty, ``SAS_DEPLOY_SIMULATOR``'s value;
  both unset, on: main.parameters.json ``sampleApp``), the sample submitting app ``sample-app``
  (main.bicep ``sampleAppName``, which main.bicep adds to the registered apps), registered as
  ``sas-sample-app-<env>``, with a certificate credential whose private key never leaves this
  machine: generated here, kept with its certificate in ``.azure/<env>/<name>.pem`` (mode 0600;
  ``.azure/`` is git-ignored); only the certificate is uploaded. No client secret.
  ``SAS_SAMPLE_APP_CLIENT_ID``, ``SAS_SAMPLE_APP_PRINCIPAL_ID`` (its status queue's Receiver),
  ``SAS_SAMPLE_APP_CERT_PATH``, ``SAS_SAMPLE_APP_NAME``, and ``AZURE_TENANT_ID``;
- without it (production), no sample app is created, and none keeps a credential: the local key
  is deleted, every certificate of an earlier run's registration removed (the registration stays,
  unable to sign in, so switching it on again finds it), and those azd values emptied.

azd reads the environment again after a hook, so the provision that follows uses these values. If
the signed-in principal may not create registrations, this prints the command to run and the least
privilege it needs (azcli.refusal, one line), and exits 0: the provision goes on without them
(every submission is then refused until they exist and ``azd provision`` runs again).

Run with the app's venv (it has ``cryptography``): preprovision.sh / preprovision.ps1.
"""

import base64
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from azcli import AzError, az, refusal
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

CERT_YEARS = 1
# main.bicep sampleAppName; main.parameters.json lists it in submittingApps (its status queue).
SAMPLE_APP = "sample-app"
LEAST_PRIVILEGE = (
    "the right to register applications: a member user has it while the tenant lets users register "
    "them (its default), else the Entra role Application Developer; a pipeline's service principal "
    "needs the Microsoft Graph application permission Application.ReadWrite.OwnedBy"
)
# Removing a credential from a registration (the sample app's, switched off).
OWNER_PRIVILEGE = "ownership of that registration, or the Entra role Cloud Application Administrator"
# azd's bool parameters read these as false (Go's strconv.ParseBool); anything else here is on.
FALSE = frozenset({"false", "f", "0"})
SAMPLE_APP_VALUES = (
    "SAS_SAMPLE_APP_NAME",
    "SAS_SAMPLE_APP_CLIENT_ID",
    "SAS_SAMPLE_APP_PRINCIPAL_ID",
    "SAS_SAMPLE_APP_CERT_PATH",
    "SAS_SAMPLE_APP_CERT_THUMBPRINT",
)


class Ambiguous(Exception):
    pass


def switched_on(env: Mapping[str, str], *names: str) -> bool:
    """As main.parameters.json's ``${A=${B=true}}``: the first of ``names`` set and not empty
    decides, and with none of them, on."""
    value = next((env[name] for name in names if env.get(name, "").strip()), "true")
    return value.strip().lower() not in FALSE


def azd_set(name: str, value: str) -> None:
    subprocess.run(["azd", "env", "set", name, value], check=True)
    print(f"registrations: {name}={value}")


def existing(display_name: str, known_client_id: str) -> dict[str, Any] | None:
    """The registration with this client ID, else the one with this display name, else None."""
    if known_client_id:
        found: dict[str, Any] = az("ad", "app", "show", "--id", known_client_id)
        return found
    same = [
        a
        for a in az("ad", "app", "list", "--display-name", display_name) or []
        if a["displayName"] == display_name
    ]
    if len(same) > 1:
        raise Ambiguous(f"{len(same)} registrations are named {display_name}")
    first: dict[str, Any] | None = same[0] if same else None
    return first


def registration(display_name: str, known_client_id: str) -> dict[str, Any]:
    """The registration with this client ID, else the one with this display name, else a new one."""
    found = existing(display_name, known_client_id)
    if found is not None:
        return found
    print(f"registrations: creating {display_name}")
    created: dict[str, Any] = az(
        "ad", "app", "create", "--display-name", display_name, "--sign-in-audience", "AzureADMyOrg"
    )
    return created


def service_principal(client_id: str) -> str:
    """The object ID of the registration's service principal in this tenant, created if missing."""
    try:
        return str(az("ad", "sp", "show", "--id", client_id)["id"])
    except AzError:
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


def retire_sample_app(display_name: str, known_client_id: str, pem: Path) -> None:
    """The sample app switched off: its private key deleted here, and every certificate of its
    registration, if an earlier run made one, removed from Entra ID (printed as a refusal when
    the signed-in principal may not)."""
    if pem.exists():
        pem.unlink()
        print(f"registrations: the sample app is off: deleted its private key {pem}")
    client_id = known_client_id or "<its client ID>"
    try:
        app = existing(display_name, known_client_id)
        if app is None:
            return
        client_id = str(app["appId"])
        for key_id in [str(k["keyId"]) for k in app.get("keyCredentials") or []]:
            az("ad", "app", "credential", "delete", "--id", client_id, "--key-id", key_id, "--cert")
            print(f"registrations: the sample app is off: removed certificate {key_id} from {display_name}")
    except AzError as error:
        if error.missing:
            return
        print(
            refusal(
                "registrations",
                f"remove the certificates of {display_name}, the sample app switched off",
                error.reason,
                needed=OWNER_PRIVILEGE,
                command=f"az ad app credential list --id {client_id} --cert, and for each keyId: "
                f"az ad app credential delete --id {client_id} --key-id <keyId> --cert",
                meanwhile="Its private key on this machine is deleted: no one here can sign in as it.",
            )
        )


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
    display_name = f"sas-{sample}-{env_name}"
    pem = Path(".azure", env_name, f"{sample}.pem").resolve()
    simulator = switched_on(env, "SAS_DEPLOY_SIMULATOR")
    with_sample = switched_on(env, "SAS_SAMPLE_APP", "SAS_DEPLOY_SIMULATOR")
    try:
        tenant = str(az("account", "show")["tenantId"])
        azd_set("AZURE_TENANT_ID", tenant)
        azd_set("SAS_FRONTEND_CLIENT_ID", api(f"sas-api-{env_name}", env.get("SAS_FRONTEND_CLIENT_ID", "")))
        if simulator:
            azd_set(
                "SAS_REMOTE_CLIENT_ID", api(f"sas-remote-{env_name}", env.get("SAS_REMOTE_CLIENT_ID", ""))
            )
        if with_sample:
            client_id, principal, cert = sample_app(
                display_name,
                env.get("SAS_SAMPLE_APP_CLIENT_ID", ""),
                pem,
                env.get("SAS_SAMPLE_APP_CERT_THUMBPRINT", ""),
            )
    except Ambiguous as error:
        print(f"registrations: {error}: choose one and azd env set its client ID, then: azd provision")
        return 0
    except AzError as error:
        print(
            refusal(
                "registrations",
                "create the Entra registrations",
                error.reason,
                needed=LEAST_PRIVILEGE,
                command="azd hooks run preprovision (on this machine, in this repository, with this azd "
                "environment selected: it writes the sample app's key where it runs), then: azd provision",
                meanwhile="Until then the provision goes on without them, and the front end refuses every "
                "submission (or create them by hand: infra/README.md, 'Entra registrations').",
            )
        )
        return 0
    if not with_sample:
        return retired(display_name, env.get("SAS_SAMPLE_APP_CLIENT_ID", ""), pem, env)
    values = (sample, client_id, principal, str(pem), cert)
    for name, value in zip(SAMPLE_APP_VALUES, values, strict=True):
        azd_set(name, value)
    return 0


def retired(display_name: str, known_client_id: str, pem: Path, env: Mapping[str, str]) -> int:
    """The sample app off: no credential for it anywhere, and its azd values emptied."""
    try:
        retire_sample_app(display_name, known_client_id, pem)
    except Ambiguous as error:
        print(
            f"registrations: {error}: remove each one's certificates by hand "
            "(az ad app credential delete --id <client ID> --key-id <keyId> --cert)"
        )
    for name in SAMPLE_APP_VALUES:
        if env.get(name):
            azd_set(name, "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
