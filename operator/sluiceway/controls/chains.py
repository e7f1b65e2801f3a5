"""Continue-as-new chains and the budget of a run, in pure code.

A run's `timeoutSeconds` bounds one link and is re-anchored at each; the
chain's deadline is anchored at the chain's first run and carried verbatim
from link to link, so a loop that continues as new for ever still ends. The
operator-wide ceiling (SLUICEWAY_MAX_CHAIN_TIMEOUT) both caps a workflow's
`chainTimeoutSeconds` and is the deadline of chains whose workflow sets none,
as the reference describes."""

from __future__ import annotations

import datetime
import uuid


def chain_timeout_seconds(declared: int, ceiling: int | None) -> int:
    """The chain's budget in seconds (0: none): the workflow's, capped by the
    operator's ceiling, or the ceiling when the workflow declares none."""
    if ceiling is None or ceiling <= 0:
        return declared
    return min(declared, ceiling) if declared > 0 else ceiling


def deadline_fraction(timeout_at: datetime.datetime | None, timeout_seconds: int, now: datetime.datetime) -> float:
    """How much of its own budget (`timeoutSeconds`) the run has used, from 0
    to 1: `${workflow.deadlineFraction}`, so a loop can continue as new before
    its deadline cuts it short. Measured against the live deadline (which a
    pause moves), never the chain's. 0 for a run without a timeout, and on the
    evaluation that arms it."""
    if timeout_at is None or timeout_seconds <= 0:
        return 0.0
    left = (timeout_at - now).total_seconds()
    return min(1.0, max(0.0, 1.0 - left / timeout_seconds))


_NEXT_RUN = uuid.UUID("c0a7a5e0-c0a7-4a5e-8c0a-7a5ec0a7a5e0")


def next_run_id(run_id: str) -> str:
    """The id of the run a run continues as: the same however often its end is applied."""
    return str(uuid.uuid5(_NEXT_RUN, run_id))
