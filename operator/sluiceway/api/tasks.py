"""The task protocol workers speak: poll (long-poll, batched), results
(batched), heartbeats. Every result and heartbeat carries the lease epoch; a stale one
is refused with 409 and changes nothing."""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Query, Response

from sluiceway.api.access import Names
from sluiceway.api.errors import INVALID, ApiError, refusal
from sluiceway.api.executions import log_page
from sluiceway.api.guards import Authorize, requires
from sluiceway.api.paging import DEFAULT_LIMIT, MAX_LIMIT, Order, decode_cursor, encode_cursor, invalid, run_id, several
from sluiceway.api.params import NAMESPACE, TASK_ID
from sluiceway.api.payloads import json_size, limit_of, too_large
from sluiceway.api.services import Services, services
from sluiceway.controls import attributes as attribute_rules
from sluiceway.controls.gates import GateHold
from sluiceway.controls.payloads import Oversized, oversized
from sluiceway.controls.policy import TaskPolicy
from sluiceway.model.common import ENGINE_NAME_PATTERN
from sluiceway.model.execution import (
    FieldError,
    Heartbeat,
    HeartbeatBatch,
    HeartbeatBatchResponse,
    ItemOutcome,
    LogLine,
    LogPage,
    NextLease,
    PollRequest,
    PollResponse,
    ResultBatch,
    ResultBatchResponse,
    ResultStatus,
    TaskPage,
    TaskResult,
    TaskStatus,
    TaskSummary,
    checked_items,
    sent_task_id,
)
from sluiceway.model.workflow import TaskType
from sluiceway.observability import metrics, tracing
from sluiceway.store import attributes, diagnostics, leasing, listing, logs, matching, results
from sluiceway.store.notifications import Notifications

DEFAULT_POLL_TIMEOUT = 30.0
# Even with no notification, a waiting poll re-checks this often, so a lost
# wake-up costs latency, never a stuck worker.
_RECHECK_SECONDS = 2.0
# How long idle polls of this process take one poll's "empty" for an ungated
# queue without asking the database again (a notification about the queue ends
# it at once): what a lost wake-up may cost, and what keeps idle pollers cheap.
_KNOWN_EMPTY_SECONDS = 10.0

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


async def _authorize_tasks(authorize: Authorize, svc: Services, namespace: str, task_ids: Iterable[str]) -> None:
    """`authorize` on the task types of these tasks of `namespace`, found with
    one query (none when authentication is off). Tasks that are not in the
    namespace need no right: the store refuses them (404) and changes nothing."""
    if not authorize.enforced:
        return
    async with svc.pool.acquire() as conn:
        types = await leasing.task_types_of(conn, namespace, list(task_ids))
    await authorize(types.values())


def _leased(lease: leasing.Lease) -> dict[str, object]:
    """The LeasedTask wire shape, built directly: polls are the hot path."""
    body = _wire(lease)
    if tracing.enabled():
        body["traceparent"] = tracing.traceparent(lease.execution_id, lease.task_id, lease.epoch)
    return body


