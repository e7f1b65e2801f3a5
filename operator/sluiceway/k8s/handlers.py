"""The kopf handlers: parse the spec with the same models the CRD was generated
from, write the definition to PostgreSQL, and report the outcome in `status`.

Handlers stay thin: everything they decide is in the store or the models. They
never write `spec`; the only metadata they touch is kopf's own bookkeeping and
the finalizer, so a GitOps tool re-applying the same manifest sees no change.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import asyncpg
import kopf
from pydantic import ValidationError

from sluiceway.engine.graph import problems
from sluiceway.k8s.conditions import not_ready, ready, with_condition
from sluiceway.k8s.events import EventRecorder
from sluiceway.k8s.runs import timestamp
from sluiceway.k8s.validation import describe
from sluiceway.model import GROUP, VERSION
from sluiceway.model.common import Spec
from sluiceway.model.execution import RunStatus
from sluiceway.model.quota import QuotaSpec
from sluiceway.model.resources import QUOTA, SEMAPHORE, TASK_DEFINITION, WORKFLOW, WORKFLOW_RUN, ResourceKind
from sluiceway.model.semaphore import SemaphoreSpec
from sluiceway.model.taskdefinition import TaskDefinitionSpec
from sluiceway.model.workflow import ActiveRunsPolicy, WorkflowSpec
from sluiceway.model.workflowrun import RunPhase, WorkflowRunSpec
from sluiceway.store import definitions, diagnostics, executions, workflows

log = logging.getLogger(__name__)

S = TypeVar("S", bound=Spec)
_MAX_PROBLEMS = 20  # a condition message is for people; the first twenty say enough


@dataclass
class Context:
    """What the handlers need, passed to kopf as the operator's memo."""

    pool: asyncpg.Pool
    clock: Callable[[], datetime.datetime]
    events: EventRecorder | None = None

    def now(self) -> str:
        return self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")


def _context(memo: Any) -> Context:
    context: Context = memo.context
    return context


def _set_ready(patch: kopf.Patch, body: Any, context: Context, ok: bool, reason: str, message: str) -> None:
    meta, status = body["metadata"], body.get("status", {})
    generation = int(meta.get("generation", 0))
    condition = (ready if ok else not_ready)(reason, message, generation)
    before = next((c for c in status.get("conditions", []) if c.get("type") == "Ready"), None)
    if context.events is not None and (
        before is None or before.get("status") != condition.status.value or (not ok and before.get("reason") != reason)
    ):
        context.events.record(
            body["kind"],
            meta["namespace"],
            meta["name"],
            meta.get("uid", ""),
            not ok,
            "Ready" if ok else reason,
            message,
        )
    patch.status["observedGeneration"] = generation
    patch.status["conditions"] = with_condition(status.get("conditions"), condition, context.now())


def _report_claim(
    patch: kopf.Patch, body: Any, context: Context, claim: definitions.Claim, what: str, ready_message: str
) -> None:
    """Ready when this object owns its engine name; NameConflict naming the owner when another does."""
    if claim.is_ours(body["metadata"]["name"]):
        _set_ready(patch, body, context, True, "Stored", f"{what} {ready_message}")
    else:
        _set_ready(
            patch, body, context, False, "NameConflict", f"{what} is already defined by {body['kind']} {claim.owner}"
        )


def _parse(model: type[S], body: Any, patch: kopf.Patch, context: Context) -> S | None:
    """The parsed spec, or None after reporting why it is invalid."""
    try:
        return model.model_validate(dict(body.get("spec", {})))
    except ValidationError as error:
        _set_ready(patch, body, context, False, "InvalidSpec", describe(error))
        return None


async def _guard(action: Awaitable[None]) -> None:
    """Turn a database outage into a retry instead of a failed handler."""
    try:
        await action
    except (OSError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError) as error:
        raise kopf.TemporaryError(f"PostgreSQL unavailable: {error}", delay=5) from error


def _reconciles(registry: kopf.OperatorRegistry, kind: ResourceKind) -> Callable[[Any], Any]:
    """Register one function for resume, create and spec changes of `kind`."""

    def decorate(fn: Any) -> Any:
        for on in (kopf.on.resume, kopf.on.create):
            fn = on(GROUP, VERSION, kind.plural, registry=registry)(fn)
        return kopf.on.update(GROUP, VERSION, kind.plural, field="spec", registry=registry)(fn)

    return decorate


