"""An AMQP 1.0 broker that the unchanged ``azure-servicebus`` SDK (sync and aio) accepts.

It lets the Service Bus adapter, the agent worker and the local Functions host be tested against
a real wire protocol with no Docker and no Azure. Queues come from a Service Bus emulator
``Config.json``; state is in memory and dies with the process.

Connect with ``Endpoint=sb://127.0.0.1:<port>;SharedAccessKeyName=...;SharedAccessKey=...;
UseDevelopmentEmulator=true`` (``Broker.connection_string``): with ``UseDevelopmentEmulator`` the
SDK keeps the port, speaks plain AMQP, authenticates with SASL ANONYMOUS and puts a token on
``$cbs``, which the broker accepts whatever it is.

Supported, as Service Bus behaves:

- send, single and batched (a batch is unpacked into its messages); send to an unknown entity
  or attach to one fails with ``amqp:not-found`` naming it;
- the Standard tier's 256 KB message size: advertised as ``max-message-size`` on the sender's
  link (the SDK sizes batches by it) and enforced on every transfer and scheduled message, which
  is rejected with ``amqp:link:message-size-exceeded`` (the SDK's ``MessageSizeExceededError``);
- the property quotas of every tier: an application property over 32 KB is rejected with the
  service's unmapped error (``amqp:internal-error``, "The service was unable to process the
  request": a plain ``ServiceBusError`` the SDK retries), a header over 64 KB (system and
  application properties together) with ``amqp:link:message-size-exceeded``; a batch is
  accepted or refused whole;
- any AMQP body, stored and delivered as sent (value and sequence bodies are never decoded);
- receive in peek-lock (credit-based; competing receivers get distinct messages) and
  receive-and-delete; the lock token is the delivery tag; ``x-opt-locked-until``,
  ``x-opt-sequence-number``, ``x-opt-enqueued-time`` annotations and the header's delivery count
  (0 on the first delivery, as Service Bus sends it);
- complete (accepted), abandon (modified: delivery count +1), dead-letter (rejected with
  ``DeadLetterReason``/``DeadLetterErrorDescription``, read back from ``<queue>/$deadletterqueue``
  with ``x-opt-deadletter-source``), release (a buffered message given back: not counted), each
  outcome echoed before settling, as the SDK's settle mode "second" waits for;
- lock expiry (the message returns with its delivery count +1), MaxDeliveryCount
  (``MaxDeliveryCountExceeded`` in the dead-letter queue), settling a lost lock
  (``com.microsoft:message-lock-lost``);
- the header's ``ttl`` as the service reports it (the TTL applied: the message's own capped by
  DefaultMessageTimeToLive, or that default), so the SDK's ``time_to_live`` and
  ``expires_at_utc`` are Azure's; ``x-opt-message-state`` (a peeked scheduled message is
  Scheduled);
- delivery ids out of order or repeated, as Service Bus's AMQP stack takes them and as the SDK
  sends them from threads sharing a receiver (``AutoLockRenewer``): ``frames`` renumbers them for
  proton and answers with the client's ids; every close error carries ``info``, which the SDK reads;
- a session receiver refused at attach (no queue has sessions), the error reaching the caller;
- over ``<entity>/$management``: ``renew-lock`` (any number of tokens), ``peek-message`` (does not lock),
  ``update-disposition`` (the SDK's fallback when the receive link is gone), ``schedule-message``
  and ``cancel-scheduled-message``; ``x-opt-scheduled-enqueue-time`` on a sent message;
- duplicate detection by MessageId within the queue's window (the duplicate is accepted and
  dropped); message TTL (the header's, capped by DefaultMessageTimeToLive, counted from the
  enqueued time, not while locked) with DeadLetteringOnMessageExpiration (else dropped);
- queue properties refused at start-up, naming queue and property, where Azure Standard refuses
  them: LockDuration PT5S..PT5M, MaxDeliveryCount 1..2147483647,
  DuplicateDetectionHistoryTimeWindow PT20S..P7D, DefaultMessageTimeToLive at least PT1S
  (``limits`` has the sources).

Timers run on ``Broker.clock``; ``Broker.advance(seconds)`` moves it forward and runs them, so
tests let a lock, a TTL or a duplicate window run out without sleeping.

Deliberately not supported: sessions, topics and subscriptions, transactions, defer and
receive-by-sequence-number, auto-forwarding, partitioning, queue size quotas, authorisation,
TLS, persistence. Config.json entities that need them are refused at start-up.
"""

from harness.standins.amqp_broker.clock import Clock
from harness.standins.amqp_broker.config import QueueSettings, load_queues
from harness.standins.amqp_broker.server import Broker, start_broker

__all__ = ["Broker", "Clock", "QueueSettings", "load_queues", "start_broker"]
