"""Every Cosmos DB query and operation the adapters use, checked against what the Linux vNext
emulator (docker-compose.yml's ``cosmosdb`` service) is documented to support.

The tests run on ``@vercel/cosmosdb-server``; the emulators profile under Core Tools runs on the
vNext emulator, which implements a published subset of Cosmos DB. No test runs the vNext
emulator (no Docker in CI): this file holds its published feature table, reads the
adapters' code (``ast``) and query texts (a small lexer) to find what they use, and requires each
feature used to be classified:

- named by a row of the table that says "Supported" (or by the page outside the table);
- or *degraded*: the row says otherwise, and the adapter is shown to work without it;
- or *not in the table*: the table names no such feature; each such feature is listed in
  ``NOT_IN_TABLE`` with what is known of it, so a new one fails until someone reviews it;
- and never *known broken*: an open report in the emulator's issue tracker shows it failing.

A new query (``adapters/cosmos/queries.py``), a query written inline in an adapter, a new SDK
call, keyword argument or caught Cosmos error each change what is derived here and fail until the
tables below classify them.
"""

import ast
import inspect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos import ContainerProxy, CosmosClient, DatabaseProxy

from adapters.cosmos import queries as cosmos_queries
from adapters.cosmos.recovery_index import CosmosRecoveryIndex
from adapters.cosmos.state_store import CosmosStateStore
from domain.states import LOCKED_STATES, ProcessState

ROOT = Path(__file__).resolve().parents[2]

# --- The vNext emulator's published feature table ------------------------------------------------

VNEXT_PAGE = "https://learn.microsoft.com/en-us/azure/cosmos-db/emulator-linux"
VNEXT_FEATURE_SUPPORT = f"{VNEXT_PAGE}#feature-support"
VNEXT_PAGE_SOURCE = (
    "https://github.com/MicrosoftDocs/azure-databases-docs/blob/main/articles/cosmos-db/emulator-linux.md"
)
# The revision transcribed here: ms.date 6/02/2026, title "Linux-based emulator - vNext", image
# tag vnext-latest. Earlier revisions (2024-11) listed fewer queries as supported.
ISSUES = "https://github.com/Azure/azure-cosmos-db-emulator-docker/issues"

SUPPORTED = "Supported"
NOT_YET = "Not yet implemented"
NOT_PLANNED = "Not planned"
NO_OP = "No-op"  # accepts the request, answers a valid status, does not do the operation

VNEXT_TABLE: dict[str, str] = {
    "Batch API": SUPPORTED,
    "Bulk API": SUPPORTED,
    "Change Feed": SUPPORTED,
    "Create and read document with utf data": SUPPORTED,
    "Create collection": SUPPORTED,
    "Create collection twice conflict": SUPPORTED,
    "Create collection with custom index policy": NO_OP,
    "Create collection with ttl expiration": SUPPORTED,
    "Create database": SUPPORTED,
    "Create database twice conflict": SUPPORTED,
    "Create document": SUPPORTED,
    "Create partitioned collection": SUPPORTED,
    "Delete collection": SUPPORTED,
    "Delete database": SUPPORTED,
    "Delete document": SUPPORTED,
    "Get and change collection performance": NOT_YET,
    "Insert large document": SUPPORTED,
    "Patch document": SUPPORTED,
    "Query partitioned collection in parallel": NOT_YET,
    "Query with aggregates": SUPPORTED,
    "Query with and filter": SUPPORTED,
    "Query with and filter and projection": SUPPORTED,
    "Query with equality": SUPPORTED,
    "Query with equals on id": SUPPORTED,
    "Query with joins": SUPPORTED,
    "Query with order by": SUPPORTED,
    "Query with order by for partitioned collection": SUPPORTED,
    "Query with order by numbers": SUPPORTED,
    "Query with order by strings": SUPPORTED,
    "Query with paging": SUPPORTED,
    "Query with range operators date times": SUPPORTED,
    "Query with range operators on numbers": SUPPORTED,
    "Query with range operators on strings": SUPPORTED,
    "Query with single join": SUPPORTED,
    "Query with string math and array operators": SUPPORTED,
    "Query with subdocuments": SUPPORTED,
    "Query with two joins": SUPPORTED,
    "Query with two joins and filter": SUPPORTED,
    "Read collection": SUPPORTED,
    "Read collection feed": NOT_YET,
    "Read database": SUPPORTED,
    "Read database feed": NOT_YET,
    "Read document": SUPPORTED,
    "Read document feed": SUPPORTED,
    "Replace document": SUPPORTED,
    "Request Units": NOT_YET,
    "Stored procedures": NOT_PLANNED,
    "Triggers": NOT_PLANNED,
    "UDFs": NOT_PLANNED,
    "Update collection": NO_OP,
    "Update document": SUPPORTED,
    "Offers endpoint": NO_OP,
    "Users endpoint": NO_OP,
    "Permissions endpoint": NO_OP,
    "Client Encryption Keys (CEK)": NO_OP,
}


