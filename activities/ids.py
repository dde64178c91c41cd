"""The identity every activity payload carries: the order and the attempt (instance) acting on it."""

from dataclasses import dataclass

from activities.contracts import AttemptInput


@dataclass(frozen=True)
class Attempt:
    order_id: str
    instance_id: str

    @classmethod
    def of(cls, payload: AttemptInput) -> "Attempt":
        return cls(order_id=str(payload["OrderID"]), instance_id=str(payload["InstanceID"]))

    @property
    def number(self) -> int:
        return int(self.instance_id.rsplit("-", 1)[1])

    def payload(self) -> AttemptInput:
        """The identity part of an activity's input."""
        return {"OrderID": self.order_id, "InstanceID": self.instance_id}
