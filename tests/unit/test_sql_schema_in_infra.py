"""The Azure SQL schema the post-provision script runs (infra/sql/schema.sql) declares the same
tables and columns as the adapter's own DDL, which the contract suite proves on three engines."""

import re
from pathlib import Path

from adapters.sql.schema import SQLITE_SCHEMA

ROOT = Path(__file__).resolve().parents[2]


def _tables(ddl: str) -> dict[str, list[str]]:
    """Table name → its column and constraint lines, whitespace-normalised."""
    tables = {}
    for name, body in re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+) \((.*?)\n\);", ddl, re.DOTALL):
        tables[name] = [" ".join(line.split()).rstrip(",") for line in body.strip().splitlines()]
    return tables


def test_the_provisioned_schema_matches_the_adapters_schema() -> None:
    provisioned = _tables((ROOT / "infra" / "sql" / "schema.sql").read_text())
    assert set(provisioned) == {"Orders", "OrderLines"}
    assert provisioned == _tables(SQLITE_SCHEMA)
