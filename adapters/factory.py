"""The composition root: builds the adapters behind every port from the settings.

Function bodies, the agent and the operator tools all get their ports here, so switching a
profile is a settings change and nothing else.
"""

from dataclasses import dataclass
from pathlib import Path

from adapters.clock import SystemClock
from adapters.sql_orders import sqlite_orders_repository
from adapters.sqlite_compensation_log import SqliteCompensationLog
from adapters.sqlite_state_store import SqliteStateStore
from domain.ports import Clock, CompensationLog, OrdersRepository, StateStore
from services.settings import Settings


@dataclass(frozen=True)
class Ports:
    states: StateStore
    orders: OrdersRepository
    compensation_log: CompensationLog
    clock: Clock


def build_ports(settings: Settings) -> Ports:
    if settings.profile == "embedded":
        data = Path(settings.data_dir)
        return Ports(
            states=SqliteStateStore(data / "state.db"),
            orders=sqlite_orders_repository(data / "orders.db"),
            compensation_log=SqliteCompensationLog(data / "compensation.db"),
            clock=SystemClock(),
        )
    raise ValueError(f"unsupported profile {settings.profile!r}")  # pragma: no cover - Literal guards it
