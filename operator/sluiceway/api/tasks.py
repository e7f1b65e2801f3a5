"""The task protocol workers speak: poll (long-poll, batched), results
(batched), heartbeats; and reading tasks. Every result and heartbeat carries
the lease epoch; a stale one is refused with 409 and changes nothing.

Dispatch itself is the execution plane's (`sluiceway.plane.dispatch`): a
route checks what the worker may do, calls it, and writes the answer."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Query, Response

from sluiceway.api import views
from sluiceway.api.access import Names
from sluiceway.api.errors import INVALID, ApiError, refusal
from sluiceway.api.guards import Authorize, requires
from sluiceway.api.outcomes import too_large
from sluiceway.api.params import NAMESPACE, TASK_ID, RunIdText, TaskStatusText, cursor_query, run_id_query
from sluiceway.api.services import Services, services
from sluiceway.model.common import ENGINE_NAME_PATTERN
from sluiceway.model.execution import (
    Heartbeat,
    HeartbeatBatch,
    HeartbeatBatchResponse,
    ItemOutcome,
    LogPage,
    PollRequest,
    PollResponse,
    ResultBatch,
    ResultBatchResponse,
    SingleResult,
    TaskPage,
    TaskResult,
    checked_items,
    sent_task_id,
)
from sluiceway.model.workflow import TaskType
from sluiceway.observability import tracing
from sluiceway.plane import dispatch, finding
from sluiceway.plane.dispatch import Lease, Reported
from sluiceway.plane.finding import DEFAULT_LIMIT, MAX_LIMIT, Order
from sluiceway.plane.outcomes import Verdict
from sluiceway.store import logs

# OpenAPI links from a lease to what its worker does next: clients and stateful
# API fuzzers follow them.
_FIRST_LEASE = {"namespace": "$request.path.namespace", "task_id": "$response.body#/tasks/0/taskId"}
_FENCED = {"taskId": "$response.body#/tasks/0/taskId", "epoch": "$response.body#/tasks/0/epoch"}
LEASE_LINKS = {
    "ReportResult": {
        "operationId": "report_result",
        "parameters": _FIRST_LEASE,
        "requestBody": {**_FENCED, "status": "COMPLETED"},
    },
    "Heartbeat": {"operationId": "heartbeat", "parameters": _FIRST_LEASE, "requestBody": _FENCED},
    "WhyTask": {"operationId": "why_task", "parameters": _FIRST_LEASE},
}

router = APIRouter(prefix="/v1/ns/{namespace}/tasks", tags=["workers"], responses=INVALID)

# Workers need `poll` on each task type they poll, and `update` on the task
# type of each task they report on.
MAY_POLL = Annotated[Authorize, requires("poll", "taskdefinitions", Names.REQUEST)]
MAY_REPORT = Annotated[Authorize, requires("update", "taskdefinitions", Names.REQUEST)]

# A result's verdict on the wire: its status code, and the error code of a refusal.
_STATUS = {Verdict.APPLIED: 200, Verdict.NO_SUCH_TASK: 404, Verdict.NOT_LEASED: 409}
_ERROR = {Verdict.NO_SUCH_TASK: "NOT_FOUND", Verdict.NOT_LEASED: "STALE_LEASE"}


async def _authorize_tasks(authorize: Authorize, svc: Services, namespace: str, task_ids: Iterable[str]) -> None:
    """`authorize` on the task types of these tasks of `namespace`, found with
    one query (none when authentication is off). Tasks that are not in the
    namespace need no right: the plane refuses them (404) and changes nothing."""
    if not authorize.enforced:
        return
    await authorize((await dispatch.task_types_of(svc.plane, namespace, task_ids)).values())


def _leased(lease: Lease) -> dict[str, object]:
    """The LeasedTask wire shape, built directly: polls are the hot path."""
    body: dict[str, object] = {
        "taskId": lease.task_id,
        "epoch": lease.epoch,
        "taskType": lease.task_type,
        "executionId": lease.execution_id,
        "referenceName": lease.ref,
        "attempt": lease.attempt,
        "input": lease.input,
        "responseTimeoutSeconds": lease.response_timeout,
        "heartbeatTimeoutSeconds": lease.heartbeat_timeout,
        "startToCloseTimeoutSeconds": lease.start_to_close_timeout,
    }
    if tracing.enabled():
        body["traceparent"] = tracing.traceparent(lease.execution_id, lease.task_id, lease.epoch)
    return body


def _json(body: object, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


@router.post(
    "/poll",
    response_model=PollResponse,
    response_model_by_alias=True,
    summary="Lease tasks (long poll)",
    responses={
        200: {"links": LEASE_LINKS},
        401: refusal("No valid token or API key"),
        403: refusal("The caller may not `poll` one of these task types here"),
    },
)
async def poll(
    namespace: NAMESPACE, request: PollRequest, authorize: MAY_POLL, svc: Services = Depends(services)
) -> Response:
    """Lease up to `count` tasks of the given types, within each type's gates
    (concurrentExecLimit, rate limit, semaphores: the most restrictive wins).
    When none can be leased, the request is held open up to
    `pollTimeoutSeconds` (at most the task types' own pollTimeoutSeconds) and
    answered as soon as a task becomes leasable or a gate opens."""
    await authorize(request.task_types)
    leased = await dispatch.poll(svc.plane, namespace, request)
    return _json({"tasks": [_leased(lease) for lease in leased]})


def _item_answer(raw: Any, item: TaskResult | ItemOutcome, reported: Reported) -> dict[str, object]:
    """One result's outcome, as the batch answers it."""
    if isinstance(item, ItemOutcome):
        return item.to_wire() | {"taskId": item.task_id}
    if item.task_id in reported.invalid:
        return reported.invalid[item.task_id].to_wire() | {"taskId": item.task_id}
    outcome = reported.applied[item.task_id]
    answer: dict[str, object] = {"taskId": sent_task_id(raw), "code": _STATUS[outcome.verdict]}
    if outcome.error is not None:
        answer["error"] = outcome.error
    elif item.task_id in reported.over:  # applied as a failure: say why
        answer |= {"code": 413, "error": reported.over[item.task_id].message}
    return answer


@router.post(
    "/results",
    response_model=ResultBatchResponse,
    response_model_by_alias=True,
    responses={
        207: {
            "model": ResultBatchResponse,
            "description": "Some results were refused, or failed their task for an output over the payload limit "
            "(413): see each item's code",
        },
        422: refusal("The envelope is invalid (not an object, no `results` list, more than 1000 items)"),
    },
    summary="Report results of several tasks in one request",
)
async def report_results(
    namespace: NAMESPACE,
    batch: ResultBatch,
    authorize: MAY_REPORT,
    may_poll: MAY_POLL,
    svc: Services = Depends(services),
) -> Response:
    """Each result is validated and applied on its own: one bad item never
    costs the others. 200 when every result was applied; 207 otherwise, with
    one outcome per item in the order sent: 200 applied, 404 unknown task,
    409 stale epoch or no longer leased, 422 the item is invalid (the message
    and `fields` name the field; nothing changed for it), 413 its output is
    over the namespace's payload limit: the task failed terminally with that
    reason. Only an invalid envelope refuses the whole request.

    With `next`, the same request then leases up to `next.counts` tasks per
    type (within their gates, never waiting) into `tasks`: a worker hands a
    freed slot's result in and gets the slot's next task back in one round
    trip, and a gated slot goes back to a worker at the instant it is freed."""
    if batch.next is not None:
        await may_poll(batch.next.counts)
    checked = checked_items(TaskResult, list(batch.results))
    valid = [item for item in checked if isinstance(item, TaskResult)]
    await _authorize_tasks(authorize, svc, namespace, [r.task_id for r in valid])
    reported = await dispatch.report(svc.plane, namespace, valid, batch.next)
    items = [_item_answer(raw, item, reported) for raw, item in zip(batch.results, checked, strict=True)]
    body: dict[str, object] = {"results": items}
    if batch.next is not None:
        body["tasks"] = [_leased(lease) for lease in reported.leases]
    return _json(body, 200 if all(i["code"] == 200 for i in items) else 207)


@router.post(
    "/{task_id}/result",
    summary="Report the result of one task",
    operation_id="report_result",
    responses={
        404: refusal("Unknown task"),
        409: refusal("Stale epoch or not leased"),
        413: refusal("The output is over the namespace's payload limit: the task failed terminally with that reason"),
    },
)
async def report_result(
    namespace: NAMESPACE,
    task_id: TASK_ID,
    sent: SingleResult,
    authorize: MAY_REPORT,
    svc: Services = Depends(services),
) -> dict[str, str]:
    """The path names the task; a `taskId` in the body may be left out, and
    must name the same task when it is there."""
    if sent.task_id is not None and sent.task_id != str(task_id):
        raise ApiError(
            422,
            "INVALID_REQUEST",
            f"taskId: {sent.task_id} does not match the path's {task_id}",
            fields=[{"field": "taskId", "message": "does not match the path's task id"}],
        )
    result = sent.for_task(str(task_id))
    await _authorize_tasks(authorize, svc, namespace, [result.task_id])
    reported = await dispatch.report(svc.plane, namespace, [result])
    invalid = reported.invalid.get(result.task_id)
    if invalid is not None:
        raise ApiError(422, "INVALID_REQUEST", invalid.error or "", fields=[f.to_wire() for f in invalid.fields or []])
    outcome = reported.applied[result.task_id]
    if not outcome.applied:
        raise ApiError(_STATUS[outcome.verdict], _ERROR[outcome.verdict], outcome.error or "")
    if result.task_id in reported.over:
        raise too_large(reported.over[result.task_id])
    return {"status": "accepted"}


@router.post(
    "/heartbeats",
    response_model=HeartbeatBatchResponse,
    response_model_by_alias=True,
    responses={
        207: {"model": HeartbeatBatchResponse, "description": "Some heartbeats were invalid: see `errors`"},
        422: refusal("The envelope is invalid (not an object, no `heartbeats` list, more than 1000 items)"),
    },
    summary="Renew the leases of several tasks",
)
async def heartbeats(
    namespace: NAMESPACE, batch: HeartbeatBatch, authorize: MAY_REPORT, svc: Services = Depends(services)
) -> Response:
    """`alive`: leases renewed. `gone`: tasks no longer leased under that epoch
    (completed elsewhere, timed out, canceled): stop working on them. Each
    heartbeat is validated on its own; an invalid one is listed in `errors`
    (code 422, naming the field) and the answer is 207."""
    checked = checked_items(Heartbeat, list(batch.heartbeats))
    beats = [item for item in checked if isinstance(item, Heartbeat)]
    errors = [item.to_wire() | {"taskId": item.task_id} for item in checked if isinstance(item, ItemOutcome)]
    await _authorize_tasks(authorize, svc, namespace, [b.task_id for b in beats])
    alive = await dispatch.heartbeat(svc.plane, namespace, beats)
    body = {"alive": sorted(alive), "gone": sorted({b.task_id for b in beats} - alive), "errors": errors}
    return _json(body, 207 if errors else 200)


@router.post(
    "/{task_id}/heartbeat",
    summary="Renew one lease",
    operation_id="heartbeat",
    responses={409: refusal("No longer leased under this epoch: stop working on it")},
)
async def heartbeat(
    namespace: NAMESPACE, task_id: TASK_ID, beat: Heartbeat, authorize: MAY_REPORT, svc: Services = Depends(services)
) -> dict[str, str]:
    """The body's `epoch` fences the lease; its `taskId` is ignored: the path names the task."""
    await _authorize_tasks(authorize, svc, namespace, [str(task_id)])
    alive = await dispatch.heartbeat(svc.plane, namespace, [beat.model_copy(update={"task_id": str(task_id)})])
    if str(task_id) not in alive:
        raise ApiError(409, "STALE_LEASE", f"task {task_id} is not leased under epoch {beat.epoch}")
    return {"status": "alive"}


# -- reading tasks -----------------------------------------------------------------


@router.get(
    "",
    response_model=TaskPage,
    response_model_by_alias=True,
    summary="List tasks, newest first: ?type=HUMAN&status=IN_PROGRESS&order=oldest is the HUMAN inbox",
    operation_id="list_tasks",
    dependencies=[requires("list", "workflowruns")],
)
async def list_tasks(
    namespace: NAMESPACE,
    status: Annotated[list[TaskStatusText] | None, Query(description="Repeat or comma-separate")] = None,
    task_type: Annotated[str | None, Query(alias="taskType", pattern=ENGINE_NAME_PATTERN, max_length=253)] = None,
    worker_id: Annotated[str | None, Query(alias="workerId", min_length=1, max_length=256)] = None,
    execution_id: Annotated[RunIdText | None, run_id_query("executionId", "Tasks of this run")] = None,
    reference_name: Annotated[str | None, Query(alias="referenceName", max_length=140)] = None,
    type: Annotated[TaskType | None, Query(description="The engine's task type: HUMAN, SIMPLE, HTTP, ...")] = None,
    workflow: Annotated[
        str | None, Query(pattern=ENGINE_NAME_PATTERN, max_length=253, description="Of runs of this workflow")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, cursor_query(512)] = None,
    order: Order = Order.NEWEST,
    svc: Services = Depends(services),
) -> TaskPage:
    """Every attempt of every task, filtered (AND) and paged as runs are.
    The HUMAN inbox is `type=HUMAN&status=IN_PROGRESS` (`order=oldest`: the
    longest waiting first); each item carries the task's input."""
    query = finding.TaskQuery(
        status=status or (),
        task_type=task_type,
        worker_id=worker_id,
        execution_id=execution_id,
        reference_name=reference_name,
        type=type.value if type is not None else None,
        workflow=workflow,
    )
    page = await finding.find_tasks(svc.plane, namespace, query, limit=limit, cursor=cursor, order=order)
    return views.task_page(page, order)


@router.get(
    "/{task_id}/logs",
    response_model=LogPage,
    response_model_by_alias=True,
    summary="What one task attempt logged",
    operation_id="task_logs",
    responses={404: refusal("No such task in this namespace")},
    dependencies=[requires("get", "workflowruns")],
)
async def task_logs(
    namespace: NAMESPACE,
    task_id: TASK_ID,
    after: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
    svc: Services = Depends(services),
) -> LogPage:
    async with svc.pool.acquire() as conn:
        run = await logs.run_of_task(conn, namespace, task_id)
        if run is None:
            raise ApiError(404, "NOT_FOUND", f"no task {task_id} in namespace {namespace}")
        found = await logs.read(conn, run, after=after, limit=limit, task_id=task_id, cap=svc.plane.log_cap_bytes)
    return views.log_page(found, after)
