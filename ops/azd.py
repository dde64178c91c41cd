"""``--azd``: ops against a deployment, from the values of its azd environment.

``azd env get-values [--environment NAME]`` (dotenv lines, the infrastructure's outputs and the
post-provision step's values) says where everything is. Nothing secret is in them: the sample
submitting app proves who it is with a certificate whose private key stays on the deployer's
machine (``SAS_SAMPLE_APP_CERT_PATH``), and everything else is reached as the deployer, with
``az login`` (DefaultAzureCredential) and the data-plane roles the deployment granted them.

What runs against a deployment: ``smoke`` (as the sample app), ``instances``, ``alerts`` and
``dlq`` (Service Bus only). The commands that read the stores (Cosmos DB, Azure SQL, the
compensation log) do not: the azd values do not say how the deployer signs in to Azure SQL, nor
where the compensation log's account is (docs/operating.md, "ops against a deployment").
"""

import contextlib
import json
import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from domain.apps import SubmittingApp
from domain.errors import DependencyUnavailable
from ops.errors import BadArgument, Refused
from ops.orders import FrontEnd
from ops.queues import BrowsedMessage
from ops.tokens import TokenError
from services.frontend import Reply
from settings import Settings

if TYPE_CHECKING:  # the Azure SDKs load only when --azd is given
    from adapters.servicebus.azure import ServiceBusMessaging

COMMANDS = ("smoke", "instances", "alerts", "dlq")
SAMPLE_APP_NAME = "sample-app"  # unless SAS_SAMPLE_APP_NAME says otherwise
# The front end's route: host.json's routePrefix "api" and function_app.py's post_order.
ORDERS_ROUTE = "/api/orders"
HTTP_TIMEOUT_SECONDS = 30
AZD_TIMEOUT_SECONDS = 60
# The Functions host's storage account, which holds the task hub (Azure Storage backend): the
# deployer reads its Instances table with Storage Table Data Reader.
HOST_STORAGE = "AZURE_HOST_STORAGE_ACCOUNT_NAME"
# Where each value comes from, for the error that names a missing one.
ORIGINS = {
    HOST_STORAGE: "an output of infra/main.bicep: the Functions host's storage account",
    "SAS_SAMPLE_APP_CLIENT_ID": "the post-provision step registers the sample app",
    "SAS_SAMPLE_APP_CERT_PATH": "the post-provision step makes the sample app's certificate",
    "API_AUDIENCE": "the front end's API is registered first: docs/deploying.md",
}

_ESCAPED = re.compile(r"\\(.)")
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t"}
_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


def parse_values(text: str) -> dict[str, str]:
    """The ``KEY=value`` lines ``azd env get-values`` prints: a double-quoted value with
    backslash escapes (``\\n`` a newline), a single-quoted one as it is, or a bare one; blank
    lines and ``#`` comments skipped."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            raise BadArgument(f"azd env get-values printed a line that is not KEY=value: {line[:60]!r}")
        key, raw = match[1], match[2]
        if len(raw) >= 2 and raw[0] == raw[-1] == '"':
            values[key] = _ESCAPED.sub(lambda m: _ESCAPES.get(m[1], m[1]), raw[1:-1])
        elif len(raw) >= 2 and raw[0] == raw[-1] == "'":
            values[key] = raw[1:-1]
        else:
            values[key] = raw
    return values


def read_values(app_dir: Path, environment: str | None) -> dict[str, str]:
    """The azd environment's values, read in ``app_dir`` (where azure.yaml is)."""
    azd = shutil.which("azd")
    if azd is None:
        raise BadArgument("--azd needs the Azure Developer CLI: azd is not on PATH")
    command = [azd, "env", "get-values", *(["--environment", environment] if environment else [])]
    try:
        done = subprocess.run(
            command, cwd=app_dir, capture_output=True, text=True, timeout=AZD_TIMEOUT_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        raise DependencyUnavailable(
            "Azure Developer CLI", f"`azd env get-values` took over {AZD_TIMEOUT_SECONDS}s"
        ) from None
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split()) or f"exit code {done.returncode}"
        raise BadArgument(f"azd env get-values (in {app_dir}) failed: {said}")
    return parse_values(done.stdout)


class Credential(Protocol):
    def get_token(self, *scopes: str) -> Any: ...


