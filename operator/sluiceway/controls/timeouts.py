"""The timeout classes: when each deadline of one attempt falls due, and what
a missed one means.

| deadline                 | armed                     | missed means                         |
| ------------------------ | ------------------------- | ------------------------------------ |
| scheduleToStartTimeout   | when ready to lease       | nobody polls the queue: TIMED_OUT    |
| startToCloseTimeout      | at lease                  | a slow or wedged worker: TIMED_OUT   |
| timeoutSeconds           | when ready to lease       | the attempt's whole budget: TIMED_OUT|
| heartbeatTimeout         | at lease, at each beat    | the worker is gone: FAILED, retried  |
| responseTimeoutSeconds   | at lease, at each beat    | the lease expired: FAILED, retried   |
| scheduleToCloseTimeout   | at the first attempt      | queued past it: DeadlineExceeded     |

A policy of 0 arms no timer. Waiting tasks (WAIT) are never dispatched, so only
timeoutSeconds applies to them. A lost worker is not a missed deadline of the
work: the attempt is spent and the retry policy decides (the crash accounting of
the TaskQ reference), whatever timeoutPolicy says. Under ALERT_ONLY a timeout is
reported and the deadline disarmed; the task keeps running.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, replace
from enum import StrEnum

from sluiceway.controls.policy import Timeouts
from sluiceway.model.execution import TaskStatus
from sluiceway.model.taskdefinition import TimeoutPolicy

Instant = datetime.datetime


def _after(start: Instant, seconds: int | float) -> Instant | None:
    return start + datetime.timedelta(seconds=seconds) if seconds > 0 else None


@dataclass(frozen=True)
class Deadlines:
    schedule_to_start: Instant | None = None
    start_to_close: Instant | None = None
    total: Instant | None = None  # timeoutSeconds
    heartbeat: Instant | None = None
    lease: Instant | None = None
    schedule_to_close: Instant | None = None
    wait_until: Instant | None = None  # WAIT tasks: not a failure, the wait is over

    def earliest(self) -> Instant | None:
        due = [
            d
            for d in (
                self.schedule_to_start,
                self.start_to_close,
                self.total,
                self.heartbeat,
                self.lease,
                self.schedule_to_close,
                self.wait_until,
            )
            if d is not None
        ]
        return min(due) if due else None


def on_ready(
    timeouts: Timeouts, ready_at: Instant, schedule_to_close_at: Instant | None, waiting: bool = False
) -> Deadlines:
    """Deadlines of an attempt that becomes leasable at `ready_at` (a retry's
    backoff or a snooze does not count against scheduleToStart)."""
    if waiting:
        return Deadlines(total=_after(ready_at, timeouts.timeout_seconds))
    return Deadlines(
        schedule_to_start=_after(ready_at, timeouts.schedule_to_start),
        total=_after(ready_at, timeouts.timeout_seconds),
        schedule_to_close=schedule_to_close_at,
    )


def first_schedule_to_close(timeouts: Timeouts, first_scheduled_at: Instant) -> Instant | None:
    return _after(first_scheduled_at, timeouts.schedule_to_close)


def on_lease(timeouts: Timeouts, queued: Deadlines, leased_at: Instant) -> Deadlines:
    """A running attempt is never killed by scheduleToClose: that deadline only
    arbitrates future dispatches."""
    return Deadlines(
        start_to_close=_after(leased_at, timeouts.start_to_close),
        total=queued.total,
        heartbeat=_after(leased_at, timeouts.heartbeat),
        lease=_after(leased_at, timeouts.response_timeout),
        schedule_to_close=None,
    )


def on_heartbeat(timeouts: Timeouts, running: Deadlines, beat_at: Instant) -> Deadlines:
    return replace(
        running, heartbeat=_after(beat_at, timeouts.heartbeat), lease=_after(beat_at, timeouts.response_timeout)
    )


class Missed(StrEnum):
    SCHEDULE_TO_START = "scheduleToStartTimeout"
    START_TO_CLOSE = "startToCloseTimeout"
    TOTAL = "timeoutSeconds"
    HEARTBEAT = "heartbeatTimeout"
    LEASE = "responseTimeoutSeconds"
    SCHEDULE_TO_CLOSE = "scheduleToCloseTimeout"
    WAIT_OVER = "waitOver"


@dataclass(frozen=True)
class Expiry:
    missed: Missed
    status: TaskStatus | None  # None: ALERT_ONLY, the task keeps its status
    reason: str
    deadlines: Deadlines  # what stays armed afterwards


def _message(missed: Missed, timeouts: Timeouts, task_type: str) -> str:
    return {
        Missed.SCHEDULE_TO_START: f"scheduleToStartTimeout: not leased within {timeouts.schedule_to_start} s;"
        f" is anyone polling queue {task_type}?",
        Missed.START_TO_CLOSE: f"startToCloseTimeout: not finished within {timeouts.start_to_close} s of its lease",
        Missed.TOTAL: f"timeoutSeconds: not finished within {timeouts.timeout_seconds} s of being scheduled",
        Missed.HEARTBEAT: f"WorkerLost: no heartbeat within heartbeatTimeout {timeouts.heartbeat} s",
        Missed.LEASE: f"WorkerLost: lease expired after responseTimeoutSeconds {timeouts.response_timeout} s",
        Missed.SCHEDULE_TO_CLOSE: "DeadlineExceeded: scheduleToCloseTimeout reached before the next dispatch",
        Missed.WAIT_OVER: "wait is over",
    }[missed]


_ORDER = (  # the first of these that is due wins when several are
    Missed.WAIT_OVER,
    Missed.SCHEDULE_TO_CLOSE,
    Missed.HEARTBEAT,
    Missed.LEASE,
    Missed.START_TO_CLOSE,
    Missed.SCHEDULE_TO_START,
    Missed.TOTAL,
)


def _deadline_of(deadlines: Deadlines, missed: Missed) -> Instant | None:
    return {
        Missed.SCHEDULE_TO_START: deadlines.schedule_to_start,
        Missed.START_TO_CLOSE: deadlines.start_to_close,
        Missed.TOTAL: deadlines.total,
        Missed.HEARTBEAT: deadlines.heartbeat,
        Missed.LEASE: deadlines.lease,
        Missed.SCHEDULE_TO_CLOSE: deadlines.schedule_to_close,
        Missed.WAIT_OVER: deadlines.wait_until,
    }[missed]


_FIELD = {
    Missed.SCHEDULE_TO_START: "schedule_to_start",
    Missed.START_TO_CLOSE: "start_to_close",
    Missed.TOTAL: "total",
    Missed.HEARTBEAT: "heartbeat",
    Missed.LEASE: "lease",
    Missed.SCHEDULE_TO_CLOSE: "schedule_to_close",
    Missed.WAIT_OVER: "wait_until",
}


def expiry(deadlines: Deadlines, timeouts: Timeouts, now: Instant, task_type: str) -> Expiry | None:
    """What the earliest missed deadline means, or None if nothing is due."""
    due = [m for m in _ORDER if (d := _deadline_of(deadlines, m)) is not None and d <= now]
    if not due:
        return None
    missed = due[0]
    reason = _message(missed, timeouts, task_type)
    if missed is Missed.WAIT_OVER:
        return Expiry(missed, TaskStatus.COMPLETED, reason, Deadlines())
    if missed is Missed.SCHEDULE_TO_CLOSE:
        return Expiry(missed, TaskStatus.FAILED_WITH_TERMINAL_ERROR, reason, Deadlines())
    if missed in (Missed.HEARTBEAT, Missed.LEASE):
        return Expiry(missed, TaskStatus.FAILED, reason, Deadlines())
    if timeouts.policy is TimeoutPolicy.ALERT_ONLY:
        # Report it and disarm that one deadline; everything else stays armed.
        return Expiry(missed, None, reason, replace(deadlines, **{_FIELD[missed]: None}))
    return Expiry(missed, TaskStatus.TIMED_OUT, reason, Deadlines())
