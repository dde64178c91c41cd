"""Everything a function body needs, built once per process by the composition root."""

from dataclasses import dataclass

from domain.ports import (
    Clock,
    CompensationLog,
    MessageSender,
    MessageSettlement,
    OrdersRepository,
    StateStore,
)
from services.settings import Settings


@dataclass(frozen=True)
class Ports:
    settings: Settings
    states: StateStore
    orders: OrdersRepository
    compensation_log: CompensationLog
    clock: Clock
    sender: MessageSender
    settlement: MessageSettlement