@dataclass(frozen=True)
class Feature:
    """One thing a query or an operation relies on, and where the vNext page speaks of it."""

    rows: tuple[str, ...] = ()  # the rows of VNEXT_TABLE that name it
    page: str = ""  # or what the page says of it outside the table (paraphrased)
    note: str = ""


# Query-language features, as the lexer below names them.
PARAMETERS = "parameters (@name)"
SELECT_VALUE = "SELECT VALUE"
COUNT = "aggregate COUNT"
PROJECTION = "projection (SELECT c.a, c.b)"
TOP = "TOP n"
EQUALITY = "equality (=)"
AND = "AND"
OR = "OR"
IN = "IN (...)"
INEQUALITY = "inequality (!=, <>)"
RANGE = "range comparison (<, <=, >=, >)"
IS_NULL = "IS_NULL()"
ORDER_BY = "ORDER BY one property, ascending"
# Operation features, from the SDK calls, their keyword arguments and the Cosmos errors caught.
GATEWAY = "gateway connection with the account key (connection string)"
CREATE_DATABASE = "create database"
CREATE_CONTAINER = "create partitioned container"
INDEX_POLICY = "custom indexing policy (composite indexes)"
POINT_READ = "point read by id and partition key"
NOT_FOUND = "404 for a missing item"
READ_HEADER = "header x-ms-documentdb-query-enablecrosspartition on point reads"
CREATE = "create document"
CONFLICT = "409 on creating an existing id"
REPLACE = "replace document"
IF_MATCH = "conditional replace on the ETag (If-Match, 412 when changed)"
UPSERT = "upsert document"
DELETE = "delete document"
CROSS_PARTITION = "cross-partition query (sequential fan-out)"
SINGLE_PARTITION = "single-partition query (partition_key=)"
MAX_ITEM_COUNT = "page size (max_item_count)"
CONTINUATION = "continuation tokens (by_page(token))"
REQUEST_CHARGE = "request charge (x-ms-request-charge)"

FEATURES: dict[str, Feature] = {
    PARAMETERS: Feature(
        note="every query; the 2024-11 revision of the page listed 'Query with sql query spec' "
        "(text plus parameters) as supported, the current one has no such row",
    ),
    SELECT_VALUE: Feature(("Query with aggregates",), note="SELECT VALUE COUNT(1) is the aggregate's form"),
    COUNT: Feature(("Query with aggregates",)),
    PROJECTION: Feature(("Query with and filter and projection",)),
    TOP: Feature(note="no row names TOP (nor OFFSET LIMIT); no issue reports it failing"),
    EQUALITY: Feature(("Query with equality",)),
    AND: Feature(("Query with and filter",)),
    OR: Feature(note="no row names OR; the Supervisor's window scan and the starter's query need it"),
    IN: Feature(note="no row names IN"),
    INEQUALITY: Feature(note="no row names it"),
    RANGE: Feature(
        ("Query with range operators on strings", "Query with range operators date times"),
        note="every range operand here is an ISO-8601 UTC timestamp string (domain/timestamps.py)",
    ),
    IS_NULL: Feature(
        note=f"no row names type-checking functions; '{ISSUES}/143' (IS_NULL not supported) was "
        "fixed in 2024-12 and closed",
    ),
    ORDER_BY: Feature(
        ("Query with order by", "Query with order by strings"),
        note="every sort key here is a string: a timestamp, an OrderID or a bucket",
    ),
    GATEWAY: Feature(
        page="the emulator serves the API for NoSQL in gateway mode only; the Python SDK has no other"
    ),
    CREATE_DATABASE: Feature(("Create database",)),
    CREATE_CONTAINER: Feature(("Create partitioned collection",)),
    INDEX_POLICY: Feature(("Create collection with custom index policy",)),
    POINT_READ: Feature(("Read document",)),
    NOT_FOUND: Feature(note="the table names the operations, not their error codes"),
    READ_HEADER: Feature(
        note="a query header the open-source server needs on a point read (docs/local-stack.md); the "
        "adapters send it to every emulator connection string, the vNext emulator included",
    ),
    CREATE: Feature(("Create document",)),
    CONFLICT: Feature(note="'... twice conflict' rows name databases and collections, not documents"),
    REPLACE: Feature(("Replace document",)),
    IF_MATCH: Feature(note="the table names 'Replace document', not its If-Match precondition"),
    UPSERT: Feature(
        note="the table lists 'Update document' and 'Replace document'; it does not say which is upsert"
    ),
    DELETE: Feature(("Delete document",)),
    CROSS_PARTITION: Feature(
        ("Query with order by for partitioned collection",),
        note="'Query partitioned collection in parallel' (not yet implemented) is a parallel "
        "fan-out the synchronous Python SDK does not do: it reads the partitions one after another",
    ),
    SINGLE_PARTITION: Feature(
        note=f"no row names partition-scoped queries; '{ISSUES}/347' (open): the emulator ignores "
        "the page size of a partition-scoped ordered query, so DUE may answer more entries than asked",
    ),
    MAX_ITEM_COUNT: Feature(("Query with paging",)),
    CONTINUATION: Feature(
        ("Query with paging",), note=f"'{ISSUES}/156' (continuations on ORDER BY queries) is closed"
    ),
    REQUEST_CHARGE: Feature(("Request Units",)),
}

