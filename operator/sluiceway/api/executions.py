"""Runs: start (idempotently), list and search, read, and operate: pause,
resume, retry from the failure, rerun from a task, restart, terminate; and
the logs their tasks wrote."""

from __future__ import annotations

import datetime
import re
import uuid
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from sluiceway.api.audit import Announcement, actor_of, announce, audited
from sluiceway.api.errors import INVALID, ApiError, refusal
from sluiceway.api.guards import requires
from sluiceway.api.paging import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    Order,
    decode_cursor,
    encode_cursor,
    instant,
    invalid,
    run_id,
    several,
)
from sluiceway.api.params import EXECUTION_ID, NAMESPACE
from sluiceway.api.payloads import check_payload, json_size, limit_of, too_large
from sluiceway.api.services import Services, services
from sluiceway.controls import attributes as attribute_rules
from sluiceway.controls.payloads import PayloadLimit, oversized
from sluiceway.model.common import ENGINE_NAME_PATTERN, INT32_MAX, unstorable
from sluiceway.model.execution import (
    MAX_BATCH,
    MAX_MESSAGE_BYTES,
    MAX_QUEUED_MESSAGES,
    REQUEST_ID_PATTERN,
    AuditEntry,
    AuditPage,
    ExecutionView,
    LogEntry,
    LogPage,
    OperationResponse,
    PauseRequest,
    RerunRequest,
    RestartRequest,
    RunPage,
    RunStatus,
    RunSummary,
    StartBatch,
    StartBatchResponse,
    StartRequest,
    StartResponse,
    TaskView,
    TerminateRequest,
    invalid_item,
)
from sluiceway.observability import metrics
from sluiceway.store import admission, attributes, audit, executions, listing, logs, messages, operations

router = APIRouter(prefix="/v1/ns/{namespace}/executions", tags=["executions"], responses=INVALID)


# OpenAPI links from a started run to what can be done with it: clients and
# stateful API fuzzers follow them.
RUN_ID = {"namespace": "$request.path.namespace", "execution_id": "$response.body#/id"}
RUN_LINKS = {
    "GetRun": "get_run",
    "ForceDecide": "force_decide",
    "TerminateRun": "terminate_run",
    "WhyRun": "why_run",
    "PauseRun": "pause_run",
    "ResumeRun": "resume_run",
    "RunLogs": "run_logs",
}
IDEMPOTENCY_KEY = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        max_length=256,
        description="The same as the body's requestId: a retried start returns the run the first one created.",
    ),
]