def _starts(registry: kopf.OperatorRegistry, kind: ResourceKind) -> Callable[[Any], Any]:
    """Register one function for resume and create (spec changes are refused by the CRD)."""

    def decorate(fn: Any) -> Any:
        for on in (kopf.on.resume, kopf.on.create):
            fn = on(GROUP, VERSION, kind.plural, registry=registry)(fn)
        return fn

    return decorate


def _deletes(registry: kopf.OperatorRegistry, kind: ResourceKind) -> Callable[[Any], Any]:
    decorator: Callable[[Any], Any] = kopf.on.delete(GROUP, VERSION, kind.plural, registry=registry)
    return decorator


def register(registry: kopf.OperatorRegistry) -> None:
    """Attach every definition handler to `registry`."""

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        # In a pod: the ServiceAccount token. Elsewhere: $KUBECONFIG.
        return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)

    @_reconciles(registry, TASK_DEFINITION)
    async def reconcile_task_definition(
        body: Any, spec: Any, meta: Any, status: Any, namespace: str, name: str, patch: kopf.Patch, memo: Any, **_: Any
    ) -> None:
        context = _context(memo)
        parsed = _parse(TaskDefinitionSpec, body, patch, context)
        if parsed is None:
            return
        task_type = parsed.name or name

        async def store() -> None:
            async with context.pool.acquire() as conn:
                claim = await definitions.upsert_task_definition(
                    conn, namespace, task_type, name, int(meta["generation"]), parsed.to_wire()
                )
            patch.status["taskType"] = task_type
            _report_claim(patch, body, context, claim, f"task type {task_type}", "is active")

        await _guard(store())

    @_deletes(registry, TASK_DEFINITION)
    async def delete_task_definition(namespace: str, name: str, memo: Any, **_: Any) -> None:
        context = _context(memo)
        await _guard(_delete(context, definitions.delete_task_definition, namespace, name))

    @_reconciles(registry, SEMAPHORE)
    async def reconcile_semaphore(
        body: Any, spec: Any, meta: Any, status: Any, namespace: str, name: str, patch: kopf.Patch, memo: Any, **_: Any
    ) -> None:
        context = _context(memo)
        parsed = _parse(SemaphoreSpec, body, patch, context)
        if parsed is None:
            return
        semaphore = parsed.name or name

        async def store() -> None:
            async with context.pool.acquire() as conn:
                claim = await definitions.upsert_semaphore(
                    conn, namespace, semaphore, name, int(meta["generation"]), parsed.permits
                )
            patch.status["semaphoreName"] = semaphore
            patch.status["permits"] = parsed.permits
            _report_claim(patch, body, context, claim, f"semaphore {semaphore}", f"has {parsed.permits} permits")

        await _guard(store())

    @_deletes(registry, SEMAPHORE)
    async def delete_semaphore(namespace: str, name: str, memo: Any, **_: Any) -> None:
        await _guard(_delete(_context(memo), definitions.delete_semaphore, namespace, name))

    @_reconciles(registry, QUOTA)
    async def reconcile_quota(
        body: Any, spec: Any, meta: Any, status: Any, namespace: str, name: str, patch: kopf.Patch, memo: Any, **_: Any
    ) -> None:
        context = _context(memo)
        parsed = _parse(QuotaSpec, body, patch, context)
        if parsed is None:
            return

        async def store() -> None:
            async with context.pool.acquire() as conn:
                await definitions.upsert_quota(
                    conn,
                    namespace,
                    name,
                    int(meta["generation"]),
                    parsed.max_concurrent_executions,
                    parsed.max_executions_per_minute,
                    parsed.max_workflow_definitions,
                    parsed.max_schedules,
                )
            _set_ready(patch, body, context, True, "Stored", "quota is enforced")

        await _guard(store())

    @_deletes(registry, QUOTA)
    async def delete_quota(namespace: str, name: str, memo: Any, **_: Any) -> None:
        await _guard(_delete(_context(memo), definitions.delete_quota, namespace, name))


