"""Schedules: store a Schedule (refused over the namespace's maxSchedules),
report its next fires, its runs and its counters in `status`, and post Events
for the fires a scheduler skipped, missed or caught up.

The scheduler itself runs on every replica (runtime.loops.run_scheduler);
these handlers only keep the `schedules` rows in step with the objects."""

from __future__ import annotations

from typing import Any

import kopf

from sluiceway.controls.advice import Kind
from sluiceway.controls.calendar import CalendarError
from sluiceway.controls.schedules import calendar_of
from sluiceway.k8s.events import EventRecorder
from sluiceway.k8s.reconciling import (
    Lifecycle,
    changed,
    context_of,
    parse,
    register_lifecycles,
    report_advice,
    retrying_outages,
    set_ready,
)
from sluiceway.model.common import identity_of, kube_time
from sluiceway.model.resources import SCHEDULE
from sluiceway.model.schedule import UPCOMING, ScheduleSpec
from sluiceway.plane.schedules import schedule_view
from sluiceway.store import schedules

QUOTA_RETRY_SECONDS = 30  # a refused Schedule is tried again: a slot frees when another one is deleted


async def reconcile_schedule(
    body: kopf.Body, meta: kopf.Meta, namespace: str, name: str, uid: str, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    context = context_of(memo)
    parsed = parse(ScheduleSpec, body, patch, context)
    if parsed is None:
        return
    try:
        calendar_of(parsed)
    except CalendarError as error:
        set_ready(patch, body, context, False, "InvalidSpec", str(error))
        return

    async def store() -> None:
        async with context.pool.acquire() as conn:
            # A restored Schedule keeps its row and fire history (docs/backup.md).
            known_as = identity_of(meta, uid)
            refused = await schedules.upsert_schedule(conn, namespace, name, known_as, int(meta["generation"]), parsed)
        if refused is not None:
            patch.status["refusal"] = {"error": refused.code, **refused.details()}
            set_ready(patch, body, context, False, "QuotaExceeded", refused.message)
            raise kopf.TemporaryError(refused.message, delay=QUOTA_RETRY_SECONDS)
        patch.status["refusal"] = None
        patch.status["suspended"] = parsed.suspend
        what = f"starts runs of workflow {parsed.workflow}"
        set_ready(patch, body, context, True, "Scheduled", what + (" (suspended)" if parsed.suspend else ""))
        report_advice(patch, body, context, Kind.SCHEDULE, parsed)

    await retrying_outages(store())


async def delete_schedule(namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    async def remove() -> None:
        async with context_of(memo).pool.acquire() as conn:
            await schedules.delete_schedule(conn, namespace, name)

    await retrying_outages(remove())


async def report_schedule(
    status: kopf.Status, namespace: str, name: str, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    async with context_of(memo).pool.acquire() as conn:
        found = await schedules.states(conn, namespace, name)
    if not found:
        return  # refused or not stored yet
    shown = schedule_view(found[0], UPCOMING, kube_time)
    changed(patch, status, {key: value for key, value in shown.items() if key not in ("name", "spec")})


LIFECYCLES = (Lifecycle(SCHEDULE, reconcile_schedule, delete_schedule),)


def register_schedules(registry: kopf.OperatorRegistry) -> None:
    register_lifecycles(registry, LIFECYCLES)


def post_events(recorder: EventRecorder, report: schedules.PassReport) -> None:
    """Events for what a scheduler pass did that people should see: fires
    skipped by the overlap policy, fires missed, and catch-ups."""
    caught_up: dict[tuple[str, str, str], int] = {}
    for fire in report.fires:
        key = (fire.namespace, fire.schedule, fire.uid)
        if fire.outcome == "skipped":
            recorder.record(
                SCHEDULE.kind,
                fire.namespace,
                fire.schedule,
                fire.uid,
                True,
                "FireSkipped",
                f"the fire of {kube_time(fire.fire_at)} was skipped: {fire.reason}",
            )
        elif fire.outcome == "refused":
            recorder.record(
                SCHEDULE.kind,
                fire.namespace,
                fire.schedule,
                fire.uid,
                True,
                "FireRefused",
                f"the fire of {kube_time(fire.fire_at)} started no run: {fire.reason}",
            )
        if fire.kind == "catchup" and fire.outcome != "duplicate":
            caught_up[key] = caught_up.get(key, 0) + 1
    for (namespace, name, uid), count in caught_up.items():
        recorder.record(
            SCHEDULE.kind, namespace, name, uid, False, "CaughtUp", f"{count} late fires handled after an outage"
        )
    for missed in report.missed:
        recorder.record(
            SCHEDULE.kind,
            missed.namespace,
            missed.schedule,
            missed.uid,
            True,
            "FiresMissed",
            f"{missed.count} fires from {kube_time(missed.since)} to {kube_time(missed.until)} were older than the "
            "catch-up window and were skipped",
        )
