"""The embedded state store's, compensation log's and orders database's ``synchronous=NORMAL`` is
safe against a killed process: a child runs a burst of orders through the writes a worker makes
for each (the order inserted, the record created, a slot taken, the claim written, a
compensation entry appended, the order's status updated),
printing an order only after its last write returned (committed), and is SIGKILLed in the middle
of it. Every acknowledged order's writes are all there, once, the files are sound, and at most
the order in progress at the kill is part-written.

The end-to-end counterpart, a worker process of the app killed mid-burst on these stores with no
order lost or acted on twice, is ``tests/app/test_worker_processes.py``."""

import sqlite3
from pathlib import Path

from adapters.sqlite.compensation_log import SqliteCompensationLog
from adapters.sqlite.state_store import SqliteStateStore
from domain.ids import instance_id
from domain.states import ProcessState
from tests.support.kill import run_and_kill

KILL_AFTER = 150  # acknowledged orders before the kill; the child keeps going until then

_WORKER = """
import sys
from datetime import timedelta
from adapters.sql.orders import sqlite_orders_repository
from adapters.sqlite.compensation_log import SqliteCompensationLog
from adapters.sqlite.state_store import SqliteStateStore
from domain import transitions
from domain.compensation import CompensationEntry
from domain.policy import SchedulerPolicy
from domain.ports import Slot
from tests.support.clock import T0
from tests.support.orders import order
from tests.support.records import pending

states, log = SqliteStateStore(sys.argv[1]), SqliteCompensationLog(sys.argv[2])
orders = sqlite_orders_repository(sys.argv[3])
for n in range(1_000_000):
    order_id = f"o-{n}"
    orders.insert_if_absent(order(order_id))
    stored = states.create_if_absent(pending(order_id, T0)).stored
    claimed = transitions.claim(stored.record, now=T0, policy=SchedulerPolicy())
    slot = Slot(claimed.LockedBy, order_id, T0, T0 - timedelta(minutes=1))
    assert states.acquire_slot(slot, limit=10**9) == "granted"
    states.replace(claimed, stored.etag)
    log.append(CompensationEntry(order_id, 1, "ReserveInventory", "ReleaseInventory", {}, T0))
    orders.update_status(order_id, "Processing", T0, version=1)
    print(n, flush=True)
"""


def _sound(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _slot_holders(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [holder for (holder,) in conn.execute("SELECT holder FROM in_flight_slots")]


def _order_statuses(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT OrderID, Status FROM Orders").fetchall())


def test_a_worker_killed_mid_burst_loses_no_committed_write(tmp_path: Path) -> None:
    paths = [tmp_path / "state.db", tmp_path / "compensation.db", tmp_path / "orders.db"]
    state_path, log_path, orders_path = paths
    acknowledged = {f"o-{n}" for n in map(int, run_and_kill(_WORKER, [str(p) for p in paths], KILL_AFTER))}
    assert len(acknowledged) >= KILL_AFTER
    in_progress = f"o-{len(acknowledged)}"  # the child writes its orders one after another

    for path in paths:
        _sound(path)
    states, log = SqliteStateStore(state_path), SqliteCompensationLog(log_path)
    try:
        records = {
            stored.record.OrderID: stored.record
            for stored in states.query_in_state(ProcessState.PROCESSING, 10**6)
        }
        pending = {stored.record.OrderID for stored in states.query_in_state(ProcessState.PENDING, 10**6)}
        logged = [entry.OrderID for order_id in records.keys() | pending for entry in log.entries(order_id)]
    finally:
        states.close()
        log.close()

    assert acknowledged <= records.keys()  # every acknowledged claim is kept
    for order_id in acknowledged:
        assert records[order_id].LockedBy == instance_id(order_id, 1)
    assert len(logged) == len(set(logged)) and acknowledged <= set(logged)  # each entry once
    # At most the order in progress at the kill is there without its acknowledgement: created,
    # claimed, logged or holding its slot, but nothing of any order after it.
    unacknowledged = (records.keys() | pending) - acknowledged
    assert unacknowledged <= {in_progress}
    holders = _slot_holders(state_path)
    assert {instance_id(order_id, 1) for order_id in acknowledged} <= set(holders)
    assert set(holders) <= {instance_id(order_id, 1) for order_id in acknowledged | unacknowledged}
    statuses = _order_statuses(orders_path)
    assert all(statuses[order_id] == "Processing" for order_id in acknowledged)
    assert statuses.keys() - acknowledged <= {in_progress}
