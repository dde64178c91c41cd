"""The embedded profile's stores, as the service tests use them."""

from dataclasses import dataclass

from adapters.sql.orders import SqlOrdersRepository
from adapters.sqlite.state_store import SqliteStateStore


@dataclass
class Stores:
    states: SqliteStateStore
    orders: SqlOrdersRepository