# A row that does not say Supported, and why the adapter still works: each with a test below.
DEGRADED: dict[str, str] = {
    REQUEST_CHARGE: "the adapters read the header with a default of 0; the charge is only reported "
    "(Page.cost, the sas.supervisor.cost metric, the Supervisor's log), never decided on",
    INDEX_POLICY: "infra/scripts/init_emulators.py sets Azure's composite indexes; the vNext "
    "emulator accepts and ignores them, and its queries do not need them to be right",
}

# Reported failing in the emulator's issue tracker, still open: never to be used.
KNOWN_BROKEN: dict[str, tuple[str, ...]] = {
    IN: (f"{ISSUES}/165", f"{ISSUES}/128"),  # IN over parameters: HTTP 500 "Index does not have options 16"
    INEQUALITY: (f"{ISSUES}/194",),  # "<>" fails to parse
}

# Used, and named by no row of the table (nor by the page): reviewed one by one (FEATURES' notes).
NOT_IN_TABLE = frozenset(
    {
        PARAMETERS,
        TOP,
        OR,
        IS_NULL,
        NOT_FOUND,
        READ_HEADER,
        CONFLICT,
        IF_MATCH,
        UPSERT,
        SINGLE_PARTITION,
    }
)

# --- What each query text uses ------------------------------------------------------------------

# Every public text of adapters/cosmos/queries.py; count_in_states at the largest arity the app
# uses (LOCKED_STATES: Processing, Compensating).
QUERY_TEXTS: dict[str, str] = {
    "EXPIRED": cosmos_queries.EXPIRED,
    "CLAIMABLE": cosmos_queries.CLAIMABLE,
    "IN_STATE": cosmos_queries.IN_STATE,
    "NOTICES": cosmos_queries.NOTICES,
    "LOCKED_RECORDS": cosmos_queries.LOCKED_RECORDS,
    "count_in_states": cosmos_queries.count_in_states([f"@s{n}" for n in range(len(LOCKED_STATES))]),
    "FIRST_BUCKET": cosmos_queries.FIRST_BUCKET,
    "DUE": cosmos_queries.DUE,
}

QUERY_TABLE: dict[str, frozenset[str]] = {
    "EXPIRED": frozenset({PARAMETERS, RANGE, AND, OR, EQUALITY, ORDER_BY}),
    "CLAIMABLE": frozenset({TOP, PARAMETERS, EQUALITY, AND, IS_NULL, OR, RANGE, ORDER_BY}),
    "IN_STATE": frozenset({TOP, PARAMETERS, EQUALITY, ORDER_BY}),
    "NOTICES": frozenset({TOP, PARAMETERS, EQUALITY, ORDER_BY}),
    "LOCKED_RECORDS": frozenset({PROJECTION, EQUALITY, OR}),
    "count_in_states": frozenset({SELECT_VALUE, COUNT, PARAMETERS, EQUALITY, OR}),
    "FIRST_BUCKET": frozenset({TOP, PROJECTION, PARAMETERS, RANGE, AND, ORDER_BY}),
    "DUE": frozenset({PROJECTION, PARAMETERS, EQUALITY, RANGE, AND, ORDER_BY}),
}