def _time(value: datetime.datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


# A quota is a rate the caller may retry later (429); a workflow's own cap is a conflict (409).
_REFUSED_STATUS = {admission.QuotaExceeded: 429, admission.LimitExceeded: 409}


def _gate_error(outcome: admission.Refusal) -> ApiError:
    return ApiError(
        _REFUSED_STATUS[type(outcome)], outcome.code, outcome.message, control=outcome.control, **outcome.details()
    )


def start_error(outcome: executions.StartOutcome | operations.Refused) -> ApiError:
    if isinstance(outcome, executions.WorkflowNotFound):
        return ApiError(404, "WORKFLOW_NOT_FOUND", outcome.message)
    if isinstance(outcome, executions.InvalidOverrides):
        return invalid(outcome.field, outcome.message)
    if isinstance(outcome, executions.InvalidStart):
        fields = [{"field": p.field, "message": p.message} for p in outcome.problems]
        return ApiError(422, "INVALID_REQUEST", outcome.message, fields=fields)
    if isinstance(outcome, executions.RequestReused):
        return ApiError(
            409,
            "IDEMPOTENCY_KEY_REUSED",
            outcome.message,
            executionId=outcome.execution_id,
            fields=[{"field": "requestId", "message": outcome.message}],
        )
    if isinstance(outcome, operations.Refused):
        return operation_error(outcome)
    assert not isinstance(outcome, executions.Started)
    return _gate_error(outcome)


def operation_error(outcome: operations.Refused | admission.Refusal) -> ApiError:
    if isinstance(outcome, admission.Refusal):
        return _gate_error(outcome)
    if outcome.reason is operations.Refusal.NOT_FOUND:
        return ApiError(404, "NOT_FOUND", outcome.message)
    if outcome.reason is operations.Refusal.UNKNOWN_TASK:
        return invalid("taskReferenceName", outcome.message)
    return ApiError(409, outcome.reason.value, outcome.message)


def _request_id(body: str | None, header: str | None) -> str | None:
    if header is not None and (body is not None and header != body):
        raise invalid("requestId", "differs from the Idempotency-Key header: send one key")
    if header is not None:
        if not re.fullmatch(REQUEST_ID_PATTERN, header):
            raise invalid("Idempotency-Key", "1 to 256 printable characters, no spaces")
    return body or header


def _started(outcome: executions.Started, restarted_from: str | None = None) -> JSONResponse:
    body = StartResponse(
        id=outcome.id,
        status=outcome.status,
        awaiting_admission=outcome.awaiting_admission,
        created=outcome.created,
        restarted_from=restarted_from,
    ).to_wire()
    return JSONResponse(body, status_code=201 if outcome.created else 200)


@router.post(
    "",
    status_code=201,
    response_model=StartResponse,
    response_model_by_alias=True,
    responses={
        200: {"model": StartResponse, "description": "A retried start (same requestId): the run it created"},
        201: {"links": {link: {"operationId": op, "parameters": RUN_ID} for link, op in RUN_LINKS.items()}},
        404: refusal("No such workflow"),
        409: refusal("LIMIT_EXCEEDED: maxConcurrentExecutions; IDEMPOTENCY_KEY_REUSED: the key started another run"),
        413: refusal("The input is larger than the namespace's payload limit: {field, size, limit}"),
        429: refusal("A namespace quota: {quota, limit, current, retryAfterSeconds}"),
    },
    summary="Start a run",
    dependencies=[requires("create", "workflowruns")],
)
async def start(
    namespace: NAMESPACE,
    request: StartRequest,
    caller: Request,
    idempotency_key: IDEMPOTENCY_KEY = None,
    svc: Services = Depends(services),
) -> JSONResponse:
    """`requestId` (or the `Idempotency-Key` header) makes the start
    idempotent for the idempotency window: a retry gets the same run back
    (200, `created: false`), and concurrent retries create one run."""
    key = _request_id(request.request_id, idempotency_key)
    await check_payload(svc, namespace, "input", request.input)
    async with svc.pool.acquire() as conn, svc.inline_decisions() as inline, conn.transaction():
        outcome = await executions.start_run(
            conn,
            namespace,
            request.name,
            request.version,
            request.input,
            correlation_id=request.correlation_id,
            request_id=key,
            search_attributes=request.search_attributes,
            sla_seconds=request.sla_seconds,
            idempotency_window=svc.idempotency_window,
            task_overrides=request.task_overrides,
            notify=not svc.decides_inline,
        )
        if isinstance(outcome, executions.Started) and outcome.created:  # its first tasks are SCHEDULED at commit
            await inline.decide(conn, [uuid.UUID(outcome.id)])
        event = await _audit_start(conn, caller, namespace, outcome, {"workflow": request.name})
    announce(caller, event)
    if not isinstance(outcome, executions.Started):
        raise start_error(outcome)
    await svc.committed(inline.decided, outcome.created and not svc.decides_inline)
    return _started(outcome)


@router.post(
    "/starts",
    response_model=StartBatchResponse,
    response_model_by_alias=True,
    responses={
        207: {"model": StartBatchResponse, "description": "Some starts were refused: see each item's code"},
        413: refusal("The body is larger than SLUICEWAY_MAX_REQUEST_BYTES"),
        422: refusal(f"The envelope is invalid (not an object, no `starts` list, more than {MAX_BATCH} items)"),
    },
    summary="Start several runs in one request",
    operation_id="start_runs",
    dependencies=[requires("create", "workflowruns")],
)
async def start_many(
    namespace: NAMESPACE, batch: StartBatch, caller: Request, svc: Services = Depends(services)
) -> Response:
    """Each start is validated and judged on its own: one bad item never costs
    the others. 200 when every item started a run (or, for a retried
    requestId, found it); 207 otherwise. One outcome per item, in the order
    sent, with the code and body the single start would have answered: 201
    started, 200 found by its requestId, 404, 409, 413, 422 naming the field,
    429. All the starts go in one transaction; plain ones with one
    multi-row insert."""
    limit = await limit_of(svc, namespace)
    answers: list[dict[str, Any] | None] = []
    items: list[executions.StartItem] = []
    for raw in batch.starts:
        answer, item = _checked_start(raw, limit)
        answers.append(answer)
        if item is not None:
            items.append(item)
    async with svc.pool.acquire() as conn, svc.inline_decisions() as inline, conn.transaction():
        outcomes = await executions.start_runs(
            conn, namespace, items, idempotency_window=svc.idempotency_window, notify=not svc.decides_inline
        )
        created = [
            (uuid.UUID(o.id), {"workflow": i.name})
            for i, o in zip(items, outcomes, strict=True)
            if isinstance(o, executions.Started) and o.created
        ]
        await inline.decide(conn, [run for run, _ in created])
        await audit.record_starts(conn, namespace, created, actor_of(caller))
    await svc.committed(inline.decided, bool(created) and not svc.decides_inline)
    judged = iter(outcomes)
    body = [answer if answer is not None else _start_answer(next(judged)) for answer in answers]
    return Response(
        orjson.dumps({"starts": body}),
        status_code=200 if all(a["code"] in (200, 201) for a in body) else 207,
        media_type="application/json",
    )


def _checked_start(raw: Any, limit: PayloadLimit) -> tuple[dict[str, Any] | None, executions.StartItem | None]:
    """The item to start, or the answer that refuses it (422 naming the field, 413 over the limit)."""
    try:
        request = StartRequest.model_validate(raw)
    except ValidationError as error:
        refused = invalid_item(None, error)
        return {
            "code": 422,
            "error": "INVALID_REQUEST",
            "message": refused.error,
            "fields": [f.to_wire() for f in refused.fields or []],
        }, None
    found = oversized("input", json_size(request.input), limit)
    if found is not None:
        return {"code": 413, **too_large(found).body}, None
    item = executions.StartItem(
        name=request.name,
        version=request.version,
        input=request.input,
        correlation_id=request.correlation_id,
        request_id=request.request_id,
        search_attributes=request.search_attributes,
        sla_seconds=request.sla_seconds,
        task_overrides=request.task_overrides,
    )
    return None, item


def _start_answer(outcome: executions.StartOutcome) -> dict[str, Any]:
    if isinstance(outcome, executions.Started):
        return {
            "code": 201 if outcome.created else 200,
            "id": outcome.id,
            "status": outcome.status.value,
            "awaitingAdmission": outcome.awaiting_admission,
            "created": outcome.created,
        }
    refused = start_error(outcome)
    return {"code": refused.status, **refused.body}


async def _audit_start(
    conn: Any, caller: Request, namespace: str, outcome: object, detail: dict[str, Any]
) -> Announcement | None:
    """A start that created a run is recorded on it; an idempotent retry, or a refusal, is not."""
    if isinstance(outcome, executions.Started) and outcome.created:
        return await audited(conn, caller, namespace, outcome.id, "start", detail)
    return None


def _no_nul(field: str, value: str | None) -> str | None:
    if value is not None and "\x00" in value:
        raise invalid(field, "must not contain a NUL character")
    return value


async def _attribute_filters(
    conn: Any, namespace: str, workflow: str | None, written: list[str]
) -> tuple[attribute_rules.TypedFilter, ...]:
    if not written:
        return ()
    if len(written) > 10:
        raise invalid("searchAttribute", "at most 10 attribute filters")
    declared = attribute_rules.declared_types(await attributes.declared(conn, namespace, workflow))
    found = []
    for text in written:
        try:
            condition = attribute_rules.parse_filter(text)
            found.append(attribute_rules.typed_filter(condition, attribute_rules.filter_type(condition.name, declared)))
        except attribute_rules.FilterError as error:
            raise invalid("searchAttribute", str(error)) from None
    return tuple(found)


def _summary(row: listing.RunRow) -> RunSummary:
    return RunSummary(
        id=row.id,
        workflow_name=row.workflow_name,
        workflow_version=row.workflow_version,
        status=row.status,
        awaiting_admission=row.awaiting_admission,
        reason_for_incompletion=row.reason,
        correlation_id=row.correlation_id,
        parent_workflow_id=row.parent_execution_id,
        workflow_run=row.resource_name,
        start_time=_time(row.created_at) or "",
        end_time=_time(row.ended_at),
        paused_at=_time(row.paused_at),
        sla_breached_at=_time(row.sla_breached_at),
        quarantined=row.quarantined,
        search_attributes=row.attributes,
    )


@router.get(
    "",
    response_model=RunPage,
    response_model_by_alias=True,
    summary="List and search runs, newest first",
    operation_id="list_runs",
    dependencies=[requires("list", "workflowruns")],
)
async def list_runs(
    namespace: NAMESPACE,
    workflow: Annotated[str | None, Query(pattern=ENGINE_NAME_PATTERN, max_length=253)] = None,
    version: Annotated[int | None, Query(ge=1, le=INT32_MAX)] = None,
    status: Annotated[list[str] | None, Query(description="Repeat or comma-separate: FAILED,TIMED_OUT")] = None,
    started_after: Annotated[str | None, Query(alias="startedAfter", description="ISO 8601")] = None,
    started_before: Annotated[str | None, Query(alias="startedBefore")] = None,
    ended_after: Annotated[str | None, Query(alias="endedAfter")] = None,
    ended_before: Annotated[str | None, Query(alias="endedBefore")] = None,
    correlation_id: Annotated[str | None, Query(alias="correlationId", max_length=256)] = None,
    parent: Annotated[str | None, Query(description="Runs started by this run's SUB_WORKFLOW tasks")] = None,
    workflow_run: Annotated[
        str | None, Query(alias="workflowRun", pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", max_length=253)
    ] = None,
    restarted_from: Annotated[str | None, Query(alias="restartedFrom")] = None,
    awaiting_admission: Annotated[bool | None, Query(alias="awaitingAdmission")] = None,
    sla_breached: Annotated[bool | None, Query(alias="slaBreached")] = None,
    search_attribute: Annotated[
        list[str] | None,
        Query(alias="searchAttribute", description="Repeat: tenant=acme, amount>=100, tenant in (acme, globex)"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, Query(max_length=512, description="nextCursor of the previous page")] = None,
    order: Order = Order.NEWEST,
    svc: Services = Depends(services),
) -> RunPage:
    """Every filter narrows (AND); `status` and `in` take several values.
    Pages are keyset pages in start order (`newest` first unless
    `order=oldest`), stable while runs are added, and never counted: follow
    `nextCursor` until it is null."""
    after = decode_cursor(cursor, order) if cursor is not None else None
    async with svc.pool.acquire() as conn:
        found = listing.RunFilter(
            workflow=workflow,
            version=version,
            statuses=several("status", status, RunStatus),
            started_after=instant("startedAfter", started_after),
            started_before=instant("startedBefore", started_before),
            ended_after=instant("endedAfter", ended_after),
            ended_before=instant("endedBefore", ended_before),
            correlation_id=_no_nul("correlationId", correlation_id),
            parent=run_id("parent", parent),
            workflow_run=workflow_run,
            restarted_from=run_id("restartedFrom", restarted_from),
            awaiting_admission=awaiting_admission,
            sla_breached=sla_breached,
            attributes=await _attribute_filters(conn, namespace, workflow, search_attribute or []),
        )
        page = await listing.runs(conn, namespace, found, after=after, limit=limit, ascending=order is Order.OLDEST)
    return RunPage(
        items=[_summary(row) for row in page.rows],
        next_cursor=encode_cursor(page.next, order) if page.next is not None else None,
    )


async def _read(svc: Services, namespace: str, execution_id: uuid.UUID, include_tasks: bool) -> ExecutionView:
    async with svc.pool.acquire() as conn:
        run = await executions.get_run(conn, namespace, str(execution_id))
        if run is None:
            raise ApiError(404, "NOT_FOUND", f"no run {execution_id} in namespace {namespace}")
        tasks = await executions.get_tasks(conn, run.id) if include_tasks else []
        found = await attributes.of_runs(conn, [uuid.UUID(run.id)])
    superseded = run.superseded or {}
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
        restarted_from=run.restarted_from,
        request_id=run.request_id,
        input=run.input,
        output=run.output,
        start_time=_time(run.created_at) or "",
        end_time=_time(run.ended_at),
        search_attributes=found[uuid.UUID(run.id)],
        paused_at=_time(run.paused_at),
        pause_reason=run.pause_reason,
        paused_seconds=round(run.paused_seconds, 3),
        deadline=_time(run.timeout_at),
        sla_seconds=run.sla_seconds,
        sla_deadline=_time(run.sla_at),
        sla_breached_at=_time(run.sla_breached_at),
        retries=run.retries,
        expires_at=_time(run.expires_at),
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
                superseded=t.attempt <= superseded.get(t.ref, 0),
                loop=t.loop_ref,
                iteration=t.iteration,
                snooze_count=t.snooze_count,
                interrupt_count=t.interrupt_count,
                completed_by=t.completed_by,
            )
            for t in tasks
        ],
    )


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
    return await _read(svc, namespace, execution_id, include_tasks)


