"""What each kind of order costs in billed operations, counted where they happen, through the front end.

    .venv/bin/python -m harness.bench.ops_per_order [--orders 10] [--json FILE]

For each scenario (a **happy** order; a **compensated** one, its payment refused; a **recovered**
one, its first payment request unanswered so the Supervisor starts a second attempt) the bench
runs the real app as it ships, on devhost's real clock, in a worker process of its own (the
deployment package, ``requirements.txt`` alone), posts ``--orders`` orders to the front end
with an application token from the local issuer, and waits until each is terminal. An agent
double in this process answers every request at once per the scenario (no remote service).

It counts, per order, what each service bills:

- **the app's calls to each dependency** (state store, orders database, compensation log,
  Service Bus sends, lease), every try counted: the app's own ``sas.dependency.calls`` metric
  (``adapters/resilience.py``), read from the worker's JSON-lines metrics (SAS_TELEMETRY_DIR).
  On Cosmos DB each state-store call is one request; each orders-database call is one SQL
  transaction;
- **Service Bus operations**: the app's sends (above), the triggers' receive calls, completes,
  abandons and lock renewals (devhost's ``servicebus_operations``, what the Functions host does
  for the app), and the agent's receive calls, completes and reply sends (the double's);
- **Durable work**: orchestration instances (attempts), episodes (orchestrator invocations),
  activities, timers, external events and history events, from devhost's task hub;
- **estimates, by method**: Azure Storage task-hub transactions and Durable Task Scheduler actions.

The Azure Storage method (DurableTask.AzureStorage, one partition): an episode costs a
control-queue dequeue, a history-table batch write and an instances-table update (3); each
message it consumes was enqueued and is deleted (2 each: the start, each activity result, each
fired timer, each event); each activity is a work-item message enqueued, dequeued and deleted
(3). Not counted: idle polling of empty queues and the partition and app leases' renewals, which
depend on time, not on orders. DTS actions come from ``harness.bench.dts_actions``'s prices.

``MINIMUM`` is the pattern's floor for the happy path: what it cannot do without, not today's
count. ``--json`` writes the per-order figures; ``docs/performance.md``'s cost table is rendered from
``harness/bench/results/ops_per_order.json`` (``render_table``), and ``tests/bench`` keeps the two equal.
"""

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from adapters.clock import SystemClock  # noqa: E402
from adapters.servicebus.local_bus import LocalServiceBus  # noqa: E402
from bootstrap import build_ports  # noqa: E402
from domain.messages import AgentRequest  # noqa: E402
from domain.states import TERMINAL_STATES  # noqa: E402
from harness.bench.dts_actions import DurableWork  # noqa: E402
from harness.demo.stack import FAST  # noqa: E402
from harness.devhost.host import Host  # noqa: E402
from harness.standins.local_issuer import from_settings  # noqa: E402  # noqa: E402
from settings import Settings  # noqa: E402  # noqa: E402
from tests.support.app import CLIENT_IDS, order_body  # noqa: E402  # noqa: E402
from tests.support.scripted_agent import OK, Answer, ScriptedAgent  # noqa: E402  # noqa: E402

RESULTS = ROOT / "harness" / "bench" / "results" / "ops_per_order.json"
SCENARIOS = ("happy", "compensated", "recovered")
# The pattern's floor for one happy order (two agent steps, two local steps).
MINIMUM = {
    "state store.create_if_absent": 1,  # E3: the record
    # The claim (E4); each local step's result (2); each agent step's budget debit before its
    # request goes out (C2, and the trace that it went out) and its result (2 x 2); the end.
    "state store.replace": 8,
    "state store.get": 1,  # the attempt reads its record once; later writes start from its copy
    # The in-flight cap's slot at the claim (C3); its release rides on the next claim's hand-over.
    # The front end's backlog count is cached (SAS_QUEUE_DEPTH_CACHE_SECONDS): a share, no floor.
    "state store.acquire_slot": 1,
    "orders database.insert_if_absent": 1,  # E2: the order
    "orders database.get": 1,  # E7: the orchestrator reads the order
    "orders database.update_status": 1,  # the order's own state, ConfirmOrder
    "compensation log.append": 2,  # one entry per step that can be undone (R9)
    "Service Bus.send": 5,  # the order; 2 agent requests (R2); 2 status messages (E16)
    "agent replies sent": 2,
    "trigger receive calls": 3,  # the order and 2 replies, each arriving on its own
    "trigger completes": 3,
    "durable instances": 1,
    "durable episodes": 3,  # the start; after each reply
    "durable activities": 3,
    "durable timers": 2,  # one CompleteBy per agent wait (E8)
    "durable events": 2,
}
# The double polls every 5 ms: its receive count says nothing of the agent's (harness.bench.agent_receives).
NOT_REPORTED = {"agent receive calls"}


