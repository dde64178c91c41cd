"""Settings: the sample file is valid, and a bad value names its setting."""

import json
from datetime import timedelta
from pathlib import Path

import pytest

from adapters.clock import SystemClock
from bootstrap import build_ports
from settings import Settings, SettingsError
from tests.support.records import pending

ROOT = Path(__file__).resolve().parents[2]


def test_the_sample_local_settings_are_valid_and_build_the_embedded_ports(tmp_path: Path) -> None:
    values = json.loads((ROOT / "local.settings.embedded.json").read_text())["Values"]
    settings = Settings.from_env({**values, "SAS_DATA_DIR": str(tmp_path)})
    assert settings.submitters.status_queues == ("status-app-a", "status-app-b")
    assert settings.scheduler_policy.recovery.cooldown == timedelta(minutes=5)
    ports = build_ports(settings, SystemClock())
    ports.states.create_if_absent(pending("o-1", ports.clock.now()))
    assert (tmp_path / "state.db").exists()


def test_a_bad_value_names_the_setting() -> None:
    with pytest.raises(SettingsError, match="SAS_MAX_IN_FLIGHT"):
        Settings.from_env({"SAS_MAX_IN_FLIGHT": "lots"})
    with pytest.raises(SettingsError, match="SAS_PROFILE"):
        Settings.from_env({"SAS_PROFILE": "cloud"})


def test_a_retry_budget_smaller_than_the_other_layers_allow_is_refused() -> None:
    with pytest.raises(SettingsError, match="SAS_MAX_CALLS_PER_STEP=29"):
        Settings.from_env({"SAS_MAX_CALLS_PER_STEP": "29"})  # 5 attempts x 3 calls x 2 deliveries
    assert Settings.from_env({"SAS_MAX_CALLS_PER_STEP": "30"}).calls_per_step_attempt == 6
    assert Settings.from_env(
        {
            "SAS_MAX_CALLS_PER_STEP": "10",
            "SAS_AGENT_REQUEST_MAX_DELIVERIES": "1",
            "SAS_AGENT_MAX_ATTEMPTS": "2",
        }
    )


def test_in_azure_a_calls_last_try_must_end_inside_the_steps_window() -> None:
    window = {"SAS_PROFILE": "azure", "SAS_STEP_TIMEOUT_SECONDS": "20", "SAS_RETRY_BUDGET_SECONDS": "10"}
    # The defaults' last try (2 s to connect, 3 s to answer) ends 15 s in: inside 20 s.
    assert Settings.from_env(window).call_timeout_seconds == 3
    slow = {**window, "SAS_CONNECT_TIMEOUT_SECONDS": "4", "SAS_CALL_TIMEOUT_SECONDS": "7"}
    with pytest.raises(SettingsError, match="a call's last try must end inside its attempt's window"):
        Settings.from_env(slow)
    # Locally the stores answer on loopback: the demo's short windows keep their timeouts.
    assert Settings.from_env({**slow, "SAS_PROFILE": "emulators"}).profile == "emulators"


def test_the_delivery_count_in_the_budget_matches_the_queue_config() -> None:
    """C2: the budget's arithmetic assumes the agent-requests queue's MaxDeliveryCount."""
    values = json.loads((ROOT / "local.settings.embedded.json").read_text())["Values"]
    config = json.loads((ROOT / "harness" / "emulators" / "servicebus-config" / "Config.json").read_text())
    [queue] = [
        q
        for ns in config["UserConfig"]["Namespaces"]
        for q in ns["Queues"]
        if q["Name"] == values["SAS_AGENT_REQUESTS_QUEUE"]
    ]
    assert int(values["SAS_AGENT_REQUEST_MAX_DELIVERIES"]) == queue["Properties"]["MaxDeliveryCount"]
    [orders] = [q for ns in config["UserConfig"]["Namespaces"] for q in ns["Queues"] if q["Name"] == "orders"]
    assert int(values["SAS_ORDERS_MAX_DELIVERIES"]) == orders["Properties"]["MaxDeliveryCount"]
