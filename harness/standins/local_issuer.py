"""A local stand-in for the Entra tenant that issues submitting apps' tokens: harness, never shipped.

devhost, ``make run``, ``make demo``, the e2e tests and the hostile-token suite point the app's
``SAS_AUTH_AUTHORITY`` here, so the front end runs the very validator it runs in Azure
(adapters/entra_tokens.py) against a real issuer: an RSA key pair made at start-up, its OpenID
configuration and JWKS served on loopback, and a client-credentials token endpoint shaped like
Entra's (``POST /<tenant>/oauth2/v2.0/token``) that ``python -m ops token --app NAME`` calls.
Tokens look like Entra v2.0 application tokens (``idtyp`` ``app``, ``azp``, ``roles``); the
endpoint grants the submit role to the client IDs it was told are assigned it, as the app role
assignment does in Entra. Tests mint any token they like with ``mint``.

    python -m harness.standins.local_issuer -- python -m harness.devhost start   # what `make run` does

reads ``SAS_AUTH_AUTHORITY`` (its port), ``SAS_AUTH_TENANT_ID``, ``SAS_AUTH_AUDIENCE`` and
``SAS_SUBMITTERS`` from the environment and ``local.settings.json``, and serves while the command runs.
"""

import argparse
import errno
import json
import os
import subprocess
import sys
import threading
import urllib.parse
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from adapters.local_settings import load_local_settings
from domain.apps import SUBMIT_ROLE, Registry
from domain.ports import Clock
from settings import SettingsError

