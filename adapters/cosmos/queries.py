"""Every Cosmos DB NoSQL query text the adapters send, in one place.

The same texts run on Azure Cosmos DB, on the open-source server the tests start
(``@vercel/cosmosdb-server``) and on the Linux vNext emulator of docker-compose.yml, which
supports only part of the query language. ``tests/unit/test_cosmos_queries.py`` classifies each
text by the query features it uses against the vNext emulator's published feature table, so a
query added here (or written inline in an adapter) without that review fails the tests.

All values are parameters (``@name``), never formatted into the text.
"""

from collections.abc import Sequence

# --- cosmos_state_store: container ``orderState``, partition key ``/OrderID`` -----------------

# The Supervisor's window scan (E13): cross-partition, ordered, paged with continuation tokens.
EXPIRED = (
    "SELECT * FROM c WHERE c.CompleteBy >= @windowStart AND c.CompleteBy < @now"
    " AND (c.ProcessState = 'Processing' OR c.ProcessState = 'Compensating') ORDER BY c.CompleteBy"
)
# The starter's candidates (E4): oldest first.
CLAIMABLE = (
    "SELECT TOP @limit * FROM c WHERE c.ProcessState = 'Pending' AND IS_NULL(c.LockedBy)"
    " AND (IS_NULL(c.NotBefore) OR c.NotBefore <= @now) ORDER BY c.CreatedAt"
)
# The operator CLI's listing.
IN_STATE = "SELECT TOP @limit * FROM c WHERE c.ProcessState = @state ORDER BY c.OrderID"
# The Supervisor's outbox: records whose give-up notices are still to be sent.
NOTICES = "SELECT TOP @limit * FROM c WHERE c.NoticePending = true ORDER BY c.OrderID"
# The in-flight cap's attempts locked now: its first slots when the cap item is created, and its
# liveness check when every slot is held.
LOCKED_RECORDS = (
    "SELECT c.OrderID, c.LockedBy FROM c"
    " WHERE c.ProcessState = 'Processing' OR c.ProcessState = 'Compensating'"
)


def count_in_states(names: Sequence[str]) -> str:
    """The number of records in any of the states bound to the parameters ``names``.

    Equalities joined by OR rather than ``IN (@s0, @s1)``: the two mean the same, but the vNext
    emulator answers ``IN`` over parameters with HTTP 500 ("Index does not have options 16";
    Azure/azure-cosmos-db-emulator-docker issues 165 and 128, open).
    """
    if not names:
        raise ValueError("count_in_states needs at least one state parameter")
    return "SELECT VALUE COUNT(1) FROM c WHERE " + " OR ".join(f"c.ProcessState = {name}" for name in names)


# --- cosmos_recovery_index: container ``recoveryIndex``, partition key ``/Bucket`` ------------

# The next bucket holding any entry, across partitions. The cursor's partition name sorts after
# every timestamp, so this range never includes it.
FIRST_BUCKET = "SELECT TOP 1 c.Bucket FROM c WHERE c.Bucket >= @start AND c.Bucket <= @end ORDER BY c.Bucket"
# One bucket's due entries: a single-partition query (the bucket is the partition key, and is
# named in the WHERE clause too, since the open-source server ignores partition-key scoping).
DUE = (
    "SELECT c.OrderID, c.CompleteBy FROM c WHERE c.Bucket = @bucket AND c.CompleteBy < @now"
    " ORDER BY c.CompleteBy"
)
