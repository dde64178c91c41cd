"""Application settings, read from environment variables (``local.settings.json`` ``Values``
locally, app settings in Azure). One validated model, so a bad value fails at start-up with the
setting's name rather than deep inside a request."""

from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from domain.apps import Registry
from domain.policy import Postponement, RecoveryPolicy, SchedulerPolicy, SupervisorScan


def _blank_is_none(value: object) -> object:
    # Bicep writes '' for a parameter not given yet (frontEndClientId): not set, not invalid.
    return None if value == "" else value


def _registry(value: object) -> object:
    return Registry.parse(value) if isinstance(value, str) else value


# The embedded profile's stores. A relative path is one in the app directory: the tools and
# devhost make it absolute before anything opens it (adapters/local_settings.py).
DEFAULT_DATA_DIR = ".data"


class SettingsError(ValueError):
    """A setting, or ``local.settings.json`` itself (``adapters.local_settings``), is wrong: the
    one error the app and its tools report as one line naming what to fix."""


S = TypeVar("S", bound=BaseModel)


def settings_from_env[S: BaseModel](model: type[S], env: Mapping[str, str]) -> S:
    """Validate the environment variables a settings model names by alias, and only those;
    every problem is reported with the setting's name."""
    names = {field.alias for field in model.model_fields.values() if field.alias}
    try:
        return model.model_validate({k: v for k, v in env.items() if k in names})
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors())
        raise SettingsError(f"invalid settings: {problems}") from None


# ServiceBusConnection's value for devhost's own Service Bus, a SQLite file (the local bus).
LOCAL_SERVICEBUS = "local"


def is_local_bus(connection: str | None, namespace: str | None, *, unset_is_local: bool) -> bool:
    """Whether Service Bus is the local bus: the one rule of the app, the agent and devhost's
    triggers. A namespace (identity-based connection) is always Service Bus itself."""
    if namespace:
        return False
    if not connection:
        return unset_is_local
    return connection == LOCAL_SERVICEBUS


