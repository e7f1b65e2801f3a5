"""Runs over REST: start (idempotently, one or many), list and search, read,
and operate: pause, resume, retry from the failure, rerun from a task,
restart, terminate, force a decision, send a message; and the logs their
tasks wrote and the audit trail of who changed them.

Every change is a command of the execution plane (`sluiceway.plane`), which
limits, audits and wakes it; a route reads the request, says who the caller
is, calls the command and maps its outcome (`api.outcomes`)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from sluiceway.api import views
from sluiceway.api.actors import actor_of
from sluiceway.api.errors import INVALID, ApiError, invalid, refusal
from sluiceway.api.guards import requires
from sluiceway.api.outcomes import answer, error_of, too_many_waiters
from sluiceway.api.params import (
    EXECUTION_ID,
    NAMESPACE,
    InstantText,
    RunIdText,
    RunStatusText,
    cursor_query,
    instant_query,
    run_id_query,
)
from sluiceway.api.services import Services, services
from sluiceway.controls.durations import parse_duration
from sluiceway.model.common import DNS_SUBDOMAIN_PATTERN, ENGINE_NAME_PATTERN, INT32_MAX, unstorable, wire_time
from sluiceway.model.execution import (
    MAX_BATCH,
    MAX_MESSAGE_BYTES,
    MAX_QUEUED_MESSAGES,
    REQUEST_ID_PATTERN,
    AuditEntry,
    AuditPage,
    ExecutionView,
    LogPage,
    OperationResponse,
    PauseRequest,
    RerunRequest,
    RestartRequest,
    RunPage,
    StartBatch,
    StartBatchResponse,
    StartRequest,
    StartResponse,
    TerminateRequest,
    invalid_item,
)
from sluiceway.model.workflow import RUN_REF_PATTERN
from sluiceway.plane import archived, finding, runs, starts, waiting
from sluiceway.plane.finding import DEFAULT_LIMIT, MAX_LIMIT, Order
from sluiceway.plane.outcomes import Refusal
from sluiceway.store import attributes, logs
from sluiceway.store.archives import ArchivedRun, ArchiveError
from sluiceway.store.runs import RunView, get_run, get_tasks

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
        pattern=REQUEST_ID_PATTERN,
        description="The same as the body's requestId: a retried start returns the run the first one created. "
        "1 to 256 printable characters, no spaces; with a requestId in the body, the same key (else 422).",
    ),
]

# The forms of a `wait` within its bound, as the document states them: the
# server reads more (`1 minute`, `0.5M`, `45 SECS`), so a client that keeps to
# the pattern is never refused, and the bound is checked by hand beyond it.
WAIT_PATTERN = r"^(([0-5]?[0-9](\.[0-9]+)?|60) ?(s|sec|secs|second|seconds)?|1 ?(m|min|mins|minute|minutes))$"
WAIT = Annotated[
    str | None,
    Query(
        max_length=64,
        json_schema_extra={"pattern": WAIT_PATTERN},
        description=f"Wait up to this long for the run to end: 30, 30s, 1m (at most {waiting.MAX_WAIT_SECONDS:.0f} s). "
        "The run's own end wakes the wait; nothing polls.",
    ),
]


def _wait_seconds(raw: str | None) -> float:
    """The `wait` asked for, in seconds; 0 when none. A 422 naming `wait` beyond the bound."""
    if raw is None:
        return 0.0
    try:
        seconds = parse_duration(raw)
    except ValueError as error:
        raise invalid("wait", str(error)) from error
    if seconds > waiting.MAX_WAIT_SECONDS:
        raise invalid("wait", f"at most {waiting.MAX_WAIT_SECONDS:.0f} s: wait again for longer")
    return seconds


async def _hung_up(caller: Request) -> None:
    """Returns once the caller hangs up (its body, if any, was read already)."""
    while (await caller.receive())["type"] != "http.disconnect":
        pass


async def _until_ended(
    caller: Request, waiter: waiting.Waiter, namespace: str, run_id: str, seconds: float
) -> RunView | None:
    """The run once it ended, or as it is when `seconds` pass (None: no such
    run, or the caller hung up: its waiter's slot is freed at once)."""
    wait = asyncio.ensure_future(waiter.until_ended(namespace, run_id, seconds))
    gone = asyncio.ensure_future(_hung_up(caller))
    try:
        await asyncio.wait((wait, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (wait, gone):
            task.cancel()
        await asyncio.gather(wait, gone, return_exceptions=True)
    return None if wait.cancelled() else wait.result()


def _waiter(
    svc: Services, seconds: float
) -> contextlib.AbstractContextManager[waiting.Waiter | waiting.TooManyWaiters | None]:
    return waiting.waiter(svc.plane) if seconds else contextlib.nullcontext()


async def _view(svc: Services, run: RunView, include_tasks: bool) -> ExecutionView:
    async with svc.pool.acquire() as conn:
        tasks = await get_tasks(conn, run.id) if include_tasks else []
        found = await attributes.of_runs(conn, run.namespace, [uuid.UUID(run.id)])
    return views.execution(run, tasks, found[uuid.UUID(run.id)])


async def _archived(svc: Services, namespace: str, run_id: str) -> ArchivedRun:
    """A run retention deleted, from the archive; 404 when it is in neither."""
    try:
        found = await archived.archived_run(svc.plane, namespace, run_id)
    except ArchiveError as error:
        raise ApiError(404, "NOT_FOUND", f"run {run_id} was archived, but {error}") from error
    if found is None:
        raise ApiError(404, "NOT_FOUND", f"no run {run_id} in namespace {namespace}")
    return found


def _request_id(body: str | None, header: str | None) -> str | None:
    """The start's key; the header's pattern is checked as it is read. Two
    keys that differ are a rule between the header and the body, which the
    document can only say in words."""
    if header is not None and (body is not None and header != body):
        raise invalid("requestId", "differs from the Idempotency-Key header: send one key")
    return body or header


def _item(request: StartRequest, request_id: str | None) -> starts.StartItem:
    return starts.StartItem(
        name=request.name,
        version=request.version,
        input=request.input,
        correlation_id=request.correlation_id,
        request_id=request_id,
        search_attributes=request.search_attributes,
        sla_seconds=request.sla_seconds,
        task_overrides=request.task_overrides,
        priority=request.priority,
    )


def _started(outcome: starts.StartOutcome | Any, restarted_from: str | None = None) -> JSONResponse:
    if not isinstance(outcome, starts.Started):
        raise error_of(outcome)
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
        200: {
            "model": StartResponse | ExecutionView,
            "description": "A retried start (same requestId): the run it created. With `wait`: the run, "
            "ended in time (its status, output and reason; no tasks)",
        },
        201: {"links": {link: {"operationId": op, "parameters": RUN_ID} for link, op in RUN_LINKS.items()}},
        202: {"model": StartResponse, "description": "With `wait`: started (or found), not ended in time"},
        404: refusal("No such workflow"),
        409: refusal("LIMIT_EXCEEDED: maxConcurrentExecutions; IDEMPOTENCY_KEY_REUSED: the key started another run"),
        413: refusal("The input is larger than the namespace's payload limit: {field, size, limit}"),
        429: refusal(
            "A namespace quota: {quota, limit, current, retryAfterSeconds}; TOO_MANY_WAITERS: this replica "
            "holds SLUICEWAY_MAX_RUN_WAITERS waits (Retry-After)"
        ),
    },
    summary="Start a run (and wait for it to end)",
    dependencies=[requires("create", "workflowruns")],
)
async def start(
    namespace: NAMESPACE,
    request: StartRequest,
    caller: Request,
    idempotency_key: IDEMPOTENCY_KEY = None,
    wait: WAIT = None,
    svc: Services = Depends(services),
) -> JSONResponse:
    """`requestId` (or the `Idempotency-Key` header) makes the start
    idempotent for the idempotency window: a retry gets the same run back
    (200, `created: false`), and concurrent retries create one run.

    `wait` (e.g. `30s`, at most 60 s): answer once the run ends, 200 with
    the run (status, output, reason), or 202 with its id and status when
    the wait ends first; wait again on `GET .../{id}?wait=`. A retried
    start with the same requestId waits for the same run."""
    seconds = _wait_seconds(wait)
    item = _item(request, _request_id(request.request_id, idempotency_key))
    with _waiter(svc, seconds) as waiter:
        if isinstance(waiter, waiting.TooManyWaiters):
            raise too_many_waiters(waiter)  # before the start: nothing was started
        outcome = await starts.start(svc.plane, actor_of(caller), namespace, item)
        if waiter is None or not isinstance(outcome, starts.Started):
            return _started(outcome)
        run = await _until_ended(caller, waiter, namespace, outcome.id, seconds)
    if run is None or not run.status.is_terminal():
        still = run.status if run is not None else outcome.status
        body = StartResponse(
            id=outcome.id, status=still, awaiting_admission=outcome.awaiting_admission, created=outcome.created
        )
        return JSONResponse(body.to_wire(), status_code=202)
    view = await _view(svc, run, include_tasks=False)
    return JSONResponse(view.model_dump(mode="json", by_alias=True), status_code=200)


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
    answers: list[dict[str, Any] | None] = []
    items: list[starts.StartItem] = []
    for raw in batch.starts:
        try:
            request = StartRequest.model_validate(raw)
            items.append(_item(request, request.request_id))
            answers.append(None)
        except ValidationError as error:
            refused = invalid_item(None, error)
            fields = [f.to_wire() for f in refused.fields or []]
            answers.append({"code": 422, "error": "INVALID_REQUEST", "message": refused.error, "fields": fields})
    judged = iter(await starts.start_many(svc.plane, actor_of(caller), namespace, items))
    body = [answer if answer is not None else _start_answer(next(judged)) for answer in answers]
    return Response(
        orjson.dumps({"starts": body}),
        status_code=200 if all(a["code"] in (200, 201) for a in body) else 207,
        media_type="application/json",
    )


def _start_answer(outcome: starts.StartOutcome | Any) -> dict[str, Any]:
    if isinstance(outcome, starts.Started):
        return {
            "code": 201 if outcome.created else 200,
            "id": outcome.id,
            "status": outcome.status.value,
            "awaitingAdmission": outcome.awaiting_admission,
            "created": outcome.created,
        }
    return answer(outcome)


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
    status: Annotated[list[RunStatusText] | None, Query(description="Repeat or comma-separate")] = None,
    started_after: Annotated[InstantText | None, instant_query("startedAfter", "Runs started at or after")] = None,
    started_before: Annotated[InstantText | None, instant_query("startedBefore", "Runs started before")] = None,
    ended_after: Annotated[InstantText | None, instant_query("endedAfter", "Runs ended at or after")] = None,
    ended_before: Annotated[InstantText | None, instant_query("endedBefore", "Runs ended before")] = None,
    correlation_id: Annotated[str | None, Query(alias="correlationId", max_length=256)] = None,
    parent: Annotated[
        RunIdText | None, run_id_query(description="Runs started by this run's SUB_WORKFLOW tasks")
    ] = None,
    workflow_run: Annotated[
        str | None, Query(alias="workflowRun", pattern=DNS_SUBDOMAIN_PATTERN, max_length=253)
    ] = None,
    restarted_from: Annotated[RunIdText | None, run_id_query("restartedFrom", "Runs restarted from this run")] = None,
    awaiting_admission: Annotated[bool | None, Query(alias="awaitingAdmission")] = None,
    sla_breached: Annotated[bool | None, Query(alias="slaBreached")] = None,
    search_attribute: Annotated[
        list[str] | None,
        Query(
            alias="searchAttribute",
            description="Repeat: tenant=acme, amount>=100, tenant in (acme, globex). The filter grammar of "
            "docs/search-attributes.md, on attributes the runs' workflow declares (else 422 naming searchAttribute).",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, cursor_query(512)] = None,
    order: Order = Order.NEWEST,
    svc: Services = Depends(services),
) -> RunPage:
    """Every filter narrows (AND); `status` and `in` take several values.
    Pages are keyset pages in start order (`newest` first unless
    `order=oldest`), stable while runs are added, and never counted: follow
    `nextCursor` until it is null."""
    query = finding.RunQuery(
        workflow=workflow,
        version=version,
        status=status or (),
        started_after=started_after,
        started_before=started_before,
        ended_after=ended_after,
        ended_before=ended_before,
        correlation_id=correlation_id,
        parent=parent,
        workflow_run=workflow_run,
        restarted_from=restarted_from,
        awaiting_admission=awaiting_admission,
        sla_breached=sla_breached,
        search_attributes=search_attribute or (),
    )
    page = await finding.find_runs(svc.plane, namespace, query, limit=limit, cursor=cursor, order=order)
    return views.run_page(page, order)


@router.get(
    "/{execution_id}",
    response_model=ExecutionView,
    response_model_by_alias=True,
    responses={404: refusal("No such run in this namespace")},
    summary="Read a run and its tasks (once it ends, with `wait`)",
    operation_id="get_run",
    dependencies=[requires("get", "workflowruns")],
)
async def get(
    namespace: NAMESPACE,
    execution_id: EXECUTION_ID,
    caller: Request,
    include_tasks: bool = True,
    wait: WAIT = None,
    svc: Services = Depends(services),
) -> ExecutionView:
    """`wait` (e.g. `30s`, at most 60 s): answer once the run ends, or as it
    is when the wait ends first (its status says which)."""
    seconds = _wait_seconds(wait)
    with _waiter(svc, seconds) as waiter:
        if isinstance(waiter, waiting.TooManyWaiters):
            raise too_many_waiters(waiter)
        if waiter is not None:
            run = await _until_ended(caller, waiter, namespace, str(execution_id), seconds)
            if run is not None:
                return await _view(svc, run, include_tasks)
    async with svc.pool.acquire() as conn:
        run = await get_run(conn, namespace, str(execution_id))
        if run is not None:
            tasks = await get_tasks(conn, run.id) if include_tasks else []
            found = await attributes.of_runs(conn, namespace, [uuid.UUID(run.id)])
            return views.execution(run, tasks, found[uuid.UUID(run.id)])
    gone = await _archived(svc, namespace, str(execution_id))  # purged: as it was archived
    return views.execution(gone.run, gone.tasks if include_tasks else [], gone.search_attributes, archived=True)


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
    outcome = await runs.force_decide(svc.plane, actor_of(caller), namespace, str(execution_id))
    if not isinstance(outcome, runs.Forced):
        raise error_of(outcome)
    return JSONResponse({"status": "queued", "id": outcome.id, "released": outcome.released}, status_code=202)


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
    reason = (request or TerminateRequest()).reason
    outcome = await runs.terminate(svc.plane, actor_of(caller), namespace, str(execution_id), reason)
    if not isinstance(outcome, runs.Done):
        raise error_of(outcome)
    return JSONResponse({"status": "terminating", "id": outcome.id}, status_code=202)


_OPERATION_OUTCOMES: dict[int | str, dict[str, Any]] = {
    404: refusal("No such run"),
    409: refusal("The run is not in a state for it: NOT_RUNNING, NOT_FINISHED, COMPLETED, NOTHING_TO_RETRY, ..."),
    413: refusal("The input is larger than the namespace's payload limit: {field, size, limit}"),
    429: refusal("A namespace quota: the run would run again"),
}


def _operated(outcome: runs.Outcome | Any) -> OperationResponse:
    if not isinstance(outcome, runs.Done):
        raise error_of(outcome)
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
    reason = (request or PauseRequest()).reason
    return _operated(await runs.pause(svc.plane, actor_of(caller), namespace, str(execution_id), reason))


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
    return _operated(await runs.resume(svc.plane, actor_of(caller), namespace, str(execution_id)))


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
    return _operated(await runs.retry(svc.plane, actor_of(caller), namespace, str(execution_id)))


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
    ref, new_input = request.task_reference_name, request.input
    return _operated(await runs.rerun(svc.plane, actor_of(caller), namespace, str(execution_id), ref, new_input))


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
    outcome = await starts.restart(
        svc.plane,
        actor_of(caller),
        namespace,
        str(execution_id),
        new_input=request.input,
        latest_version=request.latest_version,
        request_id=_request_id(request.request_id, idempotency_key),
    )
    return _started(outcome, restarted_from=str(execution_id))


@router.get(
    "/{execution_id}/audit",
    response_model=AuditPage,
    response_model_by_alias=True,
    summary="Who changed the run, and through which edge, oldest first",
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
    """Every operation that changed the run (start, terminate, pause, resume,
    retry, rerun, restart, decide, message, a HUMAN task's decision, a
    webhook's acceptance), through the API, the UI, a WorkflowRun's spec or a
    schedule, with who made it: the authenticated identity, the WorkflowRun,
    the scheduler."""
    entries = await runs.audit_trail(svc.plane, namespace, str(execution_id), after=after, limit=limit)
    if not isinstance(entries, list):
        if entries.reason is not Refusal.NOT_FOUND or svc.plane.archive is None:
            raise error_of(entries)
        gone = await _archived(svc, namespace, str(execution_id))  # purged: its trail as archived
        entries = [e for e in gone.audit if e.id > after][:limit]
    return AuditPage(
        entries=[
            AuditEntry(
                id=e.id, at=wire_time(e.at) or "", actor=e.actor, via=e.via, operation=e.operation, detail=e.detail
            )
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
            pattern=RUN_REF_PATTERN,
            description="Only this task reference (every attempt)",
        ),
    ] = None,
    after: Annotated[int, Query(ge=0, description="Lines after this id: the nextAfter of the last answer")] = 0,
    limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
    svc: Services = Depends(services),
) -> LogPage:
    async with svc.pool.acquire() as conn:
        run = await get_run(conn, namespace, str(execution_id))
        if run is not None:
            found = await logs.read(conn, execution_id, after=after, limit=limit, ref=task, cap=svc.plane.log_cap_bytes)
            return views.log_page(found, after)
    gone = await _archived(svc, namespace, str(execution_id))  # purged: its lines as archived
    return views.log_page(gone.logs_of(after=after, limit=limit, ref=task, cap=svc.plane.log_cap_bytes), after)


async def _message(request: Request) -> object:
    """The body as one JSON value (the request's own size limit bounds it)."""
    try:
        payload = orjson.loads(await request.body())
    except orjson.JSONDecodeError as error:
        raise ApiError(
            422, "INVALID_REQUEST", f"body: not JSON: {error}", fields=[{"field": "body", "message": "not JSON"}]
        ) from error
    problem = unstorable(payload)
    if problem:
        raise ApiError(422, "INVALID_REQUEST", f"body: {problem}", fields=[{"field": "body", "message": problem}])
    return payload


# The message is read by hand (any JSON value, not a model): its body is
# declared here, so the document says a client must send one.
_MESSAGE_BODY = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "description": f"The message: any JSON value, at most {MAX_MESSAGE_BYTES} bytes. As every payload: "
                "text holds no NUL character or lone surrogate, integers fit in 64 bits (else 422 naming `body`)."
            }
        }
    },
}


@router.post(
    "/{execution_id}/messages",
    status_code=202,
    openapi_extra={"requestBody": _MESSAGE_BODY},
    summary="Send a message to a run: PULL_WORKFLOW_MESSAGES tasks take them in order, each once",
    responses={
        202: {"description": "`{id, delivered}`: queued; `delivered` when a waiting task took it at once"},
        404: refusal("No such run"),
        409: refusal("The run is not running"),
        413: refusal(
            f"The message is larger than {MAX_MESSAGE_BYTES} bytes of JSON, or the namespace's payload limit: "
            "{field, size, limit, limitSource}"
        ),
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
    outcome = await runs.send_message(svc.plane, actor_of(request), namespace, str(execution_id), payload)
    if not isinstance(outcome, runs.MessageQueued):
        raise error_of(outcome)
    return JSONResponse({"id": outcome.id, "delivered": outcome.delivered}, status_code=202)