@router.post(
    "/{execution_id}/decide",
    status_code=202,
    summary="Force an evaluation",
    operation_id="force_decide",
    responses={404: refusal("No such run")},
    dependencies=[requires("update", "workflowruns")],
)
async def force_decide(
    namespace: NAMESPACE, execution_id: EXECUTION_ID, caller: Request, svc: Services = Depends(services)
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
        event = await audited(conn, caller, namespace, run.id, "decide", {"released": released})
    announce(caller, event)
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
    caller: Request,
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
        event = await audited(conn, caller, namespace, run.id, "terminate", {"reason": reason})
    announce(caller, event)
    return JSONResponse({"status": "terminating", "id": run.id}, status_code=202)


_OPERATION_OUTCOMES: dict[int | str, dict[str, Any]] = {
    404: refusal("No such run"),
    409: refusal("The run is not in a state for it: NOT_RUNNING, NOT_FINISHED, COMPLETED, NOTHING_TO_RETRY, ..."),
    413: refusal("The input is larger than the namespace's payload limit: {field, size, limit}"),
    429: refusal("A namespace quota: the run would run again"),
}


async def _audit_done(
    conn: Any, caller: Request, namespace: str, outcome: operations.Outcome, operation: str, detail: dict[str, Any]
) -> Announcement | None:
    """An operation that did something is recorded on its run."""
    if isinstance(outcome, operations.Done):
        return await audited(conn, caller, namespace, outcome.id, operation, detail)
    return None


def _answer(outcome: operations.Outcome) -> OperationResponse:
    if not isinstance(outcome, operations.Done):
        raise operation_error(outcome)
    return OperationResponse(id=outcome.id, status=outcome.status, message=outcome.message)


@router.post(
    "/{execution_id}/pause",
    response_model=OperationResponse,
    response_model_by_alias=True,
    summary="Pause a running run",
    operation_id="pause_run",
    responses=_OPERATION_OUTCOMES,
    dependencies=[requires("update", "workflowruns")],
)
async def pause(
    namespace: NAMESPACE,
    execution_id: EXECUTION_ID,
    caller: Request,
    request: PauseRequest | None = None,
    svc: Services = Depends(services),
) -> OperationResponse:
    """Nothing new is scheduled and the run's clocks stop; tasks already
    leased finish and their results are recorded. Pausing a paused run
    changes nothing."""
    async with svc.pool.acquire() as conn, conn.transaction():
        reason = request.reason if request else ""
        outcome = await operations.pause(conn, namespace, str(execution_id), reason)
        event = await _audit_done(conn, caller, namespace, outcome, "pause", {"reason": reason})
    announce(caller, event)
    return _answer(outcome)


@router.post(
    "/{execution_id}/resume",
    response_model=OperationResponse,
    response_model_by_alias=True,
    summary="Resume a paused run",
    operation_id="resume_run",
    responses=_OPERATION_OUTCOMES,
    dependencies=[requires("update", "workflowruns")],
)
async def resume(
    namespace: NAMESPACE, execution_id: EXECUTION_ID, caller: Request, svc: Services = Depends(services)
) -> OperationResponse:
    """The run's deadline and SLA move forward by the time it was paused (a
    chain deadline does not); held tasks are queued again."""
    async with svc.pool.acquire() as conn, conn.transaction():
        outcome = await operations.resume(conn, namespace, str(execution_id))
        event = await _audit_done(conn, caller, namespace, outcome, "resume", {})
    announce(caller, event)
    return _answer(outcome)


@router.post(
    "/{execution_id}/retry",
    response_model=OperationResponse,
    response_model_by_alias=True,
    summary="Retry a failed run from the tasks that failed",
    operation_id="retry_run",
    responses=_OPERATION_OUTCOMES,
    dependencies=[requires("update", "workflowruns")],
)
async def retry(
    namespace: NAMESPACE, execution_id: EXECUTION_ID, caller: Request, svc: Services = Depends(services)
) -> OperationResponse:
    """For a run that FAILED, TIMED_OUT or was TERMINATED: the tasks that
    failed, timed out or were canceled start again with a fresh retryCount;
    what completed keeps its output."""
    async with svc.pool.acquire() as conn, conn.transaction():
        outcome = await operations.retry(conn, namespace, str(execution_id))
        event = await _audit_done(conn, caller, namespace, outcome, "retry", {})
    announce(caller, event)
    return _answer(outcome)


@router.post(
    "/{execution_id}/rerun",
    response_model=OperationResponse,
    response_model_by_alias=True,
    summary="Rerun a finished run from one task",
    operation_id="rerun_run",
    responses=_OPERATION_OUTCOMES,
    dependencies=[requires("update", "workflowruns")],
)
async def rerun(
    namespace: NAMESPACE,
    execution_id: EXECUTION_ID,
    request: RerunRequest,
    caller: Request,
    svc: Services = Depends(services),
) -> OperationResponse:
    """The task, what it contains and every task after it start afresh (the
    task with `input` merged over its inputs, if given); the others keep their
    outputs."""
    await check_payload(svc, namespace, "input", request.input)
    async with svc.pool.acquire() as conn, conn.transaction():
        outcome = await operations.rerun(conn, namespace, str(execution_id), request.task_reference_name, request.input)
        detail = {"taskReferenceName": request.task_reference_name, "newInput": request.input is not None}
        event = await _audit_done(conn, caller, namespace, outcome, "rerun", detail)
    announce(caller, event)
    return _answer(outcome)


@router.post(
    "/{execution_id}/restart",
    status_code=201,
    response_model=StartResponse,
    response_model_by_alias=True,
    summary="Restart a finished run as a new run",
    operation_id="restart_run",
    responses={**_OPERATION_OUTCOMES, 200: {"model": StartResponse, "description": "A retried restart"}},
    dependencies=[requires("create", "workflowruns")],
)
async def restart(
    namespace: NAMESPACE,
    execution_id: EXECUTION_ID,
    caller: Request,
    request: RestartRequest | None = None,
    idempotency_key: IDEMPOTENCY_KEY = None,
    svc: Services = Depends(services),
) -> JSONResponse:
    """A new run of the same workflow (the same version unless
    `latestVersion`), with the old input unless given, linked to the old run
    by `restartedFrom`."""
    request = request or RestartRequest()
    key = _request_id(request.request_id, idempotency_key)
    await check_payload(svc, namespace, "input", request.input)
    async with svc.pool.acquire() as conn, conn.transaction():
        outcome = await operations.restart(
            conn,
            namespace,
            str(execution_id),
            new_input=request.input,
            latest_version=request.latest_version,
            request_id=key,
        )
        events = []
        if isinstance(outcome, executions.Started) and outcome.created:
            detail = {"restartedFrom": str(execution_id), "newRun": outcome.id}
            events = [
                await audited(conn, caller, namespace, outcome.id, "restart", detail),
                await audited(conn, caller, namespace, execution_id, "restart", detail),
            ]
    announce(caller, *events)
    if not isinstance(outcome, executions.Started):
        raise start_error(outcome)
    return _started(outcome, restarted_from=str(execution_id))


@router.get(
    "/{execution_id}/audit",
    response_model=AuditPage,
    response_model_by_alias=True,
    summary="Who changed the run through the API, oldest first",
    operation_id="run_audit",
    responses={404: refusal("No such run")},
    dependencies=[requires("get", "workflowruns")],
)
async def run_audit(
    namespace: NAMESPACE,
    execution_id: EXECUTION_ID,
    after: Annotated[int, Query(ge=0, description="Entries after this id: the nextAfter of the last answer")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    svc: Services = Depends(services),
) -> AuditPage:
    """Every operation that changed the run through the API (start,
    terminate, pause, resume, retry, rerun, restart, decide, message, a HUMAN
    task's decision, a webhook's acceptance), with the authenticated identity
    that made it."""
    async with svc.pool.acquire() as conn:
        run = await executions.get_run(conn, namespace, str(execution_id))
        if run is None:
            raise ApiError(404, "NOT_FOUND", f"no run {execution_id} in namespace {namespace}")
        entries = await audit.read(conn, namespace, execution_id, after=after, limit=limit)
    return AuditPage(
        entries=[
            AuditEntry(id=e.id, at=_time(e.at) or "", actor=e.actor, via=e.via, operation=e.operation, detail=e.detail)
            for e in entries
        ],
        next_after=entries[-1].id if len(entries) == limit else None,
    )


@router.get(
    "/{execution_id}/logs",
    response_model=LogPage,
    response_model_by_alias=True,
    summary="What the run's tasks logged",
    operation_id="run_logs",
    responses={404: refusal("No such run")},
    dependencies=[requires("get", "workflowruns")],
)
async def run_logs(
    namespace: NAMESPACE,
    execution_id: EXECUTION_ID,
    task: Annotated[
        str | None,
        Query(
            pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,127}(__[0-9]{1,9})?$",
            description="Only this task reference (every attempt)",
        ),
    ] = None,
    after: Annotated[int, Query(ge=0, description="Lines after this id: the nextAfter of the last answer")] = 0,
    limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
    svc: Services = Depends(services),
) -> LogPage:
    async with svc.pool.acquire() as conn:
        run = await executions.get_run(conn, namespace, str(execution_id))
        if run is None:
            raise ApiError(404, "NOT_FOUND", f"no run {execution_id} in namespace {namespace}")
        found = await logs.read(conn, execution_id, after=after, limit=limit, ref=task, cap=svc.log_cap_bytes)
    return log_page(found, after)


def log_page(found: logs.Logs, after: int) -> LogPage:
    return LogPage(
        lines=[
            LogEntry(
                id=e.id,
                task_id=e.task_id,
                reference_name=e.ref,
                attempt=e.attempt,
                at=_time(e.at) or "",
                logged_at=_time(e.logged_at),
                level=e.level,
                message=e.message,
            )
            for e in found.entries
        ],
        next_after=found.entries[-1].id if found.entries else (after or None),
        truncated=found.truncated,
    )


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
        413: refusal(f"The message is larger than {MAX_MESSAGE_BYTES} bytes, or the namespace's payload limit"),
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
    await check_payload(svc, namespace, "body", payload)
    size = len(orjson.dumps(payload))
    async with svc.pool.acquire() as conn, conn.transaction():
        outcome = await messages.append(conn, namespace, str(execution_id), payload, size, MAX_QUEUED_MESSAGES)
        event = None
        if isinstance(outcome, messages.Appended):
            detail = {"messageId": outcome.id, "bytes": size}
            event = await audited(conn, request, namespace, execution_id, "message", detail)
    announce(request, event)
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
