"""``--azd``: ops against a deployment, from the values of its azd environment.

``azd env get-values [--environment NAME]`` (dotenv lines, the infrastructure's outputs and the
post-provision step's values) says where everything is. Nothing secret is in them: the sample
submitting app proves who it is with a certificate whose private key stays on the deployer's
machine (``SAS_SAMPLE_APP_CERT_PATH``), and everything else is reached as the deployer, with
``az login`` (DefaultAzureCredential) and the data-plane roles the deployment granted them.

What runs against a deployment, with the roles infra/modules/operator-rbac.bicep grants the
deployer on a first deployment (grantDeployerOperatorRoles): ``smoke`` (as the sample app),
``alerts`` and ``dlq`` (Service Bus), ``instances`` (the task hub's Instances table), and
``status``, ``show``, ``list`` and ``watch``, which read the state records (Cosmos DB Built-in
Data Reader), the compensation log (Storage Table Data Reader) and, for ``show``, the orders row
(Azure SQL, as its Entra administrator, with an access token: ODBC Driver 18 and the server's
firewall must let the deployer in, or ``show`` says the row was not read). ``resubmit`` and
``compensate`` write state records, which needs Cosmos DB Built-in Data Contributor, not granted;
``submit``, ``token``, ``schema`` and ``dashboard`` are local (docs/operating.md, "ops against a
deployment").
"""

import contextlib
import io
import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from dotenv import dotenv_values
from dotenv.parser import parse_stream

from adapters.clock import host_clock
from domain.apps import SubmittingApp
from domain.dependencies import COMPENSATION_LOG, ORDERS_DB, SERVICE_BUS, STATE_STORE
from domain.errors import DependencyUnavailable
from domain.ports import InsertOutcome, OrderRow, OrdersRepository
from ops import github_oidc
from ops.errors import BadArgument, Refused
from ops.orders import FrontEnd
from ops.queues import BrowsedMessage
from ops.tokens import TokenError
from services.context import Ports
from services.frontend import Reply
from settings import Settings

if TYPE_CHECKING:  # the Azure SDKs load only when --azd is given
    from adapters.servicebus.azure import ServiceBusMessaging

# The commands that need none of the app's stores, and those that read them (``ports``).
QUEUE_COMMANDS = ("smoke", "instances", "alerts", "dlq")
STORE_COMMANDS = ("status", "show", "list", "watch")
COMMANDS = QUEUE_COMMANDS + STORE_COMMANDS
# Why each other command does not run against a deployment: one line, naming what is missing.
STATE_WRITER = "Cosmos DB Built-in Data Contributor"
NOT_ON_A_DEPLOYMENT = {
    "resubmit": f"writes the order's state record, which needs {STATE_WRITER} on the state "
    "database; the deployer has Cosmos DB Built-in Data Reader only",
    "compensate": f"writes the order's state record, which needs {STATE_WRITER} on the state "
    "database; the deployer has Cosmos DB Built-in Data Reader only",
    "submit": "posts as any registered app with a local issuer's token; use `ops --azd smoke`, which "
    "submits as the sample app through the deployed front end",
    "token": "makes a local issuer's token; a deployed app asks Entra ID for its own",
    "schema": "is the post-provision step's (infra/scripts) against Azure SQL",
    "dashboard": "reads the local profile's stores on its own thread",
}
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
    "COSMOS_ENDPOINT": "an output of infra/main.bicep: the state records' Cosmos DB account",
    "COMPENSATION_LOG_TABLE_ENDPOINT": "an output of infra/main.bicep: the compensation log's tables",
    "AZURE_SQL_SERVER_FQDN": "an output of infra/main.bicep: the orders database's server",
    "AZURE_SQL_DATABASE_NAME": "an output of infra/main.bicep: the orders database",
    "AZURE_FUNCTION_APP_URL": "an output of infra/main.bicep: the front end",
    "SERVICEBUS_FULLY_QUALIFIED_NAMESPACE": "an output of infra/main.bicep: the queues",
    "AZURE_TENANT_ID": "the pre-provision step and infra/main.bicep set it",
    "SAS_SAMPLE_APP_CLIENT_ID": "the pre-provision step registers the sample app (SAS_SAMPLE_APP not false)",
    "SAS_SAMPLE_APP_CERT_PATH": "the pre-provision step makes the sample app's certificate",
    "API_AUDIENCE": "an output of infra/main.bicep, empty until the pre-provision step has registered "
    "the front end's API: docs/deploying.md",
}


