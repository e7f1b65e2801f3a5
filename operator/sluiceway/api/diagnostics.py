"""The answers to "why is my task not running?", from the API, never from the
database: queues and their depth, who polls them, semaphores, quotas, and the
ranked reasons for one run or task."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from sluiceway.api.access import Names
from sluiceway.api.errors import INVALID, ApiError, refusal
from sluiceway.api.guards import requires
from sluiceway.api.params import EXECUTION_ID, NAME, NAMESPACE, TASK_ID
from sluiceway.api.services import Services, services
from sluiceway.controls.why import Reason, explain, explain_task
from sluiceway.model.common import wire_time
from sluiceway.store import diagnostics

router = APIRouter(prefix="/v1/ns/{namespace}", tags=["diagnostics"], responses=INVALID)

# A run's `why` explains the gates of its first active tasks only: each costs a
# few queries, and a fan-out of thousands would make one request cost seconds
# of the database every other tenant shares. `activeTasks` says how many exist.
WHY_TASKS = 100


def _queue(q: diagnostics.Queue) -> dict[str, object]:
    return {
        "name": q.name,
        "ready": q.ready,
        "delayed": q.delayed,
        "inFlight": q.in_flight,
        "pollers": q.pollers,
        "lastPollTime": wire_time(q.last_poll),
    }


@router.get(
    "/queues",
    summary="Every queue: ready, delayed and in-flight tasks, and recent pollers",
    dependencies=[requires("list", "taskdefinitions")],
)
async def queues(namespace: NAMESPACE, svc: Services = Depends(services)) -> list[dict[str, object]]:
    async with svc.pool.acquire() as conn:
        return [_queue(q) for q in await diagnostics.queues(conn, namespace)]


@router.get(
    "/queues/workers", summary="Who polled which queue, and when", dependencies=[requires("list", "taskdefinitions")]
)
async def workers(namespace: NAMESPACE, svc: Services = Depends(services)) -> list[dict[str, object]]:
    async with svc.pool.acquire() as conn:
        return [
            {"queue": queue, "workerId": worker, "lastPollTime": wire_time(at)}
            for queue, worker, at in await diagnostics.workers(conn, namespace)
        ]


@router.get("/queues/{name}/depth", summary="One queue's depth", dependencies=[requires("list", "taskdefinitions")])
async def depth(namespace: NAMESPACE, name: NAME, svc: Services = Depends(services)) -> dict[str, object]:
    async with svc.pool.acquire() as conn:
        found = await diagnostics.queues(conn, namespace, name)
    return _queue(found[0] if found else diagnostics.Queue(name, 0, 0, 0, 0, None))


@router.get(
    "/semaphores",
    summary="Every semaphore: permits and how many are held",
    dependencies=[requires("get", "semaphores")],
)
async def semaphores(namespace: NAMESPACE, svc: Services = Depends(services)) -> list[dict[str, object]]:
    async with svc.pool.acquire() as conn:
        return [
            {"name": s.name, "permits": s.permits, "held": s.held}
            for s in await diagnostics.semaphores(conn, namespace)
        ]


@router.get(
    "/semaphores/{name}",
    summary="One semaphore and the tasks holding it",
    responses={404: refusal("No such semaphore")},
    dependencies=[requires("get", "semaphores", Names.PATH)],
)
async def semaphore(namespace: NAMESPACE, name: NAME, svc: Services = Depends(services)) -> dict[str, object]:
    async with svc.pool.acquire() as conn:
        found = await diagnostics.semaphores(conn, namespace, name)
        if not found:
            raise ApiError(404, "NOT_FOUND", f"no semaphore {name} in namespace {namespace}")
        holders = await diagnostics.holders(conn, namespace, name)
    return {
        "name": name,
        "permits": found[0].permits,
        "held": found[0].held,
        "holders": [
            {"taskId": h.task_id, "executionId": h.execution_id, "taskType": h.task_type, "since": wire_time(h.since)}
            for h in holders
        ],
    }


def _reasons(reasons: list[Reason]) -> list[dict[str, object]]:
    found = []
    for r in reasons:
        item: dict[str, object] = {"control": r.control, "message": r.message, "blocking": r.blocking}
        if r.task_id is not None:
            item.update(taskId=r.task_id, referenceName=r.ref)
        found.append(item)
    return found


@router.get(
    "/executions/{execution_id}/why",
    summary="Why is this run not further along?",
    operation_id="why_run",
    responses={404: refusal("No such run in this namespace")},
    dependencies=[requires("get", "workflowruns")],
)
async def why_run(
    namespace: NAMESPACE, execution_id: EXECUTION_ID, svc: Services = Depends(services)
) -> dict[str, object]:
    async with svc.pool.acquire() as conn:
        facts = await diagnostics.run_facts(conn, namespace, execution_id, svc.plane.policies, limit=WHY_TASKS)
    if facts is None:
        raise ApiError(404, "NOT_FOUND", f"no run {execution_id} in namespace {namespace}")
    return {
        "executionId": facts.execution_id,
        "workflow": facts.workflow,
        "status": "PAUSED" if facts.paused else facts.status,
        "awaitingAdmission": facts.awaiting_admission,
        "paused": facts.paused,
        "quarantined": facts.quarantine_reason is not None,
        "reasons": _reasons(explain(facts)),
        "activeTasks": facts.active_tasks,
        "explainedTasks": len(facts.tasks),
    }


@router.get(
    "/tasks/{task_id}/why",
    summary="Why is this task not running?",
    operation_id="why_task",
    responses={404: refusal("No such task in this namespace")},
    dependencies=[requires("get", "workflowruns")],
)
async def why_task(namespace: NAMESPACE, task_id: TASK_ID, svc: Services = Depends(services)) -> dict[str, object]:
    async with svc.pool.acquire() as conn:
        found = await diagnostics.run_and_ref_of_task(conn, namespace, task_id)
        facts = (
            await diagnostics.run_facts(conn, namespace, found[0], svc.plane.policies, ref=found[1]) if found else None
        )
    if facts is None:
        raise ApiError(404, "NOT_FOUND", f"no task {task_id} in namespace {namespace}")
    task = next((t for t in facts.tasks if t.task_id == str(task_id)), None)
    reasons = explain_task(task) if task else explain(facts)
    return {"taskId": str(task_id), "executionId": facts.execution_id, "reasons": _reasons(reasons)}