def _wire(lease: leasing.Lease) -> dict[str, object]:
    return {
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


def _json(body: object, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


async def _lease_once(
    svc: Services, namespace: str, request: PollRequest, policies: dict[str, TaskPolicy]
) -> tuple[list[leasing.Lease], list[GateHold]]:
    started = time.perf_counter()
    leased: list[leasing.Lease] = []
    holds: list[GateHold] = []
    async with svc.pool.acquire() as conn:
        for task_type in request.task_types:
            remaining = request.count - len(leased)
            if remaining <= 0:
                break
            outcome = await leasing.lease(
                conn, namespace, task_type, request.worker_id, remaining, policies[task_type].gates
            )
            leased.extend(outcome.leases)
            holds.extend(outcome.holds)
        due = svc.polls_to_record(namespace, request.task_types, request.worker_id)
        if due:
            await leasing.record_polls(conn, due)
    metrics.LEASE_LATENCY.observe(time.perf_counter() - started)
    for lease in leased:
        metrics.TASKS_LEASED.labels(namespace, lease.task_type).inc()
    for hold in holds:
        metrics.GATE_HOLDS.labels(hold.gate.wire).inc()
    return leased, holds


def _count(namespace: str, leased: list[leasing.Lease], holds: list[GateHold]) -> None:
    for lease in leased:
        metrics.TASKS_LEASED.labels(namespace, lease.task_type).inc()
    for hold in holds:
        metrics.GATE_HOLDS.labels(hold.gate.wire).inc()


async def _hand_over(
    conn: Any, namespace: str, wanted: NextLease | None, policies: dict[str, TaskPolicy], released: list[str]
) -> list[leasing.Lease]:
    """The slots of capped or semaphore-gated types of `next` that `released`
    freed, handed over without the gates' locks (leasing.hand_over): most
    requests then take no lock at all, and none waits for another's commit."""
    if wanted is None or not released:
        return []
    gates = {t: (n, policies[t].gates) for t, n in wanted.counts.items()}
    return await leasing.hand_over(conn, namespace, wanted.worker_id, gates, released)


async def _lease_next(
    conn: Any, namespace: str, wanted: NextLease, policies: dict[str, TaskPolicy], handed: list[leasing.Lease]
) -> list[leasing.Lease]:
    """The `next` of a result batch beyond what was `handed` over (_hand_over),
    in its transaction, never waiting: a gated type whose locks another
    transaction holds (leasing.try_lock_gates) gets nothing here, and the
    worker's poll leases it. Waiting would hold this commit, and every slot
    it hands over, back until the other one commits."""
    started = time.perf_counter()
    leased = list(handed)
    taken = Counter(lease.task_type for lease in handed)
    counts = {t: n - taken[t] for t, n in wanted.counts.items() if n > taken[t]}
    gated = {t: policies[t].gates for t in counts if policies[t].gates.any()}
    if gated:
        locked = await leasing.try_lock_gates(conn, namespace, gated)
        counts = {t: n for t, n in counts.items() if t not in gated or t in locked}
    holds: list[GateHold] = []
    for task_type, count in counts.items():
        outcome = await leasing.lease(conn, namespace, task_type, wanted.worker_id, count, policies[task_type].gates)
        leased.extend(outcome.leases)
        holds.extend(outcome.holds)
    metrics.LEASE_LATENCY.observe(time.perf_counter() - started)
    _count(namespace, leased, holds)
    return leased


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
    async with svc.pool.acquire() as conn:
        policies = await svc.policies.of(conn, namespace, request.task_types)
    ceiling = max(p.timeouts.poll_timeout for p in policies.values())
    timeout = min(
        request.poll_timeout_seconds if request.poll_timeout_seconds is not None else DEFAULT_POLL_TIMEOUT, ceiling
    )
    wake_keys = list(request.task_types) + sorted({f"@sem:{s}" for p in policies.values() for s in p.gates.semaphores})
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    notifications = svc.notifications
    # Ungated queues an idle poll of this process found empty are not asked again (see _KNOWN_EMPTY_SECONDS).
    shared = notifications is not None and not any(p.gates.any() for p in policies.values())
    leased: list[leasing.Lease]
    holds: list[GateHold]
    while True:
        mark = notifications.mark(namespace, wake_keys) if notifications is not None else None
        empty_for = notifications.empty_for(namespace, request.task_types) if shared and notifications else None
        known_empty = empty_for is not None
        if empty_for is not None:
            leased, holds = [], []
            await _record_idle_poll(svc, namespace, request)
        else:
            leased, holds = await _lease_once(svc, namespace, request, policies)
            if leased and shared and notifications is not None:
                notifications.forget(namespace, request.task_types)
        remaining = deadline - loop.time()
        if leased or remaining <= 0:
            return _json({"tasks": [_leased(lease) for lease in leased]})
        wait = min(remaining, _RECHECK_SECONDS, empty_for if empty_for is not None else _RECHECK_SECONDS)
        reopening = [h.retry_in for h in holds if h.retry_in is not None]
        if reopening:
            wait = min(wait, max(min(reopening), 0.01))
        if not holds and not known_empty:
            async with svc.pool.acquire() as conn:
                until = await leasing.seconds_until_available(conn, namespace, request.task_types)
            if until is not None and until > 0:
                wait = min(wait, until)
            if shared and notifications is not None and mark is not None and (until is None or until > 0):
                seconds = _KNOWN_EMPTY_SECONDS if until is None else min(until, _KNOWN_EMPTY_SECONDS)
                notifications.note_empty(namespace, wake_keys, mark, seconds)
        if notifications is None:
            await asyncio.sleep(min(wait, 0.2))
        elif shared and svc.offers is not None:
            matched = await _wait_offering(svc.offers, notifications, namespace, request, wake_keys, wait, mark)
            if matched:
                _count(namespace, matched, [])
                metrics.TASKS_MATCHED.labels(namespace).inc(len(matched))
                notifications.forget(namespace, request.task_types)
                return _json({"tasks": [_leased(lease) for lease in matched]})
        else:
            await notifications.wait_ready(namespace, wake_keys, wait, mark)


async def _wait_offering(
    offers: matching.Offers,
    notifications: Notifications,
    namespace: str,
    request: PollRequest,
    wake_keys: list[str],
    wait: float,
    mark: tuple[int, ...] | None,
) -> list[leasing.Lease]:
    """Wait as an offer (store.matching): the decider may lease this poll
    the tasks it schedules in its own transaction. The leases it got, once
    that committed; none when it was not claimed, or the claim rolled back."""
    offer = matching.Offer(namespace, tuple(request.task_types), request.worker_id, request.count)
    with offers.standing(offer):
        await notifications.wait_ready(namespace, wake_keys, wait, mark, event=offer.wake)
    # Claimed (the poll's own time may have run out meanwhile): the claiming
    # transaction is under way, and its leases are this poll's to answer with.
    return [] if offer.claim is None else await offer.claim


async def _record_idle_poll(svc: Services, namespace: str, request: PollRequest) -> None:
    """The bookkeeping of a poll that did not need to ask for tasks."""
    due = svc.polls_to_record(namespace, request.task_types, request.worker_id)
    if due:
        async with svc.pool.acquire() as conn:
            await leasing.record_polls(conn, due)


# A result's verdict on the wire: its status code, and the error code of a refusal.
_STATUS = {results.Verdict.APPLIED: 200, results.Verdict.NO_SUCH_TASK: 404, results.Verdict.NOT_LEASED: 409}
_ERROR = {results.Verdict.NO_SUCH_TASK: "NOT_FOUND", results.Verdict.NOT_LEASED: "STALE_LEASE"}


def _within_cap(lines: Sequence[LogLine], cap: int) -> Sequence[LogLine]:
    """The lines of one item the store could keep (and the one that crosses
    the cap, so it marks the log truncated): a request never makes the store
    weigh more than each task may keep."""
    total = 0
    for index, line in enumerate(lines):
        total += len(line.message) + logs.LINE_OVERHEAD
        if total > cap:
            return lines[: index + 1]
    return lines


async def _store_logs(svc: Services, namespace: str, items: Sequence[TaskResult | Heartbeat]) -> None:
    """Logs go in before the result that ends their task, so whoever sees the
    task end can read all it logged."""
    shipped = [(item.task_id, _within_cap(item.logs, svc.log_cap_bytes)) for item in items if item.logs]
    if shipped:
        async with svc.pool.acquire() as conn:
            await logs.append(conn, namespace, shipped, svc.log_cap_bytes)


Upserts = dict[str, tuple[uuid.UUID, datetime.datetime, list[attribute_rules.Attribute]]]


async def _checked_attributes(
    svc: Services, namespace: str, items: list[TaskResult | ItemOutcome]
) -> tuple[list[TaskResult | ItemOutcome], Upserts]:
    """Each result whose attribute upserts fit its run's declarations, with
    the upserts; the others become 422 outcomes naming the attribute, and
    change nothing (as any invalid item)."""
    wanted = [r for r in items if isinstance(r, TaskResult) and r.search_attributes]
    if not wanted:
        return items, {}
    async with svc.pool.acquire() as conn:
        runs = await attributes.of_tasks(conn, namespace, [uuid.UUID(r.task_id) for r in wanted])
    refused: dict[str, ItemOutcome] = {}
    upserts: Upserts = {}
    for result in wanted:
        found = runs.get(uuid.UUID(result.task_id))
        if found is None:
            continue  # an unknown task: the store answers 404 for it
        checked = attribute_rules.upserted(found[2], result.search_attributes)
        if checked.problems:
            fields = [FieldError(field=p.field, message=p.message) for p in checked.problems]
            error = "; ".join(str(p) for p in checked.problems)
            refused[result.task_id] = ItemOutcome(task_id=result.task_id, code=422, error=error, fields=fields)
        else:
            upserts[result.task_id] = (found[0], found[1], list(checked.attributes.values()))
    return [refused.get(i.task_id, i) if isinstance(i, TaskResult) else i for i in items], upserts


async def _bounded(
    svc: Services, namespace: str, batch: list[TaskResult], upserts: Upserts
) -> tuple[list[TaskResult], dict[str, Oversized]]:
    """The results to apply: as sent, except those whose output is over the
    namespace's payload limit, which fail their task terminally with a reason
    naming the limit (an output is never truncated, nor its upserts kept)."""
    if not batch:
        return batch, {}
    limit = await limit_of(svc, namespace)
    bounded: list[TaskResult] = []
    over: dict[str, Oversized] = {}
    for result in batch:
        found = oversized("output", json_size(result.output), limit)
        if found is None:
            bounded.append(result)
            continue
        over[result.task_id] = found
        upserts.pop(result.task_id, None)
        failed: dict[str, object] = {
            "status": ResultStatus.FAILED_WITH_TERMINAL_ERROR,
            "output": {},
            "reason": found.message,
            "retry_after_seconds": None,
            "retry_kind": None,
            "callback_after_seconds": None,
            "search_attributes": {},
        }
        bounded.append(result.model_copy(update=failed))  # its logs still go in
    return bounded, over


async def _apply(
    svc: Services,
    namespace: str,
    batch: list[TaskResult],
    upserts: Upserts | None = None,
    wanted: NextLease | None = None,
) -> tuple[dict[str, results.Outcome], list[leasing.Lease]]:
    """Apply the results and lease what `wanted` asks for, in one transaction:
    one commit, and the slots the results free are taken again (by the worker
    that freed them) before anyone is woken for them."""
    started = time.perf_counter()
    refilled = list(wanted.counts) if wanted is not None else []
    # Inline, the runs these results queue are decided before `next` is leased:
    # a chain's next task, scheduled here, goes back in this very answer.
    queued = results.Queued() if svc.decides_inline else None
    async with svc.pool.acquire() as conn, svc.inline_decisions() as inline, conn.transaction():
        attempts = await diagnostics.attempts(conn, namespace, [r.task_id for r in batch]) if tracing.enabled() else {}
        policies = await svc.policies.of(conn, namespace, list(wanted.counts)) if wanted is not None else {}
        handing = _handing(svc, wanted, policies) if batch else []
        outcomes = (
            await results.apply_results(conn, namespace, batch, refilled, queued=queued, handing=handing)
            if batch
            else {}
        )
        for task_id, (run, created_at, found) in (upserts or {}).items():
            if outcomes[task_id].applied:  # with the result that carried them, fenced by the same epoch
                await attributes.write(conn, run, namespace, created_at, found)
        # The freed gated slots pass on before the runs are decided: they would sit empty meanwhile.
        handed = await _hand_over(conn, namespace, wanted, policies, _released(batch, outcomes) if handing else [])
        if queued is not None:  # the tasks of `next`'s types go back in this answer, not to waiting polls
            await inline.decide(conn, queued.alone, [(namespace, name) for name in refilled])
        leased = await _lease_next(conn, namespace, wanted, policies, handed) if wanted is not None else []
    metrics.COMPLETE_LATENCY.observe(time.perf_counter() - started)
    left = bool(queued.busy) if queued is not None else any(o.applied for o in outcomes.values())
    await svc.committed(inline.decided, left)
    for result in batch:
        outcome = outcomes[result.task_id]
        label = result.status.value if outcome.applied else f"refused_{_STATUS[outcome.verdict]}"
        metrics.RESULTS.labels(label).inc()
        attempt = attempts.get(result.task_id)
        if outcome.applied and attempt is not None and attempt.epoch == result.epoch:
            tracing.record_attempt(
                attempt.execution_id,
                result.task_id,
                result.epoch,
                namespace,
                attempt.task_type,
                result.status.value,
                attempt.leased_at,
            )
    return outcomes, leased


def _handing(svc: Services, wanted: NextLease | None, policies: dict[str, TaskPolicy]) -> list[str]:
    """The types of `next` whose freed slots (and permits) are handed over
    (leasing.hand_over), which also wakes pollers for the permits it does not hand over."""
    if wanted is None or not svc.gate_handover:
        return []
    return [t for t in wanted.counts if leasing.hands_over(policies[t].gates)]


def _released(batch: list[TaskResult], outcomes: dict[str, results.Outcome]) -> list[str]:
    """The tasks these applied results took out of IN_PROGRESS (all but progress reports)."""
    return [
        r.task_id
        for r in batch
        if outcomes[r.task_id].applied
        and not (r.status is ResultStatus.IN_PROGRESS and r.callback_after_seconds is None)
    ]


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
    await _authorize_tasks(authorize, svc, namespace, [r.task_id for r in checked if isinstance(r, TaskResult)])
    checked, upserts = await _checked_attributes(svc, namespace, checked)
    valid, over = await _bounded(svc, namespace, [item for item in checked if isinstance(item, TaskResult)], upserts)
    await _store_logs(svc, namespace, valid)
    outcomes, leased = await _apply(svc, namespace, valid, upserts, batch.next) if valid or batch.next else ({}, [])
    items = [_outcome(raw, item, outcomes, over) for raw, item in zip(batch.results, checked, strict=True)]
    body: dict[str, object] = {"results": items}
    if batch.next is not None:
        body["tasks"] = [_leased(lease) for lease in leased]
    return _json(body, 200 if all(i["code"] == 200 for i in items) else 207)


def _outcome(
    raw: Any, item: TaskResult | ItemOutcome, outcomes: dict[str, results.Outcome], over: dict[str, Oversized]
) -> dict[str, object]:
    if isinstance(item, ItemOutcome):
        return item.to_wire() | {"taskId": item.task_id}
    outcome = outcomes[item.task_id]
    answer: dict[str, object] = {"taskId": sent_task_id(raw), "code": _STATUS[outcome.verdict]}
    if outcome.error is not None:
        answer["error"] = outcome.error
    elif item.task_id in over:  # applied as a failure: say why
        answer |= {"code": 413, "error": over[item.task_id].message}
    return answer


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
    result: TaskResult,
    authorize: MAY_REPORT,
    svc: Services = Depends(services),
) -> dict[str, str]:
    if result.task_id != str(task_id):
        raise ApiError(
            422,
            "INVALID_REQUEST",
            f"taskId: {result.task_id} does not match the path's {task_id}",
            fields=[{"field": "taskId", "message": "does not match the path's task id"}],
        )
    await _authorize_tasks(authorize, svc, namespace, [result.task_id])
    [checked], upserts = await _checked_attributes(svc, namespace, [result])
    if isinstance(checked, ItemOutcome):
        raise ApiError(422, "INVALID_REQUEST", checked.error or "", fields=[f.to_wire() for f in checked.fields or []])
    [bounded], over = await _bounded(svc, namespace, [result], upserts)
    await _store_logs(svc, namespace, [bounded])
    outcome = (await _apply(svc, namespace, [bounded], upserts))[0][result.task_id]
    if not outcome.applied:
        raise ApiError(_STATUS[outcome.verdict], _ERROR[outcome.verdict], outcome.error or "")
    if result.task_id in over:
        raise too_large(over[result.task_id])
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
    await _store_logs(svc, namespace, beats)
    alive: set[str] = set()
    if beats:
        async with svc.pool.acquire() as conn:
            alive = await leasing.heartbeat(conn, namespace, [(b.task_id, b.epoch) for b in beats])
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
    await _store_logs(svc, namespace, [beat.model_copy(update={"task_id": str(task_id)})])
    async with svc.pool.acquire() as conn:
        alive = await leasing.heartbeat(conn, namespace, [(str(task_id), beat.epoch)])
    if str(task_id) not in alive:
        raise ApiError(409, "STALE_LEASE", f"task {task_id} is not leased under epoch {beat.epoch}")
    return {"status": "alive"}


# -- reading tasks -----------------------------------------------------------------


def _time(value: datetime.datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


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
    status: Annotated[list[str] | None, Query(description="Repeat or comma-separate: FAILED,TIMED_OUT")] = None,
    task_type: Annotated[str | None, Query(alias="taskType", pattern=ENGINE_NAME_PATTERN, max_length=253)] = None,
    worker_id: Annotated[str | None, Query(alias="workerId", min_length=1, max_length=256)] = None,
    execution_id: Annotated[str | None, Query(alias="executionId")] = None,
    reference_name: Annotated[str | None, Query(alias="referenceName", max_length=140)] = None,
    type: Annotated[TaskType | None, Query(description="The engine's task type: HUMAN, SIMPLE, HTTP, ...")] = None,
    workflow: Annotated[
        str | None, Query(pattern=ENGINE_NAME_PATTERN, max_length=253, description="Of runs of this workflow")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
    order: Order = Order.NEWEST,
    svc: Services = Depends(services),
) -> TaskPage:
    """Every attempt of every task, filtered (AND) and paged as runs are.
    The HUMAN inbox is `type=HUMAN&status=IN_PROGRESS` (`order=oldest`: the
    longest waiting first); each item carries the task's input."""
    for field, value in (("workerId", worker_id), ("referenceName", reference_name)):
        if value is not None and "\x00" in value:
            raise invalid(field, "must not contain a NUL character")
    after = decode_cursor(cursor, order) if cursor is not None else None
    found = listing.TaskFilter(
        statuses=several("status", status, TaskStatus),
        task_type=task_type,
        worker_id=worker_id,
        execution_id=run_id("executionId", execution_id),
        reference_name=reference_name,
        type=type.value if type is not None else None,
        workflow=workflow,
    )
    async with svc.pool.acquire() as conn:
        page = await listing.tasks(conn, namespace, found, after=after, limit=limit, ascending=order is Order.OLDEST)
    return TaskPage(
        items=[
            TaskSummary(
                task_id=t.id,
                execution_id=t.execution_id,
                reference_name=t.ref,
                task_type=t.name,
                type=t.type,
                status=t.status,
                attempt=t.attempt,
                worker_id=t.worker_id,
                scheduled_at=_time(t.created_at) or "",
                started_at=_time(t.leased_at),
                ended_at=_time(t.ended_at),
                reason=t.reason,
                workflow_name=t.workflow_name,
                input=t.input or {},
                completed_by=t.completed_by,
            )
            for t in page.rows
        ],
        next_cursor=encode_cursor(page.next, order) if page.next is not None else None,
    )


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
        found = await logs.read(conn, run, after=after, limit=limit, task_id=task_id, cap=svc.log_cap_bytes)
    return log_page(found, after)