def parse_values(text: str) -> dict[str, str]:
    """The ``KEY=value`` lines ``azd env get-values`` prints (python-dotenv's reading: a
    double-quoted value with backslash escapes, a single-quoted one as it is, or a bare one;
    blank lines and ``#`` comments skipped), nothing expanded: a ``$`` in a value is a ``$``."""
    # dotenv_values skips a line it cannot read with only a logged warning; its parser says which.
    for binding in parse_stream(io.StringIO(text)):
        if binding.error:
            line = binding.original.string.strip()
            raise BadArgument(f"azd env get-values printed a line that is not KEY=value: {line[:60]!r}")
    values = dotenv_values(stream=io.StringIO(text), interpolate=False)
    for key, value in values.items():
        if value is None:  # a bare KEY, no "="
            raise BadArgument(f"azd env get-values printed a line that is not KEY=value: {key[:60]!r}")
    return {key: value for key, value in values.items() if value is not None}


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

    def _bus_env(self) -> dict[str, str]:
        namespace = self.value("SERVICEBUS_FULLY_QUALIFIED_NAMESPACE")
        return {
            "SAS_PROFILE": "azure",
            "ServiceBusConnection__fullyQualifiedNamespace": namespace,
            "SAS_SUBMITTERS": self.values.get("SAS_SUBMITTERS", ""),
        }

    @property
    def settings(self) -> Settings:
        """The app's settings as far as ops needs them: the bus, and the registered apps."""
        return Settings.from_env(self._bus_env())

    @property
    def sample_app(self) -> SubmittingApp:
        name = self.values.get("SAS_SAMPLE_APP_NAME", "").strip() or SAMPLE_APP_NAME
        return SubmittingApp(name, self.value("SAS_SAMPLE_APP_CLIENT_ID"))

    def certificate_path(self) -> Path:
        path = Path(os.path.expanduser(self.value("SAS_SAMPLE_APP_CERT_PATH")))
        if not path.is_file():
            raise BadArgument(f"--azd: SAS_SAMPLE_APP_CERT_PATH: no file {path}")
        return path

    def sample_app_credential(self, environ: Mapping[str, str] = os.environ) -> Credential:
        """With its certificate, on the deployer's machine; in the deploying pipeline
        (``SAS_SAMPLE_APP_FEDERATION=github-actions``), with the job's own OIDC token."""
        from azure.identity import CertificateCredential, ClientAssertionCredential  # noqa: PLC0415 - Azure only

        if environ.get("SAS_SAMPLE_APP_FEDERATION", "").strip() == github_oidc.FEDERATION:
            return ClientAssertionCredential(
                tenant_id=self.value("AZURE_TENANT_ID"),
                client_id=self.sample_app.client_id,
                func=github_oidc.assertion(environ),
            )
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

    @property
    def store_settings(self) -> Settings:
        """The settings the azure profile's store adapters read: the state records in Cosmos DB
        and the compensation log's table service, each reached as the deployer."""
        named = {
            k: self.values[k] for k in ("SAS_COSMOS_DATABASE", "SAS_COSMOS_CONTAINER") if self.values.get(k)
        }
        return Settings.from_env(
            {
                **self._bus_env(),
                "CosmosDBConnection__accountEndpoint": self.value("COSMOS_ENDPOINT"),
                "CompensationLogConnection__tableServiceUri": self.value("COMPENSATION_LOG_TABLE_ENDPOINT"),
                **named,
            }
        )

    @property
    def sql_connection_string(self) -> str:
        from adapters import azure_profile  # noqa: PLC0415 - the Azure SDKs

        return azure_profile.entra_sql_connection_string(
            self.value("AZURE_SQL_SERVER_FQDN"), self.value("AZURE_SQL_DATABASE_NAME")
        )

    def ports(self, queues: "DeployedQueues") -> Ports:
        """The ports ``status``, ``show``, ``list`` and ``watch`` read, built by the azure
        profile's adapters as the deployer (DefaultAzureCredential: az login), each behind the
        app's transient-fault policy. Nothing connects until the first read. An operator's tool
        raises no alerts in the deployment (no outage observer sends any), never takes the
        Supervisor's lease, and sends nothing."""
        from azure.identity import DefaultAzureCredential  # noqa: PLC0415 - Azure only

        from adapters import azure_profile  # noqa: PLC0415 - the Azure SDKs
        from adapters.resilience import guard  # noqa: PLC0415
        from bootstrap import quiet_outages, retry_policy  # noqa: PLC0415

        settings = self.store_settings
        policy, quiet = retry_policy(settings), quiet_outages(host_clock())
        connection_string, credential = self.sql_connection_string, DefaultAzureCredential()
        return Ports(
            settings=settings,
            states=guard(lambda: azure_profile.cosmos_state_store(settings), STATE_STORE, policy, quiet),
            orders=_OrdersAsDeployer(
                guard(
                    lambda: azure_profile.token_sql_orders_repository(
                        settings, connection_string, credential
                    ),
                    ORDERS_DB,
                    policy,
                    quiet,
                )
            ),
            compensation_log=guard(
                lambda: azure_profile.table_compensation_log(settings), COMPENSATION_LOG, policy, quiet
            ),
            clock=host_clock(),
            sender=queues.messaging,
            settlement=queues.messaging,
            leader=_NoLease(),
            instance_name="ops --azd",
        )


