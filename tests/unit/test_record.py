"""The stored document of a record, and upgrade-on-read of older schema versions (C7)."""

import json

import pytest

from domain import transitions
from domain.errors import UnsupportedSchemaVersion
from domain.policy import SchedulerPolicy
from domain.record import SCHEMA_VERSION, from_document, to_document
from domain.states import ProcessState
from tests.support.clock import T0
from tests.support.records import processing

PATTERN_FIELDS = {"OrderID", "LockedBy", "CompleteBy", "ProcessState", "FailureCount"}


def test_the_document_round_trips_through_json() -> None:
    record = processing("o-1", T0)
    record = transitions.begin_step(
        record, instance="o-1-1", step="Reserve", now=T0, policy=SchedulerPolicy(), calls_wanted=3
    ).record
    doc = json.loads(json.dumps(to_document(record)))
    assert doc.keys() >= PATTERN_FIELDS
    assert doc["id"] == doc["OrderID"] == "o-1"
    assert doc["SchemaVersion"] == SCHEMA_VERSION
    assert doc["CompleteBy"].endswith("Z")
    assert from_document(doc) == record


def test_a_v1_record_of_the_pattern_is_upgraded_on_read() -> None:
    v1 = {
        "id": "o-7",
        "OrderID": "o-7",
        "LockedBy": "o-7-3",
        "CompleteBy": "2026-01-01T12:00:00.000000Z",
        "ProcessState": "Processing",
        "FailureCount": 2,
    }
    record = from_document(v1)
    assert record.SchemaVersion == SCHEMA_VERSION
    assert record.ProcessState is ProcessState.PROCESSING
    assert record.Attempt == 3  # from LockedBy: the next claim must not reuse o-7-3
    assert record.FailureCount == 2
    assert record.WorkflowVersion == "v1"
    assert to_document(record)["SchemaVersion"] == SCHEMA_VERSION


def test_a_record_from_a_newer_schema_is_refused_not_misread() -> None:
    doc = to_document(processing("o-1", T0))
    doc["SchemaVersion"] = SCHEMA_VERSION + 1
    with pytest.raises(UnsupportedSchemaVersion):
        from_document(doc)
