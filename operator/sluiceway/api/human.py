"""HUMAN tasks: a person's decision on one, recorded with who made it (the
authenticated identity). The inbox of tasks waiting for a person is the
general task list (`api.tasks`): `GET .../tasks?type=HUMAN&status=IN_PROGRESS`.

Deciding is authorized by RBAC as `update` on `workflowruns` named by the
task's workflow: a Role may let the finance team decide the tasks of
`refund_approval` runs and nothing else (a Role without resourceNames lets
its holder decide any)."""

from __future__ import annotations

import datetime
import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Request

from sluiceway.api.access import Names, Rule
from sluiceway.api.audit import announce, audited
from sluiceway.api.errors import INVALID, ApiError, refusal
from sluiceway.api.guards import Authorize, identity_of, requires
from sluiceway.api.params import NAMESPACE, TASK_ID
from sluiceway.api.payloads import check_payload
from sluiceway.api.services import Services, services, services_of
from sluiceway.model.execution import (
    HumanCompletion,
    HumanRejection,
    WaitingTaskView,
)
from sluiceway.model.workflow import TaskType
from sluiceway.observability import metrics
from sluiceway.store import human

router = APIRouter(prefix="/v1/ns/{namespace}/tasks", tags=["human tasks"], responses=INVALID)

# Deciding needs `update` on the runs of the task's workflow (its name, from the stored task).
MAY_DECIDE = Annotated[Authorize, requires("update", "workflowruns", Names.REQUEST)]
# What one must hold to be told that a task does not exist or is not a HUMAN task:
# the right to read the namespace's runs, which would show it anyway.
MAY_READ_RUNS = Rule("get", "workflowruns")
_ANONYMOUS = "anonymous (authentication is off)"


def _time(value: datetime.datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def _view(task: human.WaitingTask) -> WaitingTaskView:
    return WaitingTaskView(
        task_id=task.id,
        execution_id=task.execution_id,
        workflow_name=task.workflow_name,
        reference_name=task.ref,
        type=task.type,
        task_type=task.name,
        status=task.status,
        attempt=task.attempt,
        input=task.input,
        output=task.output,
        reason=task.reason,
        scheduled_at=_time(task.created_at) or "",
        ended_at=_time(task.ended_at),
        completed_by=task.completed_by,
    )


async def _waiting_human(request: Request, svc: Services, namespace: str, task_id: uuid.UUID) -> human.WaitingTask:
    """The HUMAN task, or 404 or 409 saying why not, but only to a caller who
    may read the namespace's runs: to anyone else (403) those answers would
    tell which task ids exist in a namespace they hold no right in, and of
    what kind."""
    async with svc.pool.acquire() as conn:
        task = await human.find(conn, namespace, task_id)
    if task is None or task.type != TaskType.HUMAN.value:
        await Authorize(MAY_READ_RUNS, request)()
    if task is None:
        raise ApiError(404, "NOT_FOUND", f"no task {task_id} in namespace {namespace}")
    if task.type != TaskType.HUMAN.value:
        raise ApiError(409, "NOT_A_HUMAN_TASK", f"task {task_id} is a {task.type} task, not HUMAN")
    return task


def _who(request: Request) -> str:
    return identity_of(request).user if services_of(request).authenticate else _ANONYMOUS


async def _settle(
    request: Request,
    svc: Services,
    authorize: Authorize,
    namespace: str,
    task_id: uuid.UUID,
    decision: tuple[str, dict[str, object], str],
) -> WaitingTaskView:
    """Record (status, output, reason) on a waiting HUMAN task, as the caller."""
    task = await _waiting_human(request, svc, namespace, task_id)
    await authorize([task.workflow_name])
    status, output, reason = decision
    await check_payload(svc, namespace, "output", output)
    async with svc.pool.acquire() as conn, conn.transaction():
        settled = await human.settle(conn, namespace, task_id, status, output, reason, _who(request))
        after = await human.find(conn, namespace, task_id)
        event = None
        if settled:
            operation = "complete" if status == "COMPLETED" else "reject"
            detail = {"taskId": str(task_id), "taskReferenceName": task.ref}
            event = await audited(conn, request, namespace, task.execution_id, operation, detail)
    announce(request, event)
    if not settled or after is None:
        raise ApiError(409, "NOT_WAITING", f"task {task_id} is {task.status}: it no longer waits for a person")
    metrics.HUMAN_DECISIONS.labels(status).inc()
    return _view(after)


_DECISION_RESPONSES: dict[int | str, dict[str, object]] = {
    403: refusal(
        "The caller may not `update` workflowruns named by the task's workflow (or, for a task that is not "
        "a HUMAN task of this namespace, may not `get` its workflowruns)"
    ),
    404: refusal("No such task in this namespace"),
    409: refusal("Not a HUMAN task, or it no longer waits (decided, timed out, canceled)"),
    413: refusal("The output is larger than the namespace's payload limit: {field, size, limit}"),
}


@router.post(
    "/{task_id}/complete",
    response_model=WaitingTaskView,
    response_model_by_alias=True,
    summary="Complete a HUMAN task with the person's output",
    responses=_DECISION_RESPONSES,
)
async def complete(
    namespace: NAMESPACE,
    task_id: TASK_ID,
    body: HumanCompletion,
    request: Request,
    authorize: MAY_DECIDE,
    svc: Services = Depends(services),
) -> WaitingTaskView:
    return await _settle(request, svc, authorize, namespace, task_id, ("COMPLETED", body.output, ""))


@router.post(
    "/{task_id}/reject",
    response_model=WaitingTaskView,
    response_model_by_alias=True,
    summary="Reject a HUMAN task: it fails terminally with the person's reason",
    responses=_DECISION_RESPONSES,
)
async def reject(
    namespace: NAMESPACE,
    task_id: TASK_ID,
    body: HumanRejection,
    request: Request,
    authorize: MAY_DECIDE,
    svc: Services = Depends(services),
) -> WaitingTaskView:
    reason = f"rejected by {_who(request)}: {body.reason}"
    return await _settle(
        request, svc, authorize, namespace, task_id, ("FAILED_WITH_TERMINAL_ERROR", body.output, reason)
    )