def script(scenario: str) -> Callable[[AgentRequest, int], Answer]:
    def answer(request: AgentRequest, asked: int) -> Answer:
        if request.Step != "ChargePayment":
            return OK
        if scenario == "compensated":
            return Answer("permanent")
        if scenario == "recovered" and request.InstanceID.endswith("-1"):
            return Answer("silent")  # the first attempt's charge goes unanswered
        return OK

    return answer


class CountingBus:
    """The agent double's view of the bus, counting what Service Bus would bill it."""

    def __init__(self, bus: LocalServiceBus, counts: Counter[str]) -> None:
        self._bus, self._counts = bus, counts

    def receive(self, queue: str, limit: int) -> list[Any]:
        self._counts["agent receive calls"] += 1
        return self._bus.receive(queue, limit)

    def complete(self, message: Any) -> None:
        self._counts["agent completes"] += 1
        self._bus.complete(message)

    def send(self, queue: str, body: str, **kwargs: Any) -> None:
        self._counts["agent replies sent"] += 1
        self._bus.send(queue, body, **kwargs)


def _metric_points(folder: Path, name: str) -> Iterator[dict[str, Any]]:
    """The latest data point of metric ``name`` per process and attributes in each JSON-lines
    metrics file: each line holds the point that changed, with its running total
    (adapters/telemetry_files.py)."""
    for path in folder.glob("*.metrics.jsonl"):
        latest: dict[tuple[int, str], dict[str, Any]] = {}
        for line in path.read_text().splitlines():
            exported = json.loads(line)
            for resource in exported.get("resource_metrics", []):
                for scope in resource.get("scope_metrics", []):
                    for metric in scope.get("metrics", []):
                        if metric["name"] == name:
                            for point in metric["data"]["data_points"]:
                                key = (
                                    int(point.get("start_time_unix_nano") or 0),
                                    json.dumps(point["attributes"], sort_keys=True),
                                )
                                latest[key] = point
        yield from latest.values()


@dataclass
class Run:
    scenario: str
    orders: int
    counts: Counter[str] = field(default_factory=Counter)

    def per_order(self) -> dict[str, float]:
        return {
            name: round(value / self.orders, 2)
            for name, value in sorted(self.counts.items())
            if name not in NOT_REPORTED
        }


async def _post(url: str, token: str, order_ids: list[str]) -> None:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as session:
        for order_id in order_ids:
            async with session.post(url, data=order_body(order_id), headers=headers) as response:
                if response.status != 202:
                    raise RuntimeError(f"POST {order_id}: {response.status} {await response.text()}")


def _durable(host: Host, counts: Counter[str]) -> None:
    instances = [i for i in host.engine.list_instances() if i["name"] == "order_attempt"]
    counts["durable instances"] = len(instances)
    counts["durable episodes"] = host.invocations["orchestrationTrigger"]
    counts["durable activities"] = host.invocations["activityTrigger"]
    for instance in instances:
        events = [
            json.loads(e) if isinstance(e, str) else e for e in host.engine.history(instance["instanceId"])
        ]
        counts["durable history events"] += len(events)
        counts["durable timers"] += sum(e.get("EventType") == 10 for e in events)
        counts["durable events"] += sum(e.get("EventType") == 15 for e in events)
    # DurableTask.AzureStorage, by the method in the module docstring.
    consumed = counts["durable instances"] + counts["durable activities"] + counts["durable timers"]
    consumed += counts["durable events"]
    counts["estimate: task-hub storage transactions"] = (
        3 * counts["durable episodes"] + 2 * consumed + 3 * counts["durable activities"]
    )
    work = DurableWork(
        starts=counts["durable instances"],
        activities=counts["durable activities"],
        timers=counts["durable timers"],
        events=counts["durable events"],
    )
    counts["estimate: DTS actions"] = work.actions


