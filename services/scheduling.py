"""The timer-triggered halves of the pattern: the starter (E4) and the Supervisor (E13-E15)."""

import asyncio
import logging
import secrets
from collections.abc import Callable
from typing import Any, Protocol

from contracts.names import ATTEMPT_ORCHESTRATOR
from domain.errors import DependencyUnavailable
from domain.ids import INSTANCE_ID_PATTERN, url_segment
from domain.ports import Stored
from domain.states import ProcessState
from services import telemetry
from services.claim_pending import Claim, ClaimReport, claim_next, claim_one, claim_pending
from services.context import Ports
from services.notifications import tell
from services.supervise import SupervisionReport, supervise

log = logging.getLogger("sas.scheduling")


class OrchestrationStarter(Protocol):
    async def start_new(
        self, orchestration_function_name: str, instance_id: str | None = None, client_input: Any = None
    ) -> str: ...


async def start_pending(client: OrchestrationStarter, ports: Ports) -> ClaimReport:
    """Claim first, then start: the claim's start grace covers a crash in between (E4).

    A store that is down ends the tick quietly (the outage was alerted once where it was seen);
    the next tick tries again, so the starter recovers by itself."""
    try:
        return await _start_pending(client, ports)
    except DependencyUnavailable as outage:
        log.warning("starter: %s; the next tick tries again", outage)
        return ClaimReport()


async def _start_pending(client: OrchestrationStarter, ports: Ports) -> ClaimReport:
    settings = ports.settings
    report = await asyncio.to_thread(
        claim_pending,
        ports.states,
        ports.clock,
        settings.scheduler_policy,
        max_in_flight=settings.max_in_flight,
        batch_size=settings.claim_batch_size,
    )
    telemetry.in_flight.set(report.in_flight)
    telemetry.backlog.set(
        await asyncio.to_thread(ports.states.count_in_states, frozenset({ProcessState.PENDING}))
    )
    for claim in report.claims:
        ports.records.remember(claim.stored)
        await _start(client, claim)
    if report.claims or report.lost:
        log.info(
            "starter: claimed %d (lost %d races), %d in flight before, capacity %d",
            len(report.claims),
            report.lost,
            report.in_flight,
            report.capacity,
        )
    return report


async def start_now(client: OrchestrationStarter, ports: Ports, stored: Stored) -> bool:
    """Start a new order's first attempt at once, from the submission path, instead of at the
    starter's next tick; the starter remains the sweeper for what this misses (a full cap, a
    crash between the write and the start, a lost race)."""
    settings = ports.settings
    claimed = await _claim_and_start(
        client,
        ports,
        lambda: claim_one(
            ports.states, ports.clock, settings.scheduler_policy, stored, max_in_flight=settings.max_in_flight
        ),
        f"could not start order {stored.record.OrderID} at once",
    )
    return claimed is not None


async def refill(client: OrchestrationStarter, ports: Ports, ended: str | None = None) -> Claim | None:
    """Attempt ``ended`` has ended: the slot it freed claims and starts the oldest claimable order now,
    so a backlog drains at the rate attempts end rather than at the starter's. Called after the
    ending's write; a failure here leaves the order Pending for the starter's next tick."""
    settings = ports.settings
    return await _claim_and_start(
        client,
        ports,
        lambda: claim_next(
            ports.states,
            ports.clock,
            settings.scheduler_policy,
            max_in_flight=settings.max_in_flight,
            ended=ended,
        ),
        "could not refill a freed slot",
    )


async def _claim_and_start(
    client: OrchestrationStarter, ports: Ports, claim: Callable[[], Claim | None], failed: str
) -> Claim | None:
    """``claim`` off the event loop, then the start. The work it follows is done: a claim that
    fails is logged and left for the starter to sweep up."""
    try:
        claimed = await asyncio.to_thread(claim)
    except DependencyUnavailable as outage:  # expected in an outage, alerted once: one line
        log.warning("%s: %s; the starter will", failed, outage)
        return None
    except Exception:
        log.exception("%s; the starter will", failed)
        return None
    if claimed is None:
        return None
    ports.records.remember(claimed.stored)
    await _start(client, claimed)
    return claimed