class ServiceBusSettings(BaseModel):
    """Where Service Bus is, for the app and the agent alike."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    # "local" is devhost's Service Bus at LOCAL_SERVICEBUS_PATH; a connection string is a local
    # broker or the emulator; in Azure the namespace, reached with a managed identity.
    servicebus_connection: str | None = Field(None, alias="ServiceBusConnection")
    servicebus_namespace: str | None = Field(None, alias="ServiceBusConnection__fullyQualifiedNamespace")
    local_servicebus_path: str = Field(".devhost/servicebus.db", alias="LOCAL_SERVICEBUS_PATH")

    def _unset_is_local(self) -> bool:
        # The agent's default: with no Service Bus setting it runs beside devhost.
        return True

    @property
    def uses_local_bus(self) -> bool:
        connection, namespace = self.servicebus_connection, self.servicebus_namespace
        return is_local_bus(connection, namespace, unset_is_local=self._unset_is_local())


class Settings(ServiceBusSettings):
    profile: Literal["embedded", "emulators", "azure"] = Field("embedded", alias="SAS_PROFILE")
    # emulators and azure profiles: where the stores are (docs/local-stack.md "Profiles"). Identity-based in
    # Azure (an endpoint plus a managed identity's client ID); keys only for local emulators.
    cosmos_connection: str | None = Field(None, alias="CosmosDBConnection")
    cosmos_endpoint: str | None = Field(None, alias="CosmosDBConnection__accountEndpoint")
    cosmos_database: str = Field("sas", alias="SAS_COSMOS_DATABASE")
    cosmos_container: str = Field("orderState", alias="SAS_COSMOS_CONTAINER")
    # 429s: the SDK retries, honouring x-ms-retry-after-ms, this often and this long in all;
    # less than a step's window (checked below), so throttling cannot outlive a CompleteBy.
    cosmos_throttle_retries: int = Field(5, alias="SAS_COSMOS_THROTTLE_RETRIES", ge=1, le=20)
    cosmos_throttle_max_wait_seconds: int = Field(
        10, alias="SAS_COSMOS_THROTTLE_MAX_WAIT_SECONDS", ge=1, le=60
    )
    cosmos_recovery_container: str = Field("recoveryIndex", alias="SAS_COSMOS_RECOVERY_CONTAINER")
    sql_connection: str | None = Field(None, alias="SqlConnection")
    sql_dialect: Literal["sqlite-odbc", "sqlserver", "postgresql"] = Field(
        "sqlserver", alias="SAS_SQL_DIALECT"
    )
    tables_connection: str | None = Field(None, alias="CompensationLogConnection")
    tables_endpoint: str | None = Field(None, alias="CompensationLogConnection__tableServiceUri")
    # E16: the front end verifies each caller's Entra access token itself (services/frontend.py):
    # v2.0 tokens of this tenant (issuer <authority>/<tenant>/v2.0, signing keys from that issuer's
    # OpenID configuration) for this audience, the front end's application (client) ID. Only the
    # authority differs between profiles: Entra ID in Azure, a loopback issuer locally
    # (harness/standins/local_issuer.py). Unset tenant or audience: every request is refused (503).
    auth_authority: str = Field("https://login.microsoftonline.com", alias="SAS_AUTH_AUTHORITY", min_length=1)
    auth_tenant_id: Annotated[str | None, BeforeValidator(_blank_is_none)] = Field(
        None, alias="SAS_AUTH_TENANT_ID", pattern=r"^[0-9a-fA-F-]{36}$"
    )
    auth_audience: Annotated[str | None, BeforeValidator(_blank_is_none)] = Field(
        None, alias="SAS_AUTH_AUDIENCE", min_length=1
    )
    managed_identity_client_id: str | None = Field(None, alias="AZURE_CLIENT_ID")
    data_dir: str = Field(DEFAULT_DATA_DIR, alias="SAS_DATA_DIR", min_length=1)
    orders_queue: str = Field("orders", alias="SAS_ORDERS_QUEUE")
    # MaxDeliveryCount of the orders queue: on the last delivery a submission that still fails
    # is dead-lettered by the app itself, with the error and an alert, not silently by the broker.
    orders_max_deliveries: int = Field(5, alias="SAS_ORDERS_MAX_DELIVERIES", ge=1)
    agent_requests_queue: str = Field("agent-requests", alias="SAS_AGENT_REQUESTS_QUEUE")
    agent_replies_queue: str = Field("agent-replies", alias="SAS_AGENT_REPLIES_QUEUE")
    alerts_queue: str = Field("operator-alerts", alias="SAS_ALERTS_QUEUE")
    # The workflow new orders run; in-flight orders keep the version in their record (C7).
    workflow_version: Literal["v1", "v2"] = Field("v1", alias="SAS_WORKFLOW_VERSION")
    agent_max_attempts: int = Field(3, alias="SAS_AGENT_MAX_ATTEMPTS", ge=1)
    # Must equal MaxDeliveryCount of the agent-requests queue: an agent that dies mid-request
    # gets the request again, and each delivery may make up to SAS_AGENT_MAX_ATTEMPTS calls.
    agent_request_max_deliveries: int = Field(2, alias="SAS_AGENT_REQUEST_MAX_DELIVERIES", ge=1)
    # The apps that may submit (E16): "name=clientId,..." — the Entra application (client) ID
    # the front end reads from the caller's verified token (azp), and the name its status queue is derived
    # from (status-<name>). No default: an app not listed here cannot submit or read anything.
    submitters: Annotated[Registry, BeforeValidator(_registry)] = Field(Registry(()), alias="SAS_SUBMITTERS")
    max_in_flight: int = Field(50, alias="SAS_MAX_IN_FLIGHT", ge=1)
    # C3: the front end answers 429 while this many orders wait to be claimed.
    backlog_threshold: int = Field(500, alias="SAS_BACKLOG_THRESHOLD", ge=1)
    # Retry-After before any drain is measured (or the next read of the backlog, if later).
    backlog_retry_after_seconds: int = Field(5, alias="SAS_BACKLOG_RETRY_AFTER_SECONDS", ge=1)
    # The backlog (the orders queue's active messages, the Pending count, the in-flight slots),
    # read at most once per this many seconds per process, on a fixed grid (C3): a burst is
    # counted from the front end's own admissions between two reads, and Retry-After sends a
    # caller back to a read. Each read is billed (docs/capacity.md "A Retry-After a caller can keep").
    queue_depth_cache_seconds: float = Field(5, alias="SAS_QUEUE_DEPTH_CACHE_SECONDS", gt=0, le=300)
    # Azure: the orders queue's ARM resource ID, whose countDetails the front end reads with the
    # Reader role on that queue alone (docs/design.md "Admission control"). Unset: the count comes
    # from the local bus, or from the administration client where a connection string is set.
    orders_queue_resource_id: str | None = Field(None, alias="SAS_ORDERS_QUEUE_RESOURCE_ID")
    claim_batch_size: int = Field(20, alias="SAS_CLAIM_BATCH_SIZE", ge=1)
    start_grace_seconds: float = Field(60, alias="SAS_START_GRACE_SECONDS", gt=0, le=86400)
    step_timeout_seconds: float = Field(30, alias="SAS_STEP_TIMEOUT_SECONDS", gt=0, le=86400)
    max_calls_per_step: int = Field(30, alias="SAS_MAX_CALLS_PER_STEP", ge=1)
    quick_retries: int = Field(2, alias="SAS_QUICK_RETRIES", ge=0)
    extended_retries: int = Field(2, alias="SAS_EXTENDED_RETRIES", ge=0)
    cooldown_seconds: float = Field(300, alias="SAS_COOLDOWN_SECONDS", gt=0)
    supervisor_lookback_hours: float = Field(168, alias="SAS_SUPERVISOR_LOOKBACK_HOURS", gt=0)
    supervisor_page_size: int = Field(100, alias="SAS_SUPERVISOR_PAGE_SIZE", ge=1, le=1000)
    supervisor_max_per_run: int = Field(500, alias="SAS_SUPERVISOR_MAX_PER_RUN", ge=1)
    # E14: the Supervisor reads a recovery index partitioned by CompleteBy bucket instead of
    # querying the records, so its scan cost follows the expired work, not the store's size.
    # The bucket size is fixed for the life of an index (a different one misses old entries).
    recovery_index: bool = Field(False, alias="SAS_RECOVERY_INDEX")
    recovery_bucket_minutes: int = Field(5, alias="SAS_RECOVERY_BUCKET_MINUTES", ge=1, le=1440)
    # Longer than the Supervisor's cadence, so the leader renews it on every run (R10, R11).
    leader_lease_seconds: int = Field(30, alias="SAS_LEADER_LEASE_SECONDS", ge=15, le=60)
    lease_storage_connection: str | None = Field(None, alias="LeaseStorageConnection")
    lease_storage_endpoint: str | None = Field(None, alias="LeaseStorageConnection__blobServiceUri")
    # Transient faults (docs/operating.md "Transient faults"): each call to a store or the bus retries for
    # this long at most, waiting first_wait x 2^n (jittered, at most max_wait) between tries;
    # at most half a step's window and well inside a message lock (PT1M).
    retry_budget_seconds: float = Field(10, alias="SAS_RETRY_BUDGET_SECONDS", ge=0, le=30)
    retry_first_wait_seconds: float = Field(0.2, alias="SAS_RETRY_FIRST_WAIT_SECONDS", gt=0, le=10)
    retry_max_wait_seconds: float = Field(5, alias="SAS_RETRY_MAX_WAIT_SECONDS", gt=0, le=30)
    # A server that accepts and then says nothing fails a try after this long, not never: the
    # login or TLS handshake (SQL login timeout, Cosmos connection_timeout) and each statement or
    # response (SQL query timeout, Cosmos read_timeout). No try starts after the budget, so a
    # caller of a stalled store hears within the budget plus one of these (issue 37): 10 + 3 s.
    # 2 s is libpq's least connect_timeout; a Cosmos DB query page or a point read in the
    # region answers in milliseconds, and a slower one is a try that failed, retried in budget.
    connect_timeout_seconds: int = Field(2, alias="SAS_CONNECT_TIMEOUT_SECONDS", ge=1, le=60)
    call_timeout_seconds: int = Field(3, alias="SAS_CALL_TIMEOUT_SECONDS", ge=1, le=60)
    # A submission whose store is down for longer than the retry budget comes back later, on a
    # scheduled copy of its message: first after this many seconds, doubling up to the maximum,
    # at most this many times (the default spans more than an hour) before it is dead-lettered.
    # The maximum is one Supervisor period (30 s deployed): a copy scheduled during an outage is
    # never further out than that when the dependency answers again (issue 37).
    postpone_first_seconds: float = Field(5, alias="SAS_POSTPONE_FIRST_SECONDS", gt=0)
    postpone_max_seconds: float = Field(30, alias="SAS_POSTPONE_MAX_SECONDS", gt=0)
    postpone_limit: int = Field(150, alias="SAS_POSTPONE_LIMIT", ge=0, le=1000)

    @model_validator(mode="after")
    def _budget_covers_every_layer(self) -> "Settings":
        # C2: the layers' combined maximum (Supervisor attempts x agent attempts) must fit the
        # Scheduler's budget, or the budget silently ends retries the policy promises.
        attempts = 1 + self.quick_retries + self.extended_retries
        per_attempt = self.calls_per_step_attempt
        if attempts * per_attempt > self.max_calls_per_step:
            raise ValueError(
                f"SAS_MAX_CALLS_PER_STEP={self.max_calls_per_step} is below what the other layers "
                f"allow: {attempts} attempts per step (1 + SAS_QUICK_RETRIES + SAS_EXTENDED_RETRIES) "
                f"x SAS_AGENT_MAX_ATTEMPTS={self.agent_max_attempts} "
                f"x SAS_AGENT_REQUEST_MAX_DELIVERIES={self.agent_request_max_deliveries} "
                f"= {attempts * per_attempt}"
            )
        return self

    @model_validator(mode="after")
    def _throttling_fits_a_step(self) -> "Settings":
        if self.profile == "embedded":
            return self  # no Cosmos DB
        # Half the window: the SDK starts no new wait past the maximum, but finishes the last one.
        if 2 * self.cosmos_throttle_max_wait_seconds > min(
            self.step_timeout_seconds, self.start_grace_seconds
        ):
            raise ValueError(
                f"SAS_COSMOS_THROTTLE_MAX_WAIT_SECONDS={self.cosmos_throttle_max_wait_seconds} must be "
                f"at most half of SAS_STEP_TIMEOUT_SECONDS={self.step_timeout_seconds} and of "
                f"SAS_START_GRACE_SECONDS={self.start_grace_seconds}: a throttled write must fail "
                "inside its attempt's window, not after its CompleteBy"
            )
        return self

    @model_validator(mode="after")
    def _retries_fit_a_step(self) -> "Settings":
        if 2 * self.retry_budget_seconds > min(self.step_timeout_seconds, self.start_grace_seconds):
            raise ValueError(
                f"SAS_RETRY_BUDGET_SECONDS={self.retry_budget_seconds} must be at most half of "
                f"SAS_STEP_TIMEOUT_SECONDS={self.step_timeout_seconds} and of "
                f"SAS_START_GRACE_SECONDS={self.start_grace_seconds}: an activity's retries must end "
                "inside its attempt's window"
            )
        # A call gives up within the budget plus one try (adapters/resilience.py), and in Azure that
        # try may take its whole connect and call timeouts: it must end inside the window too.
        # The local profiles' stores answer on loopback, so the demo's short windows stay valid.
        last_try = self.retry_budget_seconds + self.connect_timeout_seconds + self.call_timeout_seconds
        if self.profile == "azure" and last_try > min(self.step_timeout_seconds, self.start_grace_seconds):
            raise ValueError(
                f"SAS_RETRY_BUDGET_SECONDS={self.retry_budget_seconds} + SAS_CONNECT_TIMEOUT_SECONDS="
                f"{self.connect_timeout_seconds} + SAS_CALL_TIMEOUT_SECONDS={self.call_timeout_seconds} "
                f"must be at most SAS_STEP_TIMEOUT_SECONDS={self.step_timeout_seconds} and "
                f"SAS_START_GRACE_SECONDS={self.start_grace_seconds}: a call's last try must end "
                "inside its attempt's window"
            )
        if self.retry_max_wait_seconds < self.retry_first_wait_seconds:
            raise ValueError("SAS_RETRY_MAX_WAIT_SECONDS must be at least SAS_RETRY_FIRST_WAIT_SECONDS")
        if self.postpone_max_seconds < self.postpone_first_seconds:
            raise ValueError("SAS_POSTPONE_MAX_SECONDS must be at least SAS_POSTPONE_FIRST_SECONDS")
        return self

    def _unset_is_local(self) -> bool:
        # Only the embedded profile may leave ServiceBusConnection unset; the others name it.
        return self.profile == "embedded"

    @property
    def postponement(self) -> Postponement:
        return Postponement(
            first=timedelta(seconds=self.postpone_first_seconds),
            maximum=timedelta(seconds=self.postpone_max_seconds),
            limit=self.postpone_limit,
        )

    @property
    def calls_per_step_attempt(self) -> int:
        """The most remote calls one attempt of one step can cause: what begin_step debits."""
        return self.agent_max_attempts * self.agent_request_max_deliveries

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "Settings":
        return settings_from_env(cls, env)

    @property
    def scheduler_policy(self) -> SchedulerPolicy:
        return SchedulerPolicy(
            start_grace=timedelta(seconds=self.start_grace_seconds),
            step_timeout=timedelta(seconds=self.step_timeout_seconds),
            max_calls_per_step=self.max_calls_per_step,
            recovery=RecoveryPolicy(
                quick_retries=self.quick_retries,
                extended_retries=self.extended_retries,
                cooldown=timedelta(seconds=self.cooldown_seconds),
            ),
        )

    @property
    def supervisor_scan(self) -> SupervisorScan:
        return SupervisorScan(
            lookback=timedelta(hours=self.supervisor_lookback_hours),
            page_size=self.supervisor_page_size,
            max_per_run=self.supervisor_max_per_run,
        )
