"""The embedded profile: every store a SQLite file under ``SAS_DATA_DIR``; nothing to install."""

from datetime import timedelta
from pathlib import Path

from adapters.profiles import StoreBuilders
from adapters.sql.orders import sqlite_orders_repository
from adapters.sqlite.compensation_log import SqliteCompensationLog
from adapters.sqlite.recovery_index import SqliteRecoveryIndex
from adapters.sqlite.state_store import SqliteStateStore
from settings import Settings


def create_orders_schema(settings: Settings) -> list[str]:
    """``ops schema``: the embedded database makes its own schema when opened; say what it did."""
    path = Path(settings.data_dir) / "orders.db"
    existed = path.exists()
    sqlite_orders_repository(path).close()
    return [] if existed else [f"created {path}"]


def store_builders(settings: Settings) -> StoreBuilders:
    data = Path(settings.data_dir)
    bucket = timedelta(minutes=settings.recovery_bucket_minutes)
    return StoreBuilders(
        states=lambda: SqliteStateStore(data / "state.db"),
        orders=lambda: sqlite_orders_repository(data / "orders.db"),
        compensation_log=lambda: SqliteCompensationLog(data / "compensation.db"),
        recovery_index=lambda: SqliteRecoveryIndex(data / "recovery_index.db", bucket),
    )