def token_source(credential: Credential, scope: str) -> Callable[[], str]:
    """The app's access token for ``scope``, asked for when the order is about to be posted."""

    def token() -> str:
        from azure.core.exceptions import ClientAuthenticationError  # noqa: PLC0415 - Azure only

        try:
            return str(credential.get_token(scope).token)
        except ClientAuthenticationError as refused:
            raise TokenError(
                f"Entra ID refused the sample app a token for {scope}: {refused.message}"
            ) from None

    return token


def http_front_end(url: str, timeout: float = HTTP_TIMEOUT_SECONDS) -> FrontEnd:
    """``POST <url>`` as a submitting app does: the deployed front end's answer as a Reply."""

    def post(body: bytes, headers: Mapping[str, str]) -> Reply:
        request = urllib.request.Request(
            url, data=body, method="POST", headers={"Content-Type": "application/json", **headers}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return Reply(response.status, _json(response.read(), response.status))
        except urllib.error.HTTPError as error:
            return Reply(error.code, _json(error.read(), error.code))
        except OSError as error:
            raise DependencyUnavailable("front end", f"POST {url}: {error}") from None

    return post


def _json(raw: bytes, status: int) -> dict[str, Any]:
    """The front end answers JSON; App Service Authentication (a 401 before the app) may not."""
    with contextlib.suppress(ValueError):
        body = json.loads(raw)
        if isinstance(body, dict):
            return body
    text = " ".join(raw.decode(errors="replace").split())[:200]
    return {"error": f"HTTP {status}", "detail": text or "no body"}


class Deployment:
    """One azd environment's values, each checked where it is needed."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self.values = dict(values)

    def value(self, name: str) -> str:
        found = self.values.get(name, "").strip()
        if not found:
            origin = f" ({ORIGINS[name]})" if name in ORIGINS else ""
            raise BadArgument(f"--azd: the azd environment has no {name}{origin}")
        return found

    @property
    def settings(self) -> Settings:
        """The app's settings as far as ops needs them: the bus, and the registered apps."""
        return Settings.from_env(
            {
                "SAS_PROFILE": "azure",
                "ServiceBusConnection__fullyQualifiedNamespace": self.value(
                    "SERVICEBUS_FULLY_QUALIFIED_NAMESPACE"
                ),
                "SAS_SUBMITTERS": self.values.get("SAS_SUBMITTERS", ""),
            }
        )

    @property
    def sample_app(self) -> SubmittingApp:
        name = self.values.get("SAS_SAMPLE_APP_NAME", "").strip() or SAMPLE_APP_NAME
        return SubmittingApp(name, self.value("SAS_SAMPLE_APP_CLIENT_ID"))

    def certificate_path(self) -> Path:
        path = Path(os.path.expanduser(self.value("SAS_SAMPLE_APP_CERT_PATH")))
        if not path.is_file():
            raise BadArgument(f"--azd: SAS_SAMPLE_APP_CERT_PATH: no file {path}")
        return path

    def sample_app_credential(self) -> Credential:
        from azure.identity import CertificateCredential  # noqa: PLC0415 - Azure only

        path = self.certificate_path()
        try:
            return CertificateCredential(
                tenant_id=self.value("AZURE_TENANT_ID"),
                client_id=self.sample_app.client_id,
                certificate_path=str(path),
            )
        except ValueError as error:  # not a PEM or PKCS12 certificate with its private key
            raise BadArgument(f"--azd: SAS_SAMPLE_APP_CERT_PATH: {path} is not usable: {error}") from None

    @property
    def scope(self) -> str:
        return f"{self.value('API_AUDIENCE').rstrip('/')}/.default"

    @property
    def orders_url(self) -> str:
        return self.value("AZURE_FUNCTION_APP_URL").rstrip("/") + ORDERS_ROUTE

    def queues(self) -> "DeployedQueues":
        """Service Bus as the deployer (az login), its refusals as one-line errors."""
        from adapters import azure_profile  # noqa: PLC0415 - the Azure SDKs

        return DeployedQueues(azure_profile.servicebus_messaging(self.settings))


@contextlib.contextmanager
def _servicebus_errors(queue: str) -> Iterator[None]:
    from azure.core.exceptions import AzureError, ClientAuthenticationError  # noqa: PLC0415
    from azure.servicebus.exceptions import (  # noqa: PLC0415
        MessagingEntityNotFoundError,
        ServiceBusAuthenticationError,
        ServiceBusAuthorizationError,
    )

    try:
        yield
    except MessagingEntityNotFoundError:
        raise BadArgument(f"Service Bus has no queue {queue!r}") from None
    except (ServiceBusAuthenticationError, ServiceBusAuthorizationError, ClientAuthenticationError) as no:
        raise Refused(f"Service Bus refused the deployer on {queue!r} (az login; its roles): {no}") from None
    except AzureError as error:
        raise DependencyUnavailable("Service Bus", str(error)) from None


class DeployedQueues:
    """The deployment's queues, browsed and moved as ``ops`` does locally (ops/queues.py)."""

    def __init__(self, messaging: "ServiceBusMessaging") -> None:
        self.messaging = messaging

    def peek(self, queue: str, limit: int) -> list[BrowsedMessage]:
        with _servicebus_errors(queue):
            return list(self.messaging.peek(queue, limit))

    def resubmit_dead_letter(self, queue: str, message_id: str) -> bool:
        with _servicebus_errors(queue):
            return self.messaging.resubmit_dead_letter(queue, message_id)

    def remove(self, queue: str, message_ids: set[str] | None) -> list[str]:
        with _servicebus_errors(queue):
            return self.messaging.remove(queue, message_ids)

    def close(self) -> None:
        self.messaging.close()


def task_hub(deployment: Deployment, app_dir: Path) -> str:
    """The task hub's name: ``DURABLE_TASK_HUB_NAME`` if the environment has it, else host.json's
    ``hubName`` (infra/main.bicep deploys the same name)."""
    named = deployment.values.get("DURABLE_TASK_HUB_NAME", "").strip()
    if named:
        return named
    try:
        return str(json.loads((app_dir / "host.json").read_text())["extensions"]["durableTask"]["hubName"])
    except (OSError, ValueError, KeyError) as error:
        raise BadArgument(
            f"no task hub name: DURABLE_TASK_HUB_NAME unset, host.json has none ({error})"
        ) from None


def task_hub_instances(
    deployment: Deployment, task_hub: str, name: str, statuses: tuple[str, ...]
) -> Iterator[dict[str, Any]]:
    """The instances of orchestrator ``name`` in ``statuses``, from the task hub's Instances
    table (DurableTask.AzureStorage: PartitionKey the instance ID, Name, RuntimeStatus), as the
    deployer."""
    backend = deployment.values.get("DURABLE_BACKEND", "azureStorage") or "azureStorage"
    if backend != "azureStorage":
        raise BadArgument(
            f"--azd instances reads the Azure Storage backend's task hub; DURABLE_BACKEND is {backend}: "
            "not supported yet (use the Durable Task Scheduler dashboard)"
        )
    account = deployment.value(HOST_STORAGE)
    from azure.core.exceptions import (  # noqa: PLC0415 - Azure only
        AzureError,
        ClientAuthenticationError,
        HttpResponseError,
        ResourceNotFoundError,
    )
    from azure.data.tables import TableClient  # noqa: PLC0415
    from azure.identity import DefaultAzureCredential  # noqa: PLC0415

    table = f"{task_hub}Instances"
    wanted = " or ".join(f"RuntimeStatus eq @s{n}" for n in range(len(statuses)))
    parameters = {"name": name, **{f"s{n}": status for n, status in enumerate(statuses)}}
    endpoint = f"https://{account}.table.core.windows.net"
    with TableClient(endpoint, table, credential=DefaultAzureCredential()) as client:
        try:
            for entity in client.query_entities(
                f"Name eq @name and ({wanted})",
                parameters=parameters,
                select=["PartitionKey", "Name", "RuntimeStatus", "CreatedTime", "LastUpdatedTime"],
            ):
                yield {
                    "InstanceId": entity["PartitionKey"],
                    "Name": entity.get("Name"),
                    "RuntimeStatus": entity.get("RuntimeStatus"),
                    "CreatedTime": entity.get("CreatedTime"),
                    "LastUpdatedTime": entity.get("LastUpdatedTime"),
                }
        except ResourceNotFoundError:
            raise BadArgument(f"{account} has no table {table} (is the task hub {task_hub!r}?)") from None
        except ClientAuthenticationError as no:
            raise Refused(
                f"{account} refused the deployer (az login; Storage Table Data Reader): {no}"
            ) from None
        except HttpResponseError as error:
            if error.status_code == 403:
                raise Refused(
                    f"{account} refused the deployer (Storage Table Data Reader): {error}"
                ) from None
            raise DependencyUnavailable("task hub's Instances table", str(error)) from None
        except AzureError as error:
            raise DependencyUnavailable("task hub's Instances table", str(error)) from None
