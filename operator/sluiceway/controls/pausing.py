"""The clocks of a run across a pause, and its soft SLA.

A paused run's clocks stop: on resume its deadline (`timeoutSeconds`) and its
SLA deadline move forward by the paused span, so a run parked for a day does
not time out the moment it resumes, and a deliberate pause never breaches an
SLA. A chain deadline is an absolute bound on a whole continue-as-new chain
(issue 12): it never moves, so a run paused past it times out on resume.
An SLA already breached stays breached: it was reported once, and is history.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, replace

Instant = datetime.datetime


@dataclass(frozen=True)
class RunClocks:
    timeout_at: Instant | None = None
    sla_at: Instant | None = None
    sla_breached: bool = False
    chain_deadline_at: Instant | None = None


def paused_span(paused_at: Instant, now: Instant) -> datetime.timedelta:
    """How long the run was paused; never negative (clocks of two machines)."""
    return max(now - paused_at, datetime.timedelta(0))


def shifted(instant: Instant | None, span: datetime.timedelta) -> Instant | None:
    return None if instant is None else instant + span


def resumed(clocks: RunClocks, paused_at: Instant, now: Instant) -> RunClocks:
    """The clocks after a pause from `paused_at` until `now`."""
    span = paused_span(paused_at, now)
    return replace(
        clocks,
        timeout_at=shifted(clocks.timeout_at, span),
        sla_at=clocks.sla_at if clocks.sla_breached else shifted(clocks.sla_at, span),
    )


def effective_sla_seconds(workflow_sla: int, requested: int | None, timeout_seconds: int) -> int:
    """A run's SLA in seconds (0: none): the start's `slaSeconds` when given
    (0 turns it off), else the workflow's; clamped down to the run's timeout,
    which would always fire first."""
    sla = workflow_sla if requested is None else requested
    if sla > 0 and timeout_seconds > 0:
        return min(sla, timeout_seconds)
    return max(sla, 0)


def timed_out(clocks: RunClocks, now: Instant) -> str | None:
    """Which deadline a running (not paused) run has passed, if any: the
    chain's first, since it is the harder bound."""
    if clocks.chain_deadline_at is not None and now >= clocks.chain_deadline_at:
        return "chain"
    if clocks.timeout_at is not None and now >= clocks.timeout_at:
        return "run"
    return None