_TOKEN = re.compile(
    r"\s+|(?P<string>'[^']*')|(?P<param>@\w+)|(?P<number>\d+)|(?P<op><=|>=|!=|<>|=|<|>)"
    r"|(?P<punct>[(),*])|(?P<word>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)"
)
_KEYWORDS = {
    "SELECT", "VALUE", "TOP", "DISTINCT", "FROM", "WHERE", "AND", "OR", "NOT", "IN", "BETWEEN",
    "LIKE", "EXISTS", "JOIN", "GROUP", "ORDER", "BY", "ASC", "DESC", "OFFSET", "LIMIT", "AS",
    "TRUE", "FALSE", "NULL", "UNDEFINED",
}  # fmt: skip
_FUNCTIONS = {"COUNT": COUNT, "IS_NULL": IS_NULL}
_KEYWORD_FEATURES = {"AND": AND, "OR": OR, "IN": IN}
# Keywords every query has, or whose feature the select list or ORDER BY already gave.
_PLAIN_KEYWORDS = {"SELECT", "VALUE", "TOP", "FROM", "WHERE", "BY", "TRUE", "FALSE"}
_OPERATORS = {
    "=": EQUALITY,
    "<": RANGE,
    "<=": RANGE,
    ">": RANGE,
    ">=": RANGE,
    "!=": INEQUALITY,
    "<>": INEQUALITY,
}


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        assert match is not None and match.end() > position, f"cannot read {text[position:]!r}"
        position = match.end()
        if match.lastgroup is not None:
            kind, value = match.lastgroup, match[match.lastgroup]
            if kind == "word" and value.upper() in _KEYWORDS:
                kind, value = "keyword", value.upper()
            tokens.append((kind, value))
    return tokens


def query_features(text: str) -> frozenset[str]:
    """The features of one NoSQL query text. Anything it does not know is named ``unknown: ...``,
    which no table classifies, so a new construct fails the tests until it is added here."""
    tokens = _tokens(text)
    values = [value for _, value in tokens]
    assert values[0] == "SELECT", text
    found: set[str] = set()
    select_list = values[1 : values.index("FROM")]
    if select_list[:1] == ["VALUE"]:
        found.add(SELECT_VALUE)
        select_list = select_list[1:]
    if select_list[:1] == ["TOP"]:
        found.add(TOP)
        select_list = select_list[2:]
    if select_list != ["*"] and not any(value == "(" for value in select_list):
        found.add(PROJECTION)
    for index, (kind, value) in enumerate(tokens):
        following = values[index + 1] if index + 1 < len(values) else ""
        if kind == "param":
            found.add(PARAMETERS)
        elif kind == "op":
            found.add(_OPERATORS[value])
        elif kind == "word" and following == "(":
            found.add(_FUNCTIONS.get(value.upper(), f"unknown: function {value}"))
        elif kind == "keyword" and value in _KEYWORD_FEATURES:
            found.add(_KEYWORD_FEATURES[value])
        elif kind == "keyword" and value == "ORDER":
            keys = values[index + 2 :]
            if "," in keys or "DESC" in keys or len(keys) != 1:
                found.add(f"unknown: ORDER BY {' '.join(keys)}")
            else:
                found.add(ORDER_BY)
        elif kind == "keyword" and value not in _PLAIN_KEYWORDS:
            found.add(f"unknown: {value}")
    return frozenset(found)


# --- What each operation uses -------------------------------------------------------------------