class _NoLease:
    """``ops`` never runs the Supervisor: against a deployment it holds no lease and takes none."""

    def acquire(self, holder: str) -> bool:
        return False

    def release(self, holder: str) -> None:
        return None


class _OrdersAsDeployer:
    """Azure SQL as the deployer. What keeps them out is not a fault of the order: no ODBC Driver
    18 where ops runs, the server's firewall, no Entra token. It is the orders database unavailable to
    this command (``ops show`` then shows the rest, and says the row was not read)."""

    def __init__(self, orders: OrdersRepository) -> None:
        self._orders = orders

    @contextlib.contextmanager
    def _signed_in(self) -> Iterator[None]:
        from azure.core.exceptions import ClientAuthenticationError  # noqa: PLC0415 - Azure only

        try:
            yield
        except ImportError as error:  # pyodbc needs unixODBC's driver manager
            raise DependencyUnavailable(ORDERS_DB, f"pyodbc: {error}") from None
        except ClientAuthenticationError as error:
            raise DependencyUnavailable(
                ORDERS_DB, f"no Entra token for Azure SQL (az login): {error.message}"
            ) from None
        except Exception as error:
            if type(error).__module__ != "pyodbc":
                raise
            said = " ".join(str(error).split())[:300]
            raise DependencyUnavailable(ORDERS_DB, f"Azure SQL as the deployer: {said}") from None

    def insert_if_absent(self, order: OrderRow) -> InsertOutcome:
        with self._signed_in():
            return self._orders.insert_if_absent(order)

    def get(self, order_id: str) -> OrderRow | None:
        with self._signed_in():
            return self._orders.get(order_id)

    def update_status(self, order_id: str, status: str, now: datetime, *, version: int) -> bool:
        with self._signed_in():
            return self._orders.update_status(order_id, status, now, version=version)


# Which store refused the deployer, and the role it needs there.
COSMOS_READER = (STATE_STORE, "Cosmos DB", "Cosmos DB Built-in Data Reader on the state database")
TABLE_READER = (
    COMPENSATION_LOG,
    "the compensation log's storage",
    "Storage Table Data Reader on its table",
)


@contextlib.contextmanager
def store_errors() -> Iterator[None]:
    """The stores' refusals of the deployer as one-line errors naming the role it needs."""
    from azure.core.exceptions import AzureError, ClientAuthenticationError, HttpResponseError  # noqa: PLC0415
    from azure.cosmos.exceptions import CosmosHttpResponseError  # noqa: PLC0415

    try:
        yield
    except ClientAuthenticationError as no:
        raise Refused(f"no Azure token for the deployer (az login): {no.message}") from None
    except HttpResponseError as error:
        dependency, service, role = (
            COSMOS_READER if isinstance(error, CosmosHttpResponseError) else TABLE_READER
        )
        if error.status_code in (401, 403):
            raise Refused(
                f"{service} refused the deployer ({role}; networkIsolation keeps it off the internet): "
                f"{error.message}"
            ) from None
        raise DependencyUnavailable(dependency, str(error.message)) from None
    except AzureError as error:
        raise DependencyUnavailable("Azure", str(error)) from None


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
        raise DependencyUnavailable(SERVICE_BUS, str(error)) from None


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