async def _delete(
    context: Context, remove: Callable[[asyncpg.Connection, str, str], Awaitable[None]], namespace: str, name: str
) -> None:
    async with context.pool.acquire() as conn:
        await remove(conn, namespace, name)


def register_workflows(registry: kopf.OperatorRegistry) -> None:
    """Workflows (versioned definitions) and WorkflowRuns (the kubectl front door to a run)."""

    @_reconciles(registry, WORKFLOW)
    async def reconcile_workflow(
        body: Any, spec: Any, meta: Any, status: Any, namespace: str, name: str, patch: kopf.Patch, memo: Any, **_: Any
    ) -> None:
        context = _context(memo)
        parsed = _parse(WorkflowSpec, body, patch, context)
        if parsed is None:
            return
        found = problems(parsed)
        if found:
            more = f"; and {len(found) - _MAX_PROBLEMS} more" if len(found) > _MAX_PROBLEMS else ""
            _set_ready(patch, body, context, False, "InvalidSpec", "; ".join(found[:_MAX_PROBLEMS]) + more)
            return
        engine_name = parsed.name or name

        async def store() -> None:
            async with context.pool.acquire() as conn:
                try:
                    claim, version = await workflows.upsert_workflow(
                        conn, namespace, engine_name, name, int(meta["generation"]), parsed.to_wire()
                    )
                except workflows.DefinitionQuotaExceeded as refused:
                    _set_ready(patch, body, context, False, "QuotaExceeded", str(refused))
                    return
            patch.status["workflowName"] = engine_name
            if claim.is_ours(name):
                patch.status["version"] = version
            _report_claim(
                patch, body, context, claim, f"workflow {engine_name}", f"starts new runs on version {version}"
            )

        await _guard(store())

    @_deletes(registry, WORKFLOW)
    async def delete_workflow(spec: Any, namespace: str, name: str, memo: Any, logger: Any, **_: Any) -> None:
        context = _context(memo)
        engine_name = spec.get("name") or name
        policy = ActiveRunsPolicy(spec.get("activeRunsPolicy", ActiveRunsPolicy.FINISH.value))

        async def remove() -> None:
            async with context.pool.acquire() as conn, conn.transaction():
                await workflows.delete_workflow(conn, namespace, name)
                if policy is ActiveRunsPolicy.TERMINATE:
                    stopped = await executions.terminate_all(
                        conn, namespace, engine_name, f"Workflow {name} was deleted (activeRunsPolicy Terminate)"
                    )
                    logger.info(f"terminating {stopped} active runs of {engine_name}")

        await _guard(remove())

    @_starts(registry, WORKFLOW_RUN)
    async def start_workflow_run(
        body: Any,
        spec: Any,
        meta: Any,
        status: Any,
        namespace: str,
        name: str,
        uid: str,
        patch: kopf.Patch,
        memo: Any,
        **_: Any,
    ) -> None:
        context = _context(memo)
        if status.get("executionId") or status.get("phase") == RunPhase.REFUSED.value:
            return  # already started (or refused): a WorkflowRun starts one run, once
        parsed = _parse(WorkflowRunSpec, body, patch, context)
        if parsed is None:
            patch.status["phase"] = RunPhase.FAILED.value
            return

        async def start() -> None:
            async with context.pool.acquire() as conn, conn.transaction():
                outcome = await executions.start_run(
                    conn,
                    namespace,
                    parsed.workflow,
                    parsed.version,
                    parsed.input,
                    correlation_id=parsed.correlation_id,
                    run_id=uid,
                    resource_name=name,
                )
            patch.status["observedGeneration"] = int(meta.get("generation", 1))
            if isinstance(outcome, executions.WorkflowNotFound):
                patch.status["phase"] = RunPhase.PENDING.value
                patch.status["reasonForIncompletion"] = f"waiting: {outcome.message}"
                raise kopf.TemporaryError(outcome.message, delay=10)
            if isinstance(outcome, executions.Refused):
                patch.status.update(
                    {
                        "phase": RunPhase.REFUSED.value,
                        "control": outcome.control,
                        "reasonForIncompletion": outcome.message,
                        "refusal": outcome.body,
                    }
                )
                if context.events is not None:
                    context.events.record("WorkflowRun", namespace, name, uid, True, "Refused", outcome.message)
                return
            patch.status.update(
                {
                    "phase": RunPhase.RUNNING.value if not outcome.status.is_terminal() else outcome.status.value,
                    "executionId": outcome.id,
                    "awaitingAdmission": outcome.awaiting_admission,
                    "control": "rateLimitConfig" if outcome.awaiting_admission else None,
                    "startTime": timestamp(context.clock()),
                    "reasonForIncompletion": None,
                }
            )

        await _guard(start())

    @_deletes(registry, WORKFLOW_RUN)
    async def delete_workflow_run(namespace: str, name: str, uid: str, status: Any, memo: Any, **_: Any) -> None:
        """Deleting a WorkflowRun ends its run: its permits and slots must not leak."""
        context = _context(memo)
        execution_id = status.get("executionId") or uid

        async def stop() -> None:
            async with context.pool.acquire() as conn, conn.transaction():
                run = await executions.get_run(conn, namespace, execution_id)
                if run is not None and run.status is RunStatus.RUNNING:
                    await executions.request_termination(conn, namespace, run.id, f"WorkflowRun {name} was deleted")

        await _guard(stop())


