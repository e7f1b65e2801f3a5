"""HUMAN tasks: a person's decision on one, recorded with who made it (the
authenticated identity). The inbox of tasks waiting for a person is the
general task list (`api.tasks`): `GET .../tasks?type=HUMAN&status=IN_PROGRESS`.

Deciding is authorized by RBAC as `update` on `workflowruns` named by the
task's workflow: a Role may let the finance team decide the tasks of
`refund_approval` runs and nothing else (a Role without resourceNames lets
its holder decide any)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Request

from sluiceway.api.access import Names, Rule
from sluiceway.api.actors import actor_of
from sluiceway.api.errors import INVALID, refusal
from sluiceway.api.guards import Authorize, requires
from sluiceway.api.outcomes import error_of
from sluiceway.api.params import NAMESPACE, TASK_ID
from sluiceway.api.services import Services, services
from sluiceway.model.common import wire_time
from sluiceway.model.execution import (
    HumanCompletion,
    HumanRejection,
    WaitingTaskView,
)
from sluiceway.plane import human
from sluiceway.plane.human import Decision

router = APIRouter(prefix="/v1/ns/{namespace}/tasks", tags=["human tasks"], responses=INVALID)

# Deciding needs `update` on the runs of the task's workflow (its name, from the stored task).
MAY_DECIDE = Annotated[Authorize, requires("update", "workflowruns", Names.REQUEST)]
# What one must hold to be told that a task does not exist or is not a HUMAN task:
# the right to read the namespace's runs, which would show it anyway.
MAY_READ_RUNS = Rule("get", "workflowruns")


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
        scheduled_at=wire_time(task.created_at) or "",
        ended_at=wire_time(task.ended_at),
        completed_by=task.completed_by,
    )


async def _decide(
    request: Request,
    svc: Services,
    authorize: Authorize,
    namespace: str,
    task_id: uuid.UUID,
    decision: Decision,
    body: HumanCompletion | HumanRejection,
) -> WaitingTaskView:
    """The person's decision on a waiting HUMAN task, as the caller. Why there
    is no such task to decide is told only to a caller who may read the
    namespace's runs: to anyone else (403) it would tell which task ids exist
    in a namespace they hold no right in, and of what kind."""
    task = await human.human_task(svc.plane, namespace, str(task_id))
    if not isinstance(task, human.WaitingTask):
        await Authorize(MAY_READ_RUNS, request)()
        raise error_of(task)
    await authorize([task.workflow_name])
    reason = body.reason if isinstance(body, HumanRejection) else ""
    outcome = await human.decide(svc.plane, actor_of(request), namespace, task, decision, body.output, reason)
    if not isinstance(outcome, human.WaitingTask):
        raise error_of(outcome)
    return _view(outcome)


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
    return await _decide(request, svc, authorize, namespace, task_id, Decision.COMPLETE, body)


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
    return await _decide(request, svc, authorize, namespace, task_id, Decision.REJECT, body)
