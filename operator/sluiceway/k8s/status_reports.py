"""Periodic, change-only status: what each object governs, right now (a
queue's depth and pollers, a semaphore's holders, a quota's usage, a
workflow's active runs, a schedule's next fires, what a trigger did with its
events). Every `SLUICEWAY_STATUS_INTERVAL` seconds."""

from __future__ import annotations

from typing import Any

import kopf

from sluiceway.k8s.reconciling import STATUS_INTERVAL, Handler, changed, context_of, every
from sluiceway.k8s.schedules import report_schedule
from sluiceway.model.common import kube_time
from sluiceway.model.resources import QUOTA, SCHEDULE, SEMAPHORE, TASK_DEFINITION, TRIGGER, WORKFLOW, ResourceKind
from sluiceway.model.trigger import COUNTED_OUTCOMES
from sluiceway.store import diagnostics, events

__all__ = ["REPORTS", "STATUS_INTERVAL", "register_status_reports", "trigger_status"]
INITIAL_DELAY = 1.0


async def report_task_definition(
    status: kopf.Status, namespace: str, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    task_type = status.get("taskType")
    if not task_type:
        return
    async with context_of(memo).pool.acquire() as conn:
        found = await diagnostics.queues(conn, namespace, task_type)
        pollers = [(w, at) for q, w, at in await diagnostics.workers(conn, namespace) if q == task_type]
    queue = found[0] if found else diagnostics.Queue(task_type, 0, 0, 0, 0, None)
    recent = sorted(pollers, key=lambda p: p[1], reverse=True)[:10]
    changed(
        patch,
        status,
        {
            "ready": queue.ready,
            "inFlight": queue.in_flight,
            "delayed": queue.delayed,
            "pollers": [{"workerId": w, "lastPollTime": kube_time(at)} for w, at in recent],
        },
    )


async def report_semaphore(status: kopf.Status, namespace: str, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    name = status.get("semaphoreName")
    if not name:
        return
    async with context_of(memo).pool.acquire() as conn:
        found = await diagnostics.semaphores(conn, namespace, name)
        holders = await diagnostics.holders(conn, namespace, name, 10)
    if not found:
        return
    changed(
        patch,
        status,
        {
            "permits": found[0].permits,
            "held": found[0].held,
            "holders": [
                {
                    "taskId": h.task_id,
                    "executionId": h.execution_id,
                    "taskType": h.task_type,
                    "since": kube_time(h.since),
                }
                for h in holders
            ],
        },
    )


async def report_quota(status: kopf.Status, namespace: str, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    async with context_of(memo).pool.acquire() as conn:
        used = await diagnostics.usage(conn, namespace)
    changed(
        patch,
        status,
        {
            "used": {
                "concurrentExecutions": used.concurrent_executions,
                "executionsThisMinute": used.executions_this_minute,
                "workflowDefinitions": used.workflow_definitions,
                "schedules": used.schedules,
            }
        },
    )


async def report_workflow(status: kopf.Status, namespace: str, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    name = status.get("workflowName")
    if not name:
        return
    async with context_of(memo).pool.acquire() as conn:
        active = await diagnostics.active_runs(conn, namespace, name)
    changed(patch, status, {"activeRuns": active})


async def report_trigger(
    status: kopf.Status, namespace: str, name: str, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    """What the Trigger did with the newest events of its name. Every Trigger
    of the namespace reads the same sums, made once per status interval."""
    if not status.get("event"):
        return  # not stored yet (or refused): it has judged nothing
    context = context_of(memo)

    async def read() -> dict[str, events.TriggerActivity]:
        async with context.pool.acquire() as conn:
            return await events.activity(conn, namespace)

    found = await context.shared.read("trigger-activity", namespace, context.status_interval, read)
    changed(patch, status, trigger_status(found.get(name)))


def trigger_status(activity: events.TriggerActivity | None) -> dict[str, Any]:
    """A Trigger's status fields for its activity: every count, 0 when it had
    none. `lastRunId` only when one of the events read started a run: an older
    run is still the newest it started, so the one in status stays."""
    found = activity or events.TriggerActivity()
    values: dict[str, Any] = {
        "lastEventTime": kube_time(found.last_event_at) if found.last_event_at else None,
        "recent": {"events": found.events, **{outcome: found.counts.get(outcome, 0) for outcome in COUNTED_OUTCOMES}},
    }
    if found.last_run_id is not None:
        values["lastRunId"] = found.last_run_id
    return values


REPORTS: tuple[tuple[ResourceKind, Handler], ...] = (
    (TASK_DEFINITION, report_task_definition),
    (SEMAPHORE, report_semaphore),
    (QUOTA, report_quota),
    (WORKFLOW, report_workflow),
    (SCHEDULE, report_schedule),
    (TRIGGER, report_trigger),
)


def register_status_reports(registry: kopf.OperatorRegistry, interval: float = STATUS_INTERVAL) -> None:
    for kind, report in REPORTS:
        every(registry, kind, report, interval=interval, initial_delay=min(INITIAL_DELAY, interval))