# SDK methods a request follows from, and what each is. None: builds a client-side proxy only.
SDK_METHODS: dict[str, str | None] = {
    "from_connection_string": GATEWAY,
    "get_database_client": None,
    "get_container_client": None,
    "create_database_if_not_exists": CREATE_DATABASE,
    "create_container_if_not_exists": CREATE_CONTAINER,
    "read_item": POINT_READ,
    "create_item": CREATE,
    "replace_item": REPLACE,
    "upsert_item": UPSERT,
    "delete_item": DELETE,
    "query_items": None,  # what a query uses comes from its text and its keyword arguments
    "by_page": CONTINUATION,
}
# (method, keyword argument) -> feature; None: client-side only. The key None stands for **kwargs.
SDK_KEYWORDS: dict[tuple[str, str | None], str | None] = {
    ("from_connection_string", "connection_verify"): None,  # TLS checking (the compose emulator is HTTP)
    ("from_connection_string", None): None,  # the transport and the SDK's own 429 retry options
    ("create_container_if_not_exists", "indexing_policy"): INDEX_POLICY,
    ("read_item", "partition_key"): None,  # part of a point read
    ("read_item", "headers"): READ_HEADER,
    ("read_item", "response_hook"): REQUEST_CHARGE,
    ("create_item", "response_hook"): REQUEST_CHARGE,
    ("replace_item", "etag"): IF_MATCH,
    ("replace_item", "match_condition"): IF_MATCH,
    ("replace_item", "response_hook"): REQUEST_CHARGE,
    ("delete_item", "partition_key"): None,  # part of a point delete
    ("delete_item", "response_hook"): REQUEST_CHARGE,
    ("query_items", "parameters"): PARAMETERS,
    ("query_items", "enable_cross_partition_query"): CROSS_PARTITION,
    ("query_items", "partition_key"): SINGLE_PARTITION,
    ("query_items", "max_item_count"): MAX_ITEM_COUNT,
    ("query_items", "response_hook"): REQUEST_CHARGE,
}
COSMOS_ERRORS: dict[str, str] = {
    "CosmosResourceNotFoundError": NOT_FOUND,
    "CosmosResourceExistsError": CONFLICT,
    "CosmosAccessConditionFailedError": IF_MATCH,
}

# Where Cosmos DB is called from: whole modules, or the named functions of a module.
SCANNED: dict[str, frozenset[str] | None] = {
    "adapters/cosmos/state_store.py": None,
    "adapters/cosmos/recovery_index.py": None,
    "adapters/azure_profile.py": frozenset(
        {"cosmos_container", "cosmos_state_store", "cosmos_recovery_index"}
    ),
    "services/indexed_state_store.py": None,
    "infra/scripts/init_emulators.py": frozenset({"create_cosmos"}),
}

_READ = frozenset({POINT_READ, NOT_FOUND, READ_HEADER})
_CURSOR_READ = _READ | {REQUEST_CHARGE}
_QUERY = frozenset({PARAMETERS, CROSS_PARTITION, MAX_ITEM_COUNT})

# Each function that reaches Cosmos DB (through its own calls or its helpers') -> all it uses.
OPERATIONS: dict[str, frozenset[str]] = {
    "cosmos_state_store:CosmosStateStore.create_if_absent": _READ | {CREATE, CONFLICT},
    "cosmos_state_store:CosmosStateStore.get": _READ,
    "cosmos_state_store:CosmosStateStore.replace": frozenset({REPLACE, IF_MATCH, NOT_FOUND}),
    "cosmos_state_store:CosmosStateStore._query": _QUERY,
    "cosmos_state_store:CosmosStateStore.query_claimable": _QUERY | QUERY_TABLE["CLAIMABLE"],
    "cosmos_state_store:CosmosStateStore.query_expired": _QUERY
    | QUERY_TABLE["EXPIRED"]
    | {REQUEST_CHARGE, CONTINUATION},
    "cosmos_state_store:CosmosStateStore.count_in_states": _QUERY | QUERY_TABLE["count_in_states"],
    "cosmos_state_store:CosmosStateStore.query_pending_notices": _QUERY | QUERY_TABLE["NOTICES"],
    "cosmos_state_store:CosmosStateStore.query_in_state": _QUERY | QUERY_TABLE["IN_STATE"],
    # The in-flight cap's item: read, created or replaced with If-Match; the locked records' query.
    "cosmos_state_store:CosmosStateStore._read_slots": _READ | _QUERY | QUERY_TABLE["LOCKED_RECORDS"],
    "cosmos_state_store:CosmosStateStore._write_slots": frozenset({CREATE, CONFLICT, REPLACE, IF_MATCH}),
    "cosmos_state_store:CosmosStateStore._free_stale": _QUERY | QUERY_TABLE["LOCKED_RECORDS"],
    "cosmos_state_store:CosmosStateStore.slots_acquired": _READ | _QUERY | QUERY_TABLE["LOCKED_RECORDS"],
    "cosmos_state_store:CosmosStateStore.acquire_slot": _READ
    | _QUERY
    | QUERY_TABLE["LOCKED_RECORDS"]
    | {CREATE, CONFLICT, REPLACE, IF_MATCH},
    "cosmos_state_store:CosmosStateStore.release_slot": _READ
    | _QUERY
    | QUERY_TABLE["LOCKED_RECORDS"]
    | {CREATE, CONFLICT, REPLACE, IF_MATCH},
    "cosmos_recovery_index:CosmosRecoveryIndex.add": frozenset({UPSERT}),
    "cosmos_recovery_index:CosmosRecoveryIndex.due": QUERY_TABLE["DUE"]
    | {SINGLE_PARTITION, MAX_ITEM_COUNT, REQUEST_CHARGE, CONTINUATION},
    "cosmos_recovery_index:CosmosRecoveryIndex.first_bucket": _QUERY
    | QUERY_TABLE["FIRST_BUCKET"]
    | {REQUEST_CHARGE},
    "cosmos_recovery_index:CosmosRecoveryIndex.remove": frozenset({DELETE, NOT_FOUND, REQUEST_CHARGE}),
    "cosmos_recovery_index:CosmosRecoveryIndex._read_cursor": _CURSOR_READ,
    "cosmos_recovery_index:CosmosRecoveryIndex.cursor": _CURSOR_READ,
    "cosmos_recovery_index:CosmosRecoveryIndex.advance_cursor": _CURSOR_READ
    | {CREATE, CONFLICT, REPLACE, IF_MATCH},
    "azure_profile:cosmos_container": frozenset({GATEWAY}),
    "azure_profile:cosmos_state_store": frozenset({GATEWAY}),
    "azure_profile:cosmos_recovery_index": frozenset({GATEWAY}),
    "init_emulators:create_cosmos": frozenset({GATEWAY, CREATE_DATABASE, CREATE_CONTAINER, INDEX_POLICY}),
}