_STATUS_INTERVAL = 5.0


def _changed(patch: kopf.Patch, status: Any, values: dict[str, Any]) -> None:
    """Write only what changed: a re-applied manifest must not cause status churn."""
    for key, value in values.items():
        if status.get(key) != value:
            patch.status[key] = value


def _timer(registry: kopf.OperatorRegistry, kind: ResourceKind) -> Callable[[Any], Any]:
    decorator: Callable[[Any], Any] = kopf.timer(
        GROUP, VERSION, kind.plural, interval=_STATUS_INTERVAL, initial_delay=1.0, registry=registry
    )
    return decorator


def register_status_reports(registry: kopf.OperatorRegistry) -> None:
    """Periodic, change-only status: what each object governs, right now."""

    @_timer(registry, TASK_DEFINITION)
    async def report_task_definition(status: Any, namespace: str, patch: kopf.Patch, memo: Any, **_: Any) -> None:
        task_type = status.get("taskType")
        if not task_type:
            return
        async with _context(memo).pool.acquire() as conn:
            found = await diagnostics.queues(conn, namespace, task_type)
            pollers = [(w, at) for q, w, at in await diagnostics.workers(conn, namespace) if q == task_type]
        queue = found[0] if found else diagnostics.Queue(task_type, 0, 0, 0, 0, None)
        recent = sorted(pollers, key=lambda p: p[1], reverse=True)[:10]
        _changed(
            patch,
            status,
            {
                "ready": queue.ready,
                "inFlight": queue.in_flight,
                "delayed": queue.delayed,
                "pollers": [{"workerId": w, "lastPollTime": timestamp(at)} for w, at in recent],
            },
        )

    @_timer(registry, SEMAPHORE)
    async def report_semaphore(status: Any, namespace: str, patch: kopf.Patch, memo: Any, **_: Any) -> None:
        name = status.get("semaphoreName")
        if not name:
            return
        async with _context(memo).pool.acquire() as conn:
            found = await diagnostics.semaphores(conn, namespace, name)
            holders = await diagnostics.holders(conn, namespace, name, 10)
        if not found:
            return
        _changed(
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
                        "since": timestamp(h.since),
                    }
                    for h in holders
                ],
            },
        )

    @_timer(registry, QUOTA)
    async def report_quota(status: Any, namespace: str, patch: kopf.Patch, memo: Any, **_: Any) -> None:
        async with _context(memo).pool.acquire() as conn:
            used = await diagnostics.usage(conn, namespace)
        _changed(
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

    @_timer(registry, WORKFLOW)
    async def report_workflow(status: Any, namespace: str, patch: kopf.Patch, memo: Any, **_: Any) -> None:
        name = status.get("workflowName")
        if not name:
            return
        async with _context(memo).pool.acquire() as conn:
            active = await diagnostics.active_runs(conn, namespace, name)
        _changed(patch, status, {"activeRuns": active})
