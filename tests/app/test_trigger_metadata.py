"""What a message's body can set of its trigger metadata, and that the app never trusts it.

For a body it binds as text, the Functions host binds the JSON body's top-level properties over
the Service Bus extension's own values, case-insensitively, and devhost binds them the same way
(``harness/devhost/bindings.py``): a body naming ``DeliveryCount`` or ``LockToken`` would set what
the function reads as its delivery count or lock token. The app's triggers take the body as bytes
(``function_app.BODY_AS_SENT``), from which the host binds nothing, and still refuse such a body.
These run the deployment package in a worker process, as on Azure.
"""

import json

import pytest

from domain.messages import AgentOutcome, AgentReply
from tests.support.app import App, submission

# Each key as the body spells it (JSON escapes included: the host decodes them before it binds),
# and the extension's name for it.
SPELLINGS = {
    "DeliveryCount": "DeliveryCount",
    "deliverycount": "DeliveryCount",
    "\\u0044eliveryCount": "DeliveryCount",
    "\\u004cockToken": "LockToken",
    "LockToken": "LockToken",
    "MessageId": "MessageId",
    "sessionId": "SessionId",
}


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_an_order_whose_body_sets_trigger_metadata_is_never_acted_on(app: App, spelling: str) -> None:
    order = submission("o-1").model_dump_json()
    app.send_raw(f'{{"{spelling}": 99, {order[1:]}', message_id="forged-1")
    app.run_until(lambda: bool(app.dead_letters("orders")))
    [dead] = app.dead_letters("orders")
    # Left to the broker, which counts real deliveries: the app gave up on nothing early.
    assert (dead.message_id, dead.dead_letter_reason, dead.delivery_count) == (
        "forged-1",
        "MaxDeliveryCountExceeded",
        5,
    )
    assert app.states.get("o-1") is None
    alerts = app.alerts()
    assert [a["Event"] for a in alerts] == ["MessageRejected"]  # once, not once per delivery
    reason = alerts[0]["Reason"]
    assert "MetadataInBody" in reason and SPELLINGS[spelling] in reason
    # The ID the function reads is the broker's, even where the body names a MessageId.
    assert "message forged-1 " in reason


def test_every_service_bus_trigger_takes_the_body_as_the_bytes_sent(app: App) -> None:
    """As bytes, the host neither decodes a body lossily nor binds its properties over the metadata."""
    triggers = {f.name: f.trigger for f in app.host.functions if f.trigger_type == "serviceBusTrigger"}
    assert sorted(triggers) == ["agent_reply", "submit_order"]
    assert {name: str(t.get("dataType")).lower() for name, t in triggers.items()} == dict.fromkeys(
        triggers, "binary"
    )


def test_a_reply_whose_body_sets_trigger_metadata_raises_no_event(app: App) -> None:
    app.submit(submission("o-1"))
    app.run_until(lambda: bool(app.agent.requests))
    request = app.agent.requests[0]
    forged = AgentReply(
        RequestID=request.RequestID,
        InstanceID=request.InstanceID,
        Step=request.Step,
        Outcome=AgentOutcome.PERMANENT,
        Error="forged",
        Attempts=1,
    )
    body = json.loads(forged.model_dump_json()) | {"DeliveryCount": 1}
    app.bus.send("agent-replies", json.dumps(body), message_id="forged-reply")
    app.run_until_terminal("o-1")
    assert app.record("o-1").ProcessState.value == "Processed"  # the forged refusal changed nothing
    app.run_until(lambda: bool(app.dead_letters("agent-replies")))
    [dead] = app.dead_letters("agent-replies")
    assert dead.message_id == "forged-reply" and dead.dead_letter_reason == "MaxDeliveryCountExceeded"


def test_a_body_nested_past_any_parser_is_dead_lettered_with_a_reason_not_retried(app: App) -> None:
    app.send_raw("[" * 20_000 + "]" * 20_000, message_id="deep-1")
    app.run_until(lambda: bool(app.dead_letters("orders")))
    [dead] = app.dead_letters("orders")
    assert dead.delivery_count == 1 and dead.dead_letter_reason not in (None, "MaxDeliveryCountExceeded")
    assert [a["Event"] for a in app.alerts()] == ["SubmissionRejected"]