async def _start(client: OrchestrationStarter, claim: Claim) -> None:
    """Claim first, start second: if the start fails, the claim's start grace expires and the
    Supervisor sends the record back to Pending (design: the claim is the single decision)."""
    with telemetry.order_span(
        "claim", claim.order_id, claim.instance_id, attempt=claim.stored.record.Attempt
    ):
        try:
            # The SDK puts the instance ID in the URL as it is: checked and escaped first.
            instance = url_segment(claim.instance_id, INSTANCE_ID_PATTERN)
            # The attempt's secret salt for its request nonces (contracts.activities.OrchestratorInput).
            started = {"OrderID": claim.order_id, "Salt": secrets.token_hex(16)}
            await client.start_new(ATTEMPT_ORCHESTRATOR, instance, started)
        except Exception:  # the Supervisor recovers the claim when its grace expires
            log.exception("could not start %s for order %s", claim.instance_id, claim.order_id)


def supervise_and_notify(ports: Ports) -> SupervisionReport:
    """One Supervisor run: recover what expired, and tell submitters and operators what it gave up."""
    settings = ports.settings
    if not ports.leader.acquire(ports.instance_name):
        log.debug("supervisor: another instance holds the lease; not scanning")
        return SupervisionReport()

    down: set[str] = set()  # the dependencies found down by this run's tellings
    report = supervise(
        ports.states,
        ports.clock,
        settings.scheduler_policy.recovery,
        settings.supervisor_scan,
        lambda _, stored: tell(ports, stored, down=down),
        outages=ports.outages.windows if ports.outages is not None else lambda: (),
    )
    untold = tell_untold(ports, down)
    telemetry.supervisor_pages.add(report.pages)
    telemetry.supervisor_items.add(report.scanned)
    telemetry.supervisor_cost.add(report.cost)
    for recovery in report.recovered + report.held + report.gave_up:
        record = recovery.record
        telemetry.recoveries.add(1, {"outcome": recovery.outcome.value})
        telemetry.transitions.add(1, {"to_state": record.ProcessState.value})
        # A marker in the order's trace: the write itself happened in supervise().
        with telemetry.order_span("supervisor.recover", record.OrderID, outcome=recovery.outcome.value):
            pass
    # Quiet when there was nothing to do: the cadence (C9) may be seconds.
    log.log(
        logging.INFO if report.scanned else logging.DEBUG,
        "supervisor: %d pages, %d expired scanned, cost %.1f, recovered %d, gave up %d, lost %d, "
        "held for outages %d uncounted (%d waiting)%s%s",
        report.pages,
        report.scanned,
        report.cost,
        len(report.recovered),
        len(report.gave_up),
        report.lost,
        len(report.held),
        report.waiting,
        ", more left for the next run" if report.truncated else "",
        f"; {untold} endings not yet told (their dependency is down)" if untold else "",
    )
    return report


def tell_untold(ports: Ports, down: set[str]) -> int:
    """The outbox's sweep: what endings left untold (an outage, a crash between an ending's write
    and its telling), told now; how many endings still wait. A dependency found down (``down``:
    by this sweep, or earlier in the same run) is not tried again for each order."""
    waiting = 0
    for stored in ports.states.query_pending_notices(ports.settings.supervisor_scan.page_size):
        waiting += tell(ports, stored, down=down).record.Untold is not None
    return waiting


async def run_supervisor(client: OrchestrationStarter, ports: Ports) -> SupervisionReport:
    """A run, then the next attempt of every record it sent straight back to Pending, started at
    once (within the in-flight cap) rather than at the starter's next tick. A store that is down
    ends the run; what it did not reach waits for the next run (expired records stay expired)."""
    try:
        report = await asyncio.to_thread(supervise_and_notify, ports)
    except DependencyUnavailable as outage:
        log.warning("supervisor: %s; the next run tries again", outage)
        return SupervisionReport()
    for stored in report.restartable:
        await start_now(client, ports, stored)
    return report
