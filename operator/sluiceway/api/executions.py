"""Runs: start, read, force an evaluation, terminate."""

from __future__ import annotations

import datetime

import orjson
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from sluiceway.api.errors import INVALID, ApiError, refusal
from sluiceway.api.guards import requires
from sluiceway.api.params import EXECUTION_ID, NAMESPACE
from sluiceway.api.services import Services, services
from sluiceway.model.common import unstorable
from sluiceway.model.execution import (
    MAX_MESSAGE_BYTES,
    MAX_QUEUED_MESSAGES,
    ExecutionView,
    StartRequest,
    StartResponse,
    TaskView,
    TerminateRequest,
)
from sluiceway.observability import metrics
from sluiceway.store import admission, executions, messages

router = APIRouter(prefix="/v1/ns/{namespace}/executions", tags=["executions"], responses=INVALID)


# OpenAPI links from a started run to what can be done with it: clients and
# stateful API fuzzers follow them.
RUN_ID = {"namespace": "$request.path.namespace", "execution_id": "$response.body#/id"}
RUN_LINKS = {
    "GetRun": "get_run",
    "ForceDecide": "force_decide",
    "TerminateRun": "terminate_run",
    "WhyRun": "why_run",
}


def _time(value: datetime.datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


# A quota is a rate the caller may retry later (429); a workflow's own cap is a conflict (409).
_REFUSED_STATUS = {admission.QuotaExceeded: 429, admission.LimitExceeded: 409}


def start_error(
    outcome: executions.Refused | executions.WorkflowNotFound | executions.InvalidOverrides,
) -> ApiError:
    if isinstance(outcome, executions.WorkflowNotFound):
        return ApiError(404, "WORKFLOW_NOT_FOUND", outcome.message)
    if isinstance(outcome, executions.InvalidOverrides):
        return ApiError(
            422,
            "INVALID_REQUEST",
            f"{outcome.field}: {outcome.message}",
            fields=[{"field": outcome.field, "message": outcome.message}],
        )
    return ApiError(
        _REFUSED_STATUS[type(outcome)], outcome.code, outcome.message, control=outcome.control, **outcome.details()
    )


@router.post(
    "",
    status_code=201,
    response_model=StartResponse,
    response_model_by_alias=True,
    responses={
        201: {"links": {link: {"operationId": op, "parameters": RUN_ID} for link, op in RUN_LINKS.items()}},
        404: refusal("No such workflow"),
        409: refusal("LIMIT_EXCEEDED: maxConcurrentExecutions"),
        429: refusal("A namespace quota: {quota, limit, current, retryAfterSeconds}"),
    },
    summary="Start a run",
    dependencies=[requires("create", "workflowruns")],
)
async def start(namespace: NAMESPACE, request: StartRequest, svc: Services = Depends(services)) -> StartResponse:
    async with svc.pool.acquire() as conn, conn.transaction():
        outcome = await executions.start_run(
            conn,
            namespace,
            request.name,
            request.version,
            request.input,
            correlation_id=request.correlation_id,
            task_overrides=request.task_overrides,
        )
    if not isinstance(outcome, executions.Started):
        raise start_error(outcome)
    return StartResponse(id=outcome.id, status=outcome.status, awaiting_admission=outcome.awaiting_admission)


@router.get(
    "/{execution_id}",
    response_model=ExecutionView,
    response_model_by_alias=True,
    responses={404: refusal("No such run in this namespace")},
    summary="Read a run and its tasks",
    operation_id="get_run",
    dependencies=[requires("get", "workflowruns")],
)
async def get(
    namespace: NAMESPACE, execution_id: EXECUTION_ID, include_tasks: bool = True, svc: Services = Depends(services)
) -> ExecutionView:
    async with svc.pool.acquire() as conn:
        run = await executions.get_run(conn, namespace, str(execution_id))
        if run is None:
            raise ApiError(404, "NOT_FOUND", f"no run {execution_id} in namespace {namespace}")
        tasks = await executions.get_tasks(conn, run.id) if include_tasks else []
    return ExecutionView(
        id=run.id,
        namespace=run.namespace,
        workflow_name=run.workflow_name,
        workflow_version=run.workflow_version,
        status=run.status,
        awaiting_admission=run.awaiting_admission,
        reason_for_incompletion=run.reason,
        correlation_id=run.correlation_id,
        parent_workflow_id=run.parent_execution_id,
        workflow_run=run.resource_name,
        input=run.input,
        output=run.output,
        start_time=_time(run.created_at) or "",
        end_time=_time(run.ended_at),
        sla_breached_at=_time(run.sla_breached_at),
        quarantined_at=_time(run.quarantined_at),
        quarantine_reason=run.quarantine_reason,
        schedule=run.schedule_name,
        chain_id=run.chain_id,
        previous_run_id=run.previous_run_id,
        next_run_id=run.next_run_id,
        chain_deadline=_time(run.chain_deadline_at),
        tasks=[
            TaskView(
                task_id=t.id,
                reference_name=t.ref,
                task_type=t.name,
                type=t.type,
                status=t.status,
                attempt=t.attempt,
                reason=t.reason,
                worker_id=t.worker_id,
                scheduled_at=_time(t.created_at) or "",
                available_at=_time(t.available_at) or "",
                started_at=_time(t.leased_at),
                ended_at=_time(t.ended_at),
                input=t.input,
                output=t.output,
                sub_workflow_id=t.child_execution_id,
                loop=t.loop_ref,
                iteration=t.iteration,
                snooze_count=t.snooze_count,
                interrupt_count=t.interrupt_count,
                completed_by=t.completed_by,
            )
            for t in tasks
        ],
    )


@router.post(
    "/{execution_id}/decide",
    status_code=202,
    summary="Force an evaluation",
    operation_id="force_decide",
    responses={404: refusal("No such run")},
    dependencies=[requires("update", "workflowruns")],
)
async def force_decide(
    namespace: NAMESPACE, execution_id: EXECUTION_ID, svc: Services = Depends(services)
) -> JSONResponse:
    """An escape hatch and a diagnostic: if this unsticks a run, something
    failed to enqueue an evaluation. It also releases a quarantined run: the
    decider tries it once more, and quarantines it again if its cause is still
    there (`released` says whether it was quarantined)."""
    async with svc.pool.acquire() as conn, conn.transaction():
        run = await executions.get_run(conn, namespace, str(execution_id))
        if run is None:
            raise ApiError(404, "NOT_FOUND", f"no run {execution_id} in namespace {namespace}")
        released = await executions.release_quarantine(conn, namespace, run.id)
        await executions.enqueue_decide(conn, run.id, "forced")
    return JSONResponse({"status": "queued", "id": run.id, "released": released}, status_code=202)


@router.post(
    "/{execution_id}/terminate",
    status_code=202,
    summary="Terminate a running run",
    operation_id="terminate_run",
    responses={404: refusal("No such run"), 409: refusal("The run is not running")},
    dependencies=[requires("update", "workflowruns")],
)
async def terminate(
    namespace: NAMESPACE,
    execution_id: EXECUTION_ID,
    request: TerminateRequest | None = None,
    svc: Services = Depends(services),
) -> JSONResponse:
    reason = request.reason if request else "terminated by request"
    async with svc.pool.acquire() as conn, conn.transaction():
        run = await executions.get_run(conn, namespace, str(execution_id))
        if run is None:
            raise ApiError(404, "NOT_FOUND", f"no run {execution_id} in namespace {namespace}")
        if not await executions.request_termination(conn, namespace, run.id, reason):
            raise ApiError(409, "NOT_RUNNING", f"run {execution_id} is {run.status.value}")
    return JSONResponse({"status": "terminating", "id": run.id}, status_code=202)


async def _message(request: Request) -> object:
    """The body as one JSON value, at most MAX_MESSAGE_BYTES long."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_MESSAGE_BYTES:
            raise ApiError(413, "PAYLOAD_TOO_LARGE", f"body: a message is at most {MAX_MESSAGE_BYTES} bytes")
        chunks.append(chunk)
    try:
        payload = orjson.loads(b"".join(chunks))
    except orjson.JSONDecodeError as error:
        raise ApiError(
            422, "INVALID_REQUEST", f"body: not JSON: {error}", fields=[{"field": "body", "message": "not JSON"}]
        ) from error
    problem = unstorable(payload)
    if problem:
        raise ApiError(422, "INVALID_REQUEST", f"body: {problem}", fields=[{"field": "body", "message": problem}])
    return payload


@router.post(
    "/{execution_id}/messages",
    status_code=202,
    summary="Send a message to a run: PULL_WORKFLOW_MESSAGES tasks take them in order, each once",
    responses={
        202: {"description": "`{id, delivered}`: queued; `delivered` when a waiting task took it at once"},
        404: refusal("No such run"),
        409: refusal("The run is not running"),
        413: refusal(f"The message is larger than {MAX_MESSAGE_BYTES} bytes"),
        429: refusal(f"The run holds {MAX_QUEUED_MESSAGES} messages nobody took yet: {{limit, current}}"),
    },
    dependencies=[requires("update", "workflowruns")],
)
async def send_message(
    namespace: NAMESPACE, execution_id: EXECUTION_ID, request: Request, svc: Services = Depends(services)
) -> JSONResponse:
    """The body is the message: any JSON value. Messages are kept in the run's
    durable queue until a PULL_WORKFLOW_MESSAGES task takes them."""
    payload = await _message(request)
    size = len(orjson.dumps(payload))
    async with svc.pool.acquire() as conn, conn.transaction():
        outcome = await messages.append(conn, namespace, str(execution_id), payload, size, MAX_QUEUED_MESSAGES)
    if isinstance(outcome, messages.NoSuchRun):
        raise ApiError(404, "NOT_FOUND", f"no run {execution_id} in namespace {namespace}")
    if isinstance(outcome, messages.NotRunning):
        raise ApiError(409, "NOT_RUNNING", f"run {execution_id} is {outcome.status}")
    if isinstance(outcome, messages.QueueFull):
        metrics.RUN_MESSAGES.labels("refused").inc()
        raise ApiError(
            429,
            "QUEUE_FULL",
            f"run {execution_id} holds {outcome.current} messages nobody took yet (at most {outcome.limit})",
            control="messagesPerRun",
            limit=outcome.limit,
            current=outcome.current,
            retryAfterSeconds=5,
        )
    metrics.RUN_MESSAGES.labels("queued").inc()
    return JSONResponse({"id": outcome.id, "delivered": bool(outcome.delivered_to)}, status_code=202)
