"""The agent's settings, from environment variables (``local.settings.json`` ``Values`` locally)."""

from collections.abc import Mapping
from typing import Annotated

from pydantic import BeforeValidator, Field

from adapters.servicebus.messages import RECEIVE_WAIT_SECONDS
from settings import ServiceBusSettings, settings_from_env


class AgentSettings(ServiceBusSettings):
    remote_url: str = Field("http://127.0.0.1:7081", alias="AGENT_REMOTE_URL")
    # The App ID URI (api://<client ID>) of the remote service's Entra registration: when set, each
    # call carries the agent identity's token for it (agent_worker/remote.py). Unset or '' (every
    # local profile, and a remote that admits callers otherwise): no token.
    remote_audience: Annotated[str | None, BeforeValidator(lambda v: None if v == "" else v)] = Field(
        None, alias="AGENT_REMOTE_AUDIENCE"
    )
    managed_identity_client_id: str | None = Field(None, alias="AZURE_CLIENT_ID")
    requests_queue: str = Field("agent-requests", alias="SAS_AGENT_REQUESTS_QUEUE")
    replies_queue: str = Field("agent-replies", alias="SAS_AGENT_REPLIES_QUEUE")
    concurrency: int = Field(8, alias="AGENT_CONCURRENCY", ge=1, le=256)
    # One remote call may take this long; a call started before CompleteBy may end after it (R4).
    call_timeout_seconds: float = Field(5.0, alias="AGENT_CALL_TIMEOUT_SECONDS", gt=0)
    backoff_initial_seconds: float = Field(0.2, alias="AGENT_BACKOFF_INITIAL_SECONDS", gt=0)
    backoff_max_seconds: float = Field(5.0, alias="AGENT_BACKOFF_MAX_SECONDS", gt=0)
    breaker_failures: int = Field(5, alias="AGENT_BREAKER_FAILURES", ge=1)
    breaker_recovery_seconds: float = Field(10.0, alias="AGENT_BREAKER_RECOVERY_SECONDS", gt=0)
    poll_interval_seconds: float = Field(0.05, alias="AGENT_POLL_INTERVAL_SECONDS", gt=0)
    shutdown_grace_seconds: float = Field(20.0, alias="AGENT_SHUTDOWN_GRACE_SECONDS", ge=0)
    # Service Bus: how long a receive waits while the agent holds no message (each receive call is
    # billed; an idle replica makes about 60 / this a minute). At most the shutdown grace, so a
    # stop never has to cancel a waiting receive (idle_wait); no lock is held while it waits.
    idle_receive_wait_seconds: float = Field(15.0, alias="AGENT_IDLE_RECEIVE_WAIT_SECONDS", gt=0, le=60)

    @property
    def idle_wait(self) -> float:
        """The idle receive's wait, within the shutdown grace (and never under the busy wait)."""
        return max(RECEIVE_WAIT_SECONDS, min(self.idle_receive_wait_seconds, self.shutdown_grace_seconds))

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "AgentSettings":
        return settings_from_env(cls, env)
