"""Durable orchestrators: ``order_attempt`` (every new attempt, any workflow version) and the first
engine's ``order_workflow_v1``/``v2`` (``first_engine.py``), kept until their instances end; and
the names every Durable function is registered and called by (``names.py``)."""