TOKEN_LIFETIME = timedelta(hours=1)


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class LocalIssuer:
    """One tenant's issuer on loopback. ``available = False`` makes every endpoint answer 503
    (the keys endpoint down); ``rotate()`` publishes a new signing key in place of the old."""

    def __init__(
        self,
        tenant_id: str,
        audience: str,
        *,
        assigned: Iterable[str] = (),
        clock: Clock | None = None,
        port: int = 0,
    ) -> None:
        self.tenant_id = tenant_id
        self.audience = audience
        self.assigned = {client_id.lower() for client_id in assigned}
        self.clock = clock
        self.available = True
        self.key_set_requests = 0
        self.key = new_key()
        self.kid = uuid.uuid4().hex
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._stopped = False
        self._thread = threading.Thread(target=self._server.serve_forever, name="local-issuer", daemon=True)

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> "LocalIssuer":
        self._thread.start()
        return self

    def stop(self) -> None:
        """Idempotent: an issuer kept across two deployments in a test is stopped by either."""
        if self._stopped:
            return
        self._stopped = True
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "LocalIssuer":
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def authority(self) -> str:
        """What the app's ``SAS_AUTH_AUTHORITY`` names: ``https://login.microsoftonline.com`` in Azure."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def issuer(self) -> str:
        return f"{self.authority}/{self.tenant_id}/v2.0"

    def settings(self) -> dict[str, str]:
        """The app settings that make the front end trust this issuer."""
        return {
            "SAS_AUTH_AUTHORITY": self.authority,
            "SAS_AUTH_TENANT_ID": self.tenant_id,
            "SAS_AUTH_AUDIENCE": self.audience,
        }

    def rotate(self) -> str:
        """A new signing key, published instead of the old one; its kid."""
        self.key, self.kid = new_key(), uuid.uuid4().hex
        return self.kid

    # --- tokens ---------------------------------------------------------------------------------

    def now(self) -> datetime:
        return self.clock.now() if self.clock is not None else datetime.now(UTC)

    def claims(
        self, client_id: str, *, now: datetime | None = None, roles: Iterable[str] = (SUBMIT_ROLE,)
    ) -> dict[str, Any]:
        """The claims of an Entra v2.0 application (client credentials) token for ``client_id``."""
        issued = now or self.now()
        principal = str(uuid.uuid5(uuid.NAMESPACE_URL, f"sp:{client_id}"))
        return {
            "aud": self.audience,
            "iss": self.issuer,
            "iat": int(issued.timestamp()),
            "nbf": int(issued.timestamp()),
            "exp": int((issued + TOKEN_LIFETIME).timestamp()),
            "azp": client_id,
            "azpacr": "1",
            "idtyp": "app",
            "oid": principal,
            "sub": principal,
            "roles": list(roles),
            "tid": self.tenant_id,
            "uti": uuid.uuid4().hex[:22],
            "ver": "2.0",
        }

    def mint(
        self,
        client_id: str,
        *,
        now: datetime | None = None,
        roles: Iterable[str] = (SUBMIT_ROLE,),
        changes: Mapping[str, Any] | None = None,
        drop: Iterable[str] = (),
        key: rsa.RSAPrivateKey | None = None,
        kid: str | None = None,
    ) -> str:
        """A signed token for ``client_id``; ``changes``/``drop`` alter its claims, ``key``/``kid``
        its signature, for the tests that must be refused."""
        claims = self.claims(client_id, now=now, roles=roles) | dict(changes or {})
        for name in drop:
            claims.pop(name, None)
        return jwt.encode(claims, key or self.key, algorithm="RS256", headers={"kid": kid or self.kid})

    def key_set(self) -> dict[str, Any]:
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [public | {"kid": self.kid, "use": "sig", "alg": "RS256", "kty": "RSA"}]}

    def openid_configuration(self) -> dict[str, Any]:
        base = f"{self.authority}/{self.tenant_id}"
        return {
            "issuer": self.issuer,
            "jwks_uri": f"{base}/discovery/v2.0/keys",
            "token_endpoint": f"{base}/oauth2/v2.0/token",
            "id_token_signing_alg_values_supported": ["RS256"],
        }

    def token_response(self, form: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        """Client credentials: a token for ``client_id``, with the submit role if it is assigned it."""
        client_id = form.get("client_id", "")
        scopes = {f"api://{self.audience}/.default", f"{self.audience}/.default"}
        if form.get("grant_type") != "client_credentials" or not client_id:
            return 400, {"error": "unsupported_grant_type", "error_description": "client_credentials only"}
        if form.get("scope") not in scopes:
            return 400, {
                "error": "invalid_scope",
                "error_description": f"ask for api://{self.audience}/.default",
            }
        roles = [SUBMIT_ROLE] if client_id.lower() in self.assigned else []
        token = self.mint(client_id, roles=roles)
        return 200, {
            "token_type": "Bearer",
            "expires_in": int(TOKEN_LIFETIME.total_seconds()),
            "access_token": token,
        }

    # --- HTTP -----------------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: tests and the demo start many

            def _answer(self, status: int, body: Mapping[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                base = f"/{issuer.tenant_id}"
                if not issuer.available:
                    self._answer(503, {"error": "temporarily_unavailable"})
                elif self.path == f"{base}/v2.0/.well-known/openid-configuration":
                    self._answer(200, issuer.openid_configuration())
                elif self.path == f"{base}/discovery/v2.0/keys":
                    issuer.key_set_requests += 1
                    self._answer(200, issuer.key_set())
                else:
                    self._answer(404, {"error": "not_found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                if not issuer.available:
                    self._answer(503, {"error": "temporarily_unavailable"})
                elif self.path == f"/{issuer.tenant_id}/oauth2/v2.0/token":
                    self._answer(*issuer.token_response(form))
                else:
                    self._answer(404, {"error": "not_found"})

        return Handler


def from_settings(
    values: Mapping[str, str], *, port: int | None = None, clock: Clock | None = None
) -> LocalIssuer:
    """The issuer a set of app settings names: their tenant, audience and submitters (assigned
    the role); on the port of their authority unless ``port`` is given (0: any free one)."""
    if port is None:
        port = urllib.parse.urlsplit(values["SAS_AUTH_AUTHORITY"]).port or 0
    submitters = Registry.parse(values.get("SAS_SUBMITTERS", ""))
    return LocalIssuer(
        values["SAS_AUTH_TENANT_ID"],
        values["SAS_AUTH_AUDIENCE"],
        assigned=[app.client_id for app in submitters.apps],
        clock=clock,
        port=port,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.standins.local_issuer", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--app-dir", type=Path, default=Path("."), help="where local.settings.json is")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run while serving")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        # Real environment variables win, as for the app; relative paths become the app dir's,
        # so the command it runs (devhost) inherits absolute ones.
        load_local_settings(args.app_dir)
        names = ("SAS_AUTH_AUTHORITY", "SAS_AUTH_TENANT_ID", "SAS_AUTH_AUDIENCE")
        missing = [name for name in names if not os.environ.get(name)]
        if missing:
            raise SettingsError(f"set {', '.join(missing)} (as local.settings.embedded.json does)")
        issuer = from_settings(os.environ)
    # SettingsError and RegistryError (SAS_SUBMITTERS) are ValueErrors, as is a bad port in the
    # authority: one line naming what to fix, no traceback.
    except ValueError as error:
        print(f"local issuer: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"local issuer: {_cannot_listen(error)}", file=sys.stderr)
        return 2
    with issuer:
        print(f"local issuer: {issuer.issuer}", file=sys.stderr)
        return _serve_while(command)


def _cannot_listen(error: OSError) -> str:
    authority = os.environ.get("SAS_AUTH_AUTHORITY", "")
    if error.errno == errno.EADDRINUSE:
        return (
            f"{authority} is taken: is the stack already running (`make run` in another terminal)? "
            "Stop it, or point SAS_AUTH_AUTHORITY at a free port"
        )
    return f"cannot listen on {authority}: {error.strerror or error}"


def _serve_while(command: list[str]) -> int:
    """Until the command ends; Ctrl-C reaches it too (one process group), so wait for it to stop."""
    try:
        if not command:
            threading.Event().wait()
            return 0
        child = subprocess.Popen(command)
    except KeyboardInterrupt:
        return 130
    except OSError as error:
        print(f"local issuer: cannot run {command[0]}: {error.strerror or error}", file=sys.stderr)
        return 127
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:
            continue  # the child got the same SIGINT: its own code tells how it stopped


if __name__ == "__main__":
    sys.exit(main())
