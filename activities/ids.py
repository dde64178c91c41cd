"""The identity every activity payload carries: the order and the attempt (instance) acting on it."""

from dataclasses import dataclass

from contracts.activities import AttemptInput
from domain.ids import parse_instance_id


@dataclass(frozen=True)
class Attempt:
    order_id: str
    instance_id: str

    @classmethod
    def of(cls, payload: AttemptInput) -> "Attempt":
        return cls(order_id=payload.OrderID, instance_id=payload.InstanceID)

    @property
    def number(self) -> int:
        return parse_instance_id(self.instance_id)[1]

    def payload(self) -> AttemptInput:
        """The identity part of an activity's input."""
        return AttemptInput(OrderID=self.order_id, InstanceID=self.instance_id)
