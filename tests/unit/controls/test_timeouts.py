"""Each timeout class: when it is armed and what missing it means."""

from __future__ import annotations

import datetime

import pytest

from sluiceway.controls.policy import Timeouts
from sluiceway.controls.timeouts import Deadlines, Missed, expiry, on_heartbeat, on_lease, on_ready
from sluiceway.model.execution import TaskStatus
from sluiceway.model.taskdefinition import TimeoutPolicy

T0 = datetime.datetime(2026, 11, 29, 12, 0, tzinfo=datetime.UTC)


def at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


ALL = Timeouts(
    schedule_to_start=120,
    start_to_close=60,
    timeout_seconds=300,
    heartbeat=30,
    schedule_to_close=900,
    response_timeout=3600,
)


def test_zero_arms_no_timer() -> None:
    deadlines = on_lease(Timeouts(response_timeout=3600), on_ready(Timeouts(), T0, None), at(1))
    assert deadlines == Deadlines(lease=at(3601))
    assert on_ready(Timeouts(), T0, None).earliest() is None


def test_waiting_tasks_get_only_the_total_budget() -> None:
    assert on_ready(ALL, T0, at(900), waiting=True) == Deadlines(total=at(300))


def test_lease_swaps_schedule_to_start_for_the_running_deadlines() -> None:
    queued = on_ready(ALL, T0, at(900))
    assert queued == Deadlines(schedule_to_start=at(120), total=at(300), schedule_to_close=at(900))
    running = on_lease(ALL, queued, at(10))
    assert running == Deadlines(start_to_close=at(70), total=at(300), heartbeat=at(40), lease=at(3610))
    assert on_heartbeat(ALL, running, at(35)) == Deadlines(
        start_to_close=at(70), total=at(300), heartbeat=at(65), lease=at(3635)
    )


@pytest.mark.parametrize(
    ("deadlines", "now", "missed", "status"),
    [
        (Deadlines(schedule_to_start=at(120)), at(120), Missed.SCHEDULE_TO_START, TaskStatus.TIMED_OUT),
        (Deadlines(start_to_close=at(60)), at(61), Missed.START_TO_CLOSE, TaskStatus.TIMED_OUT),
        (Deadlines(total=at(300)), at(300), Missed.TOTAL, TaskStatus.TIMED_OUT),
        (Deadlines(heartbeat=at(30)), at(31), Missed.HEARTBEAT, TaskStatus.FAILED),
        (Deadlines(lease=at(3600)), at(3600), Missed.LEASE, TaskStatus.FAILED),
        (
            Deadlines(schedule_to_close=at(900)),
            at(900),
            Missed.SCHEDULE_TO_CLOSE,
            TaskStatus.FAILED_WITH_TERMINAL_ERROR,
        ),
        (Deadlines(wait_until=at(5)), at(5), Missed.WAIT_OVER, TaskStatus.COMPLETED),
    ],
)
def test_what_each_missed_deadline_means(
    deadlines: Deadlines, now: datetime.datetime, missed: Missed, status: TaskStatus
) -> None:
    result = expiry(deadlines, ALL, now, "charge")
    assert result is not None and (result.missed, result.status) == (missed, status)
    assert expiry(deadlines, ALL, now - datetime.timedelta(seconds=1), "charge") is None or missed in (
        Missed.START_TO_CLOSE,
        Missed.HEARTBEAT,
    )


def test_schedule_to_start_names_the_starved_queue() -> None:
    result = expiry(Deadlines(schedule_to_start=at(1)), ALL, at(2), "charge")
    assert result is not None and "is anyone polling queue charge?" in result.reason


@pytest.mark.parametrize("policy", [TimeoutPolicy.TIME_OUT_WF, TimeoutPolicy.RETRY])
def test_a_lost_worker_is_a_failure_whatever_the_timeout_policy(policy: TimeoutPolicy) -> None:
    timeouts = Timeouts(heartbeat=30, timeout_seconds=0, policy=policy)
    result = expiry(Deadlines(heartbeat=at(30)), timeouts, at(31), "t")
    assert result is not None and result.status is TaskStatus.FAILED and result.reason.startswith("WorkerLost")


def test_alert_only_reports_and_disarms_just_that_deadline() -> None:
    timeouts = Timeouts(start_to_close=60, timeout_seconds=300, policy=TimeoutPolicy.ALERT_ONLY)
    deadlines = Deadlines(start_to_close=at(60), total=at(300), lease=at(3600))
    result = expiry(deadlines, timeouts, at(61), "t")
    assert result is not None and result.status is None and result.missed is Missed.START_TO_CLOSE
    assert result.deadlines == Deadlines(total=at(300), lease=at(3600))


def test_the_earliest_reason_wins_when_several_are_due() -> None:
    deadlines = Deadlines(heartbeat=at(30), start_to_close=at(10), total=at(20))
    result = expiry(deadlines, ALL, at(100), "t")
    assert result is not None and result.missed is Missed.HEARTBEAT, "a dead worker explains the rest"