def _sdk_methods() -> set[str]:
    names = {"by_page"}  # ItemPaged's: a query read page by page with continuation tokens
    for cls in (CosmosClient, DatabaseProxy, ContainerProxy):
        names |= {
            name for name, value in inspect.getmembers(cls) if not name.startswith("_") and callable(value)
        }
    return names


@dataclass
class _Function:
    features: set[str]
    helpers: set[str]  # same-class methods (self.x) and same-module functions it calls


def _query_aliases(tree: ast.Module) -> dict[str, str]:
    """Local names bound to adapters.cosmos.queries' texts: ``_EXPIRED`` -> ``EXPIRED``."""
    aliases: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "adapters.cosmos.queries":
            aliases |= {alias.asname or alias.name: alias.name for alias in node.names}
    return aliases


def _scan_function(node: ast.FunctionDef, aliases: dict[str, str], sdk: set[str]) -> _Function:
    found = _Function(set(), set())
    for child in ast.walk(node):
        if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) and child.func.attr in sdk:
            method = child.func.attr
            assert method in SDK_METHODS, f"{node.name} calls {method}: classify it in SDK_METHODS"
            if (feature := SDK_METHODS[method]) is not None:
                found.features.add(feature)
            for keyword in child.keywords:
                key = (method, keyword.arg)
                assert key in SDK_KEYWORDS, f"{node.name} passes {key}: classify it in SDK_KEYWORDS"
                if (feature := SDK_KEYWORDS[key]) is not None:
                    found.features.add(feature)
        elif isinstance(child, ast.Call):
            func = child.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "self"
            ):
                found.helpers.add(func.attr)
            elif isinstance(func, ast.Name):
                found.helpers.add(func.id)
        if isinstance(child, ast.Name) and child.id in COSMOS_ERRORS:
            found.features.add(COSMOS_ERRORS[child.id])
        if isinstance(child, ast.Name) and child.id in aliases:
            name = aliases[child.id]
            assert name in QUERY_TABLE, f"{node.name} uses cosmos_queries.{name}: classify it in QUERY_TABLE"
            found.features |= QUERY_TABLE[name]
    return found


def _functions(path: Path, only: frozenset[str] | None) -> dict[str, _Function]:
    """Every function (``Class.method`` or ``function``) of the module, scanned."""
    tree = ast.parse(path.read_text(), str(path))
    aliases, sdk = _query_aliases(tree), _sdk_methods()
    scanned: dict[str, _Function] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and (only is None or node.name in only):
            scanned[node.name] = _scan_function(node, aliases, sdk)
        elif isinstance(node, ast.ClassDef) and only is None:
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    scanned[f"{node.name}.{item.name}"] = _scan_function(item, aliases, sdk)
    return scanned


