"""Runs a Schedule starts: the scheduler's passes, and a person's trigger or
backfill. A fire is one start like any other: its input is measured against
the namespace's payload limit (a fire over it is refused and recorded so),
and each run it starts, and each running run its overlap policy ends, is
audited, by the scheduler or by whoever triggered it."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from sluiceway.controls.calendar import CalendarError
from sluiceway.controls.schedules import upcoming
from sluiceway.model.common import wire_time
from sluiceway.model.schedule import UPCOMING, OverlapPolicy
from sluiceway.plane.audit import Actor, Operation
from sluiceway.plane.core import Plane
from sluiceway.plane.units import Unit, unit
from sluiceway.store import schedules
from sluiceway.store.schedules import BackfillError, Fire, PassReport, ScheduleNotFound

__all__ = [
    "SCHEDULER",
    "BackfillError",
    "Fire",
    "PassReport",
    "ScheduleNotFound",
    "backfill",
    "fire_due",
    "fire_view",
    "schedule_view",
    "trigger",
]

SCHEDULER = Actor("sluiceway scheduler", "schedule")


async def fire_due(plane: Plane, batch: int = 50) -> PassReport:
    """One pass of the scheduler over every namespace (store.schedules.fire_due)."""
    async with unit(plane, SCHEDULER) as work:
        report = await schedules.fire_due(work.conn, batch, plane.limit_of)
        _audit(work, report.fires)
    return report


async def trigger(plane: Plane, actor: Actor, namespace: str, name: str, policy: OverlapPolicy | None = None) -> Fire:
    """Fire the schedule now; ScheduleNotFound when there is none."""
    async with unit(plane, actor, namespace) as work:
        fire = await schedules.trigger(work.conn, namespace, name, policy, plane.limit_of)
        _audit(work, [fire])
    return fire


async def backfill(
    plane: Plane,
    actor: Actor,
    namespace: str,
    name: str,
    start: datetime.datetime,
    end: datetime.datetime,
    policy: OverlapPolicy | None = None,
) -> list[Fire]:
    """Fire the schedule's times in [start, end], each once; ScheduleNotFound or BackfillError."""
    async with unit(plane, actor, namespace) as work:
        fires = await schedules.backfill(work.conn, namespace, name, start, end, policy, plane.limit_of)
        _audit(work, fires)
    return fires


def _audit(work: Unit, fires: list[Fire]) -> None:
    for fire in fires:
        detail = {"schedule": fire.schedule, "fireTime": wire_time(fire.fire_at), "kind": fire.kind}
        if fire.outcome == "started" and fire.run_id is not None:
            work.changed(fire.run_id, Operation.START, detail, namespace=fire.namespace)
        for stopped in fire.stopped:
            reason = {"reason": f"replaced by a newer fire of schedule {fire.schedule}"}
            work.changed(stopped, Operation.TERMINATE, detail | reason, namespace=fire.namespace)


def fire_view(fire: Fire, time: Callable[[datetime.datetime | None], str | None] = wire_time) -> dict[str, Any]:
    """A fire as the API answers it and a Schedule's status shows it (`time`: how instants are written)."""
    view: dict[str, Any] = {"fireTime": time(fire.fire_at), "kind": fire.kind, "outcome": fire.outcome}
    if fire.run_id:
        view["runId"] = fire.run_id
    if fire.reason:
        view["reason"] = fire.reason
    return view


def schedule_view(
    state: schedules.ScheduleState,
    count: int = UPCOMING,
    time: Callable[[datetime.datetime | None], str | None] = wire_time,
) -> dict[str, Any]:
    """A schedule, its next `count` fires and its recent ones, as the API
    answers it (its `name` and `spec` too) and, with `time=kube_time`, as a
    Schedule's status shows it."""
    try:
        fires = upcoming(state.spec, state.next_fire_at, state.runs_started, count) if state.spec else []
    except CalendarError:
        fires = []
    return {
        "name": state.name,
        "spec": state.raw_spec,
        "nextFireTimes": [time(f) for f in fires],
        "lastFireTime": time(state.last_fire_at),
        "lastRunId": state.last_run_id,
        "activeRuns": state.active_runs,
        "buffered": state.buffered,
        "suspended": bool(state.spec and state.spec.suspend),
        "runsStarted": state.runs_started,
        "missed": state.missed,
        "skipped": state.skipped,
        "recent": [fire_view(f, time) for f in state.recent],
    }