async def run(scenario: str, orders: int) -> Run:
    values = json.loads((ROOT / "local.settings.embedded.json").read_text())["Values"]
    result = Run(scenario, orders)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "telemetry"
        issuer = from_settings(values, port=0).start()
        env = dict(os.environ) | values | FAST
        env |= {
            "SAS_DATA_DIR": f"{tmp}/data",
            "LOCAL_SERVICEBUS_PATH": f"{tmp}/servicebus.db",
            "SAS_TELEMETRY_DIR": str(folder),
            "SAS_STARTER_SCHEDULE": "0 0 0 * * *",  # the starter only sweeps: out of the way
            **issuer.settings(),
        }
        host = Host(ROOT, clock=SystemClock(), data_dir=Path(tmp) / "devhost", port=0, env=env)
        try:
            await host.start()
            serving = asyncio.create_task(host.serve())
            bus = LocalServiceBus(env["LOCAL_SERVICEBUS_PATH"])
            agent = ScriptedAgent(CountingBus(bus, result.counts), SystemClock(), script(scenario))  # type: ignore[arg-type]
            ids = [f"{scenario}-{n}" for n in range(orders)]
            await _post(f"{host.base_url}/api/orders", issuer.mint(CLIENT_IDS["app-a"]), ids)
            states = build_ports(Settings.from_env(env), SystemClock()).states
            deadline = time.monotonic() + 120
            while not all(
                (s := states.get(i)) is not None and s.record.ProcessState in TERMINAL_STATES for i in ids
            ):
                if time.monotonic() > deadline:
                    raise SystemExit(f"{scenario}: orders not terminal within 120 s")
                await asyncio.to_thread(agent.step)
                await asyncio.sleep(0.005)  # the double's poll: it answers within 5 ms
            await asyncio.sleep(1.5)  # let the last status sends and timers settle on the real clock
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
            _durable(host, result.counts)
            for name, value in host.servicebus_operations.items():
                result.counts[
                    f"trigger {name.replace('_', ' ')}s" if name != "receive" else "trigger receive calls"
                ] = value
        finally:
            await host.stop()  # the worker exits and exports its last metrics
            issuer.stop()
        for point in _metric_points(folder, "sas.dependency.calls"):
            attributes = point["attributes"]
            result.counts[f"{attributes['dependency']}.{attributes['operation']}"] += int(point["value"])
    return result


def render_table(results: dict[str, dict[str, float]]) -> str:
    """The Markdown cost table: one row per count, one column per scenario, and the floor."""
    names = sorted({name for per_order in results.values() for name in per_order})
    lines = [
        "| per order | " + " | ".join(SCENARIOS) + " | minimum (happy) |",
        "|---|" + "---:|" * (len(SCENARIOS) + 1),
    ]
    for name in names:
        cells = [f"{results.get(s, {}).get(name, 0):g}" for s in SCENARIOS]
        floor = MINIMUM.get(name)
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {'' if floor is None else floor} |")
    return "\n".join(lines)


def measure(orders: int) -> dict[str, dict[str, float]]:
    return {scenario: asyncio.run(run(scenario, orders)).per_order() for scenario in SCENARIOS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, default=10)
    parser.add_argument(
        "--json",
        type=Path,
        help="write the per-order figures here (e.g. harness/bench/results/ops_per_order.json)",
    )
    args = parser.parse_args()
    results = measure(args.orders)
    print(render_table(results))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"orders": args.orders, "per_order": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