def derived_operations() -> dict[str, frozenset[str]]:
    """Each scanned function that reaches Cosmos DB -> what it and its helpers use."""
    operations: dict[str, frozenset[str]] = {}
    for relative, only in SCANNED.items():
        functions = _functions(ROOT / relative, only)

        def closure(name: str, seen: frozenset[str], functions: dict[str, _Function] = functions) -> set[str]:
            function = functions[name]
            features = set(function.features)
            owner = name.rpartition(".")[0]
            for helper in function.helpers:
                target = f"{owner}.{helper}" if owner else helper
                if target in functions and target not in seen:
                    features |= closure(target, seen | {target})
            return features

        # adapters/cosmos/state_store.py -> cosmos_state_store: the backend and the module.
        path = Path(relative).with_suffix("")
        module = "_".join(path.parts[1:]) if path.parts[0] == "adapters" else path.stem
        for name in functions:
            if features := closure(name, frozenset({name})):
                operations[f"{module}:{name}"] = frozenset(features)
    return operations


# --- The tests ----------------------------------------------------------------------------------


def test_every_row_named_is_a_row_of_the_published_table() -> None:
    for name, feature in FEATURES.items():
        unknown = [row for row in feature.rows if row not in VNEXT_TABLE]
        assert not unknown, f"{name}: no such row in {VNEXT_FEATURE_SUPPORT}: {unknown}"


