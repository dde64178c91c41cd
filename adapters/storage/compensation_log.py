"""The Azure compensation log: Table Storage (E17), one partition per order, ordered by row key.

Row keys are ``<sequence:06d>:<step>`` — the order the steps ran in — so "newest first" is a
descending sort within the order's partition. Outcomes are written with ETag-conditional
merges. Data classification (C5): an entry holds references to remote effects (reservation or
payment IDs), never personal or card data; entries live as long as the order's records do.
"""

import contextlib
import json
from dataclasses import replace
from datetime import datetime
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceModifiedError
from azure.data.tables import TableClient, UpdateMode

from adapters.sqlite.compensation_log import row_key
from domain.compensation import CompensationEntry, CompensationOutcome, next_outcome
from domain.errors import PreconditionFailed, RecordNotFound
from domain.timestamps import format_optional, format_ts, parse_optional, parse_ts

TABLE = "compensationlog"
MAX_RACES = 5


def _entity(entry: CompensationEntry) -> dict[str, Any]:
    return {
        "PartitionKey": entry.OrderID,
        "RowKey": row_key(entry.Sequence, entry.Step),
        "Sequence": entry.Sequence,
        "Step": entry.Step,
        "Action": entry.Action,
        "Data": json.dumps(entry.Data, sort_keys=True),
        "RecordedAt": format_ts(entry.RecordedAt),
        "Outcome": None if entry.Outcome is None else entry.Outcome.value,
        "OutcomeAt": format_optional(entry.OutcomeAt),
        "Error": entry.Error,
    }


def _entry(entity: dict[str, Any]) -> CompensationEntry:
    outcome = entity.get("Outcome")
    return CompensationEntry(
        OrderID=str(entity["PartitionKey"]),
        Sequence=int(entity["Sequence"]),
        Step=str(entity["Step"]),
        Action=str(entity["Action"]),
        Data=json.loads(entity["Data"]),
        RecordedAt=parse_ts(entity["RecordedAt"]),
        Outcome=None if outcome is None else CompensationOutcome(outcome),
        OutcomeAt=parse_optional(entity.get("OutcomeAt")),
        Error=entity.get("Error"),
    )


class TableCompensationLog:
    def __init__(self, table: TableClient) -> None:
        self._table = table

    def _find(self, order_id: str, step: str) -> Any | None:
        entities = list(
            self._table.query_entities(
                "PartitionKey eq @order and Step eq @step", parameters={"order": order_id, "step": step}
            )
        )
        return entities[0] if entities else None

    def append(self, entry: CompensationEntry) -> CompensationEntry:
        existing = self._find(entry.OrderID, entry.Step)
        if existing is None:
            with contextlib.suppress(ResourceExistsError):  # a concurrent repeat got there first
                self._table.create_entity(_entity(entry))
            existing = self._find(entry.OrderID, entry.Step)
        assert existing is not None
        return _entry(existing)

    def entries(self, order_id: str) -> list[CompensationEntry]:
        entities = self._table.query_entities("PartitionKey eq @order", parameters={"order": order_id})
        return sorted((_entry(e) for e in entities), key=lambda e: row_key(e.Sequence, e.Step), reverse=True)

    def record_outcome(
        self,
        order_id: str,
        step: str,
        outcome: CompensationOutcome,
        now: datetime,
        error: str | None = None,
    ) -> CompensationEntry:
        for _ in range(MAX_RACES):
            entity = self._find(order_id, step)
            if entity is None:
                raise RecordNotFound(f"no compensation entry for order {order_id} step {step}")
            current = _entry(entity)
            if not next_outcome(current, outcome):
                return current
            # REPLACE, not MERGE: a merge leaves an old Error in place when the new one is None.
            changed = replace(current, Outcome=outcome, OutcomeAt=now, Error=error)
            try:
                self._table.update_entity(
                    _entity(changed),
                    mode=UpdateMode.REPLACE,
                    etag=entity.metadata["etag"],
                    match_condition=MatchConditions.IfNotModified,
                )
            except ResourceModifiedError:
                continue
            updated = self._find(order_id, step)
            assert updated is not None
            return _entry(updated)
        raise PreconditionFailed(f"compensation entry {order_id}/{step} kept changing")
