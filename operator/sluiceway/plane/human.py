"""A person's decision on a HUMAN task, from the REST API or the web UI:
complete it with an output, or reject it (it fails terminally with the
person's reason). Both are limited by the namespace's payload limit,
recorded with who decided on the task (`completedBy`) and in the run's
audit trail, and wake the run."""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Any

from sluiceway.controls.payloads import Oversized, oversized_value
from sluiceway.model.workflow import TaskType
from sluiceway.observability import metrics
from sluiceway.plane.audit import Actor, Operation
from sluiceway.plane.core import Plane
from sluiceway.plane.units import unit
from sluiceway.store import human
from sluiceway.store.human import WaitingTask
from sluiceway.store.operations import Refusal, Refused

__all__ = ["Decision", "WaitingTask", "decide", "human_task"]

MAX_REASON_CHARS = 4096


class Decision(StrEnum):
    COMPLETE = "complete"
    REJECT = "reject"


async def human_task(plane: Plane, namespace: str, task_id: str) -> WaitingTask | Refused:
    """The HUMAN task of `namespace`, or why there is none to decide on."""
    try:
        key = uuid.UUID(task_id)
    except ValueError:
        return Refused(Refusal.NOT_FOUND, f"{task_id[:64]!r} is not a task id")
    async with plane.pool.acquire() as conn:
        task = await human.find(conn, namespace, key)
    if task is None:
        return Refused(Refusal.NOT_FOUND, f"no task {key} in namespace {namespace}")
    if task.type != TaskType.HUMAN.value:
        return Refused(Refusal.NOT_A_HUMAN_TASK, f"task {key} is a {task.type} task, not HUMAN")
    return task


async def decide(
    plane: Plane,
    actor: Actor,
    namespace: str,
    task: WaitingTask,
    decision: Decision,
    output: dict[str, Any],
    reason: str = "",
) -> WaitingTask | Refused | Oversized:
    """Record the person's decision on `task` (found by `human_task`): the
    task as it is now, or why the decision was not taken (it no longer
    waits, or the output is over the payload limit: the task keeps waiting)."""
    too_large = oversized_value("output", output, await plane.limit_of(namespace))
    if too_large is not None:
        return too_large
    if decision is Decision.COMPLETE:
        status, why, operation = "COMPLETED", "", Operation.COMPLETE
    else:
        status, why, operation = "FAILED_WITH_TERMINAL_ERROR", f"rejected by {actor.user}: {reason}", Operation.REJECT
    key = uuid.UUID(task.id)
    async with unit(plane, actor, namespace) as work:
        settled = await human.settle(work.conn, namespace, key, status, output, why[:MAX_REASON_CHARS], actor.user)
        after = await human.find(work.conn, namespace, key)
        if settled:
            work.changed(task.execution_id, operation, {"taskId": task.id, "taskReferenceName": task.ref})
    if not settled or after is None:
        return Refused(Refusal.NOT_WAITING, f"task {task.id} is {task.status}: it no longer waits for a person")
    metrics.HUMAN_DECISIONS.labels(status).inc()
    return after
