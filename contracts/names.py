"""The names the Durable functions are registered under (``function_app.py``) and called and
started by (the orchestrators, the starter): Durable wiring, so not in ``domain``, which has no
Azure in it. A registered name never changes while an instance may still call it (C7).
"""

from enum import StrEnum

# The orchestrator every new attempt runs, whatever its workflow version: the steps are run by
# its activity, which reads the version from the record, so a new version needs no new
# orchestrator. A change to the orchestrator's own code gets a new name (C7), and the old one
# stays registered until no instance of it is left.
ATTEMPT_ORCHESTRATOR = "order_attempt"


def orchestrator_name(version: str) -> str:
    """The first engine's orchestrators, one per version (drained, then removed:
    ``first_engine_blueprint.py``)."""
    return f"order_workflow_{version}"


class Activity(StrEnum):
    """The activity functions, by the one name function_app.py registers each under and the
    orchestrators call it by. What each takes and returns: ``contracts.activities``."""

    ADVANCE = "advance"  # everything between two waits of an order_attempt
    # The first engine's, one per action (orchestrators/first_engine.py): drained with it.
    READ_ORDER = "read_order"
    BEGIN_STEP = "begin_step"
    SEND_AGENT_REQUEST = "send_agent_request"
    RECORD_STEP = "record_step"
    RUN_LOCAL_STEP = "run_local_step"
    FINISH = "finish"
