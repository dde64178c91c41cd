"""``python -m harness.standins.amqp_broker``: the command the fixtures and developers run."""

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from tests.support.broker import CONFIG, ROOT, run_broker_command
from tests.support.broker_clients import receive_until

# python -m harness.standins.amqp_broker
pytestmark = pytest.mark.processes


def test_serves_until_sigterm_then_exits_cleanly() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "harness.standins.amqp_broker", "--config", str(CONFIG), "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert ready.startswith("Ready amqp://127.0.0.1:")
        port = int(ready.strip().rsplit(":", 1)[1])
        connection = f"Endpoint=sb://127.0.0.1:{port};SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true"
        with (
            ServiceBusClient.from_connection_string(connection) as client,
            client.get_queue_sender("ORDERS") as sender,  # entity names are case-insensitive
            client.get_queue_receiver("orders") as receiver,
        ):
            sender.send_messages(ServiceBusMessage("via the command"))
            [received] = receive_until(receiver, 1)
            receiver.complete_message(received)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=10)
    finally:
        process.kill()
    assert process.returncode == 0, stderr
    assert stdout == ""  # exactly one line, already read


def test_a_bad_config_is_reported(tmp_path: Path) -> None:
    config = tmp_path / "Config.json"
    config.write_text(
        '{"UserConfig": {"Namespaces": [{"Queues": [{"Name": "q", "Properties": '
        '{"RequiresSession": true}}]}]}}'
    )
    result = run_broker_command(config)
    assert result.returncode == 2
    assert "sessions" in result.stderr
