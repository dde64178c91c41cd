"""The Agent (R2-R4, E8, E11): a separate worker process that calls the remote service.

It takes agent requests from a Service Bus queue, calls the remote service with the request's
idempotency key, retries transient faults within the request's deadline and attempt limit,
guards each remote service with a circuit breaker, and replies on the reply queue. It never
recovers the workflow itself: that is the Scheduler's and the Supervisor's job.
"""