def test_every_query_text_lives_in_cosmos_queries() -> None:
    """No query is written inline in a module that talks to Cosmos DB: each is one of
    adapters/cosmos/queries.py's texts, which the tables classify."""
    for relative in SCANNED:
        tree = ast.parse((ROOT / relative).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not re.match(r"\s*SELECT\s", node.value, re.IGNORECASE), (
                    f"{relative}: a query written inline ({node.value[:40]!r}): move it to cosmos_queries"
                )


def test_every_text_of_cosmos_queries_is_classified() -> None:
    public = {
        name
        for name, value in vars(cosmos_queries).items()
        if not name.startswith("_")
        and (
            isinstance(value, str)
            or (inspect.isfunction(value) and value.__module__ == cosmos_queries.__name__)
        )
    }
    assert public == set(QUERY_TEXTS) == set(QUERY_TABLE)


@pytest.mark.parametrize("name", sorted(QUERY_TABLE))
def test_the_table_says_what_each_query_text_uses(name: str) -> None:
    """The table is read off the text: a changed query changes what it uses."""
    assert query_features(QUERY_TEXTS[name]) == QUERY_TABLE[name], QUERY_TEXTS[name]


@pytest.mark.parametrize("states", range(1, len(ProcessState) + 1))
def test_the_count_never_uses_in_whatever_the_number_of_states(states: int) -> None:
    text = cosmos_queries.count_in_states([f"@s{n}" for n in range(states)])
    assert query_features(text) <= QUERY_TABLE["count_in_states"], text
    assert IN not in query_features(text)


def test_the_table_says_what_each_operation_uses() -> None:
    """Read off the code: every SDK call, keyword argument, caught Cosmos error and query text of
    each function, with its helpers'. A new operation or a changed one fails here first."""
    assert derived_operations() == OPERATIONS


def test_the_recovery_index_wrapper_never_calls_cosmos_itself() -> None:
    """services/indexed_state_store.py reaches Cosmos only through the two adapters above."""
    assert not any(name.startswith("indexed_state_store:") for name in derived_operations())


def _used() -> set[str]:
    return set().union(*OPERATIONS.values())


def test_every_feature_used_is_documented_as_supported_by_the_vnext_emulator() -> None:
    """The check itself: each feature an operation uses is named by a row that says Supported
    (or by the page), or is degraded with a test, or is one of the reviewed features the table
    does not name; none is reported broken."""
    problems: list[str] = []
    for name in sorted(_used()):
        if name not in FEATURES:
            problems.append(f"{name}: not classified (FEATURES)")
            continue
        feature = FEATURES[name]
        if name in KNOWN_BROKEN:
            problems.append(f"{name}: reported failing on the vNext emulator: {KNOWN_BROKEN[name]}")
            continue
        statuses = {VNEXT_TABLE[row] for row in feature.rows}
        if statuses and statuses != {SUPPORTED} and name not in DEGRADED:
            problems.append(f"{name}: {VNEXT_FEATURE_SUPPORT} says {sorted(statuses)}")
        if not statuses and not feature.page and name not in NOT_IN_TABLE:
            problems.append(f"{name}: named nowhere on {VNEXT_PAGE}: review it and add it to NOT_IN_TABLE")
    assert not problems, "\n".join(problems)


def test_the_reviewed_lists_hold_exactly_what_is_used() -> None:
    """NOT_IN_TABLE and DEGRADED are reviews of what the code uses, not allowances for later."""
    used = _used()
    unnamed = {name for name in used if not FEATURES[name].rows and not FEATURES[name].page}
    assert unnamed == NOT_IN_TABLE
    degraded = {name for name in used if any(VNEXT_TABLE[row] != SUPPORTED for row in FEATURES[name].rows)}
    assert degraded == set(DEGRADED)


def test_the_python_sdk_still_reads_partitions_one_after_another() -> None:
    """CROSS_PARTITION leaves out the row 'Query partitioned collection in parallel' because the
    synchronous SDK has no parallel fan-out; if an upgrade adds one, the row needs a new look."""
    from azure.cosmos._execution_context import multi_execution_aggregator  # noqa: PLC0415

    assert "needs to be parallelized" in inspect.getsource(multi_execution_aggregator)


# --- Degraded features: the adapters work without them ------------------------------------------


class _Pages(Iterator[list[dict[str, Any]]]):
    continuation_token: str | None = None

    def __init__(self, items: list[Any], hook: Any) -> None:
        self._pages = iter([items])
        self._hook = hook

    def __next__(self) -> list[dict[str, Any]]:
        if self._hook is not None:
            self._hook({}, None)  # a response without x-ms-request-charge, as the vNext emulator's
        return next(self._pages)


class _Result:
    def __init__(self, items: list[Any], hook: Any) -> None:
        self._items, self._hook = items, hook

    def __iter__(self) -> Iterator[Any]:
        if self._hook is not None:
            self._hook({}, None)
        return iter(self._items)

    def by_page(self, continuation: str | None = None) -> _Pages:
        return _Pages(self._items, self._hook)


class _NoChargeContainer:
    """Answers every query with nothing (a count with 0) and no request charge header; records
    the texts it was sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def query_items(self, query: str, **kwargs: Any) -> _Result:
        self.sent.append(query)
        return _Result([0] if "COUNT(" in query else [], kwargs.get("response_hook"))


def test_every_text_sent_is_a_classified_text_and_no_charge_header_means_cost_zero() -> None:
    """Request Units are not implemented by the vNext emulator: the costs the adapters report are
    then 0, and nothing fails. Also checks the texts actually sent against the table."""
    container = _NoChargeContainer()
    store = CosmosStateStore(container, emulator=True)  # type: ignore[arg-type]
    index = CosmosRecoveryIndex(container, timedelta(minutes=5), emulator=True)  # type: ignore[arg-type]
    now = datetime(2026, 1, 1, tzinfo=UTC)

    assert store.query_expired(now, now, page_size=10).cost == 0.0
    assert index.due(now, now, limit=10).cost == 0.0
    assert index.first_bucket(now, now) == (None, 0.0)
    assert store.query_claimable(now, 5) == []
    assert store.query_pending_notices(5) == []
    assert store.query_in_state(ProcessState.PENDING, 5) == []
    assert store.count_in_states(LOCKED_STATES) == 0
    assert store.count_in_states(frozenset({ProcessState.PENDING})) == 0

    classified = set(QUERY_TEXTS.values()) | {cosmos_queries.count_in_states(["@s0"])}
    assert set(container.sent) <= classified
    assert len(set(container.sent)) == 8


# --- The compose service the emulators profile points at ----------------------------------------


def test_the_compose_emulator_speaks_the_protocol_of_the_sample_settings() -> None:
    """local.settings.sample.json's CosmosDBConnection and docker-compose.yml's PROTOCOL agree."""
    compose = (ROOT / "docker-compose.yml").read_text()
    service = re.search(r"^  cosmosdb:\n((?:    .*\n|\s*\n)+)", compose, re.MULTILINE)
    assert service is not None
    protocol = re.search(r"^\s+PROTOCOL:\s*\"?(\w[\w-]*)", service[1], re.MULTILINE)
    assert protocol is not None, "set the emulator's PROTOCOL explicitly"
    sample = json.loads((ROOT / "local.settings.sample.json").read_text())["Values"]["CosmosDBConnection"]
    endpoint = re.search(r"AccountEndpoint=(\w+)://[^:/]+:(\d+)/", sample)
    assert endpoint is not None
    assert endpoint[1] == {"http": "http", "https": "https", "https-insecure": "https"}[protocol[1]]
    assert f'"{endpoint[2]}:8081"' in service[1]
