"""TaskDefinitions, Semaphores, Quotas, Webhooks and Triggers: parse the spec, store
the definition in PostgreSQL, report the outcome in `status`; forget it when
the object is deleted. They share one shape, registered from `LIFECYCLES`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import kopf

from sluiceway.controls.advice import Kind
from sluiceway.k8s.conditions import with_condition
from sluiceway.k8s.reconciling import (
    Lifecycle,
    context_of,
    parse,
    register_lifecycles,
    report_advice,
    report_claim,
    retrying_outages,
    set_ready,
)
from sluiceway.model.common import Condition, ConditionStatus, identity_of
from sluiceway.model.quota import QuotaSpec
from sluiceway.model.resources import QUOTA, SEMAPHORE, TASK_DEFINITION, TRIGGER, WEBHOOK
from sluiceway.model.semaphore import SemaphoreSpec
from sluiceway.model.taskdefinition import RetryKind, TaskDefinitionSpec
from sluiceway.model.trigger import TriggerSpec
from sluiceway.model.webhook import WebhookSpec
from sluiceway.store import definitions, triggers, webhooks
from sluiceway.store.database import Connection


def retry_warning(spec: TaskDefinitionSpec) -> tuple[str, str] | None:
    """(reason, message) of what the retry policy does that its author may
    not expect; None when nothing."""
    if spec.retry_kind is RetryKind.INDEFINITE and not spec.schedule_to_close_timeout and not spec.time_budget_seconds:
        return (
            "IndefiniteWithoutDeadline",
            "retryKind indefinite without scheduleToCloseTimeout or timeBudgetSeconds: a failing task is "
            "retried forever",
        )
    if spec.time_budget_seconds and spec.retry_kind is not RetryKind.INDEFINITE:
        return "TimeBudgetIgnored", "timeBudgetSeconds applies to retryKind indefinite only; it is ignored"
    return None


def _report_warning(patch: kopf.Patch, body: kopf.Body, now: str, warning: tuple[str, str] | None) -> None:
    """A `Warning` condition (True with its reason, or False): the object is
    still Ready, and `kubectl describe` shows what to look at."""
    generation = int(body["metadata"].get("generation", 0))
    reason, message = warning or ("None", "the retry policy has a stopping condition")
    condition = Condition(
        type="Warning",
        status=ConditionStatus.TRUE if warning else ConditionStatus.FALSE,
        reason=reason,
        message=message,
        observed_generation=generation,
    )
    previous = patch.status.get("conditions") or body.get("status", {}).get("conditions")
    patch.status["conditions"] = with_condition(previous, condition, now)


async def reconcile_task_definition(
    body: kopf.Body, meta: kopf.Meta, namespace: str, name: str, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    context = context_of(memo)
    parsed = parse(TaskDefinitionSpec, body, patch, context)
    if parsed is None:
        return
    task_type = parsed.name or name

    async def store() -> None:
        async with context.pool.acquire() as conn:
            claim = await definitions.upsert_task_definition(
                conn, namespace, task_type, name, int(meta["generation"]), parsed.to_wire()
            )
        patch.status["taskType"] = task_type
        report_claim(patch, body, context, claim, f"task type {task_type}", "is active")
        warning = retry_warning(parsed)
        _report_warning(patch, body, context.now(), warning)
        report_advice(patch, body, context, Kind.TASK_DEFINITION, parsed)
        if warning is not None and context.events is not None:
            meta_ = body["metadata"]
            context.events.record("TaskDefinition", namespace, name, meta_.get("uid", ""), True, warning[0], warning[1])

    await retrying_outages(store())


async def reconcile_semaphore(
    body: kopf.Body, meta: kopf.Meta, namespace: str, name: str, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    context = context_of(memo)
    parsed = parse(SemaphoreSpec, body, patch, context)
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
        report_claim(patch, body, context, claim, f"semaphore {semaphore}", f"has {parsed.permits} permits")

    await retrying_outages(store())


async def reconcile_quota(
    body: kopf.Body, meta: kopf.Meta, namespace: str, name: str, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    context = context_of(memo)
    parsed = parse(QuotaSpec, body, patch, context)
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
                parsed.max_payload_bytes,
                tuple(parsed.allowed_egress),
                parsed.dispatch_weight,
            )
        set_ready(patch, body, context, True, "Stored", "quota is enforced")
        report_advice(patch, body, context, Kind.QUOTA, parsed)

    await retrying_outages(store())


async def reconcile_webhook(
    body: kopf.Body, meta: kopf.Meta, namespace: str, name: str, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    context = context_of(memo)
    parsed = parse(WebhookSpec, body, patch, context)
    if parsed is None:
        return
    endpoint = parsed.name or name

    async def store() -> None:
        async with context.pool.acquire() as conn:
            claim = await webhooks.upsert(conn, namespace, endpoint, name, int(meta["generation"]), parsed.to_wire())
        patch.status["webhookName"] = endpoint
        patch.status["path"] = f"v1/ns/{namespace}/webhooks/{endpoint}"
        report_claim(patch, body, context, claim, f"webhook {endpoint}", "accepts calls")

    await retrying_outages(store())


async def reconcile_trigger(
    body: kopf.Body, meta: kopf.Meta, namespace: str, name: str, uid: str, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    """A spec whose CEL does not compile is InvalidSpec (the model compiles
    it), naming the field, and nothing is stored: events go on to the others."""
    context = context_of(memo)
    parsed = parse(TriggerSpec, body, patch, context)
    if parsed is None:
        return

    async def store() -> None:
        async with context.pool.acquire() as conn:
            # A restored Trigger keeps its dedup keys, hashed with its uid (docs/backup.md).
            await triggers.upsert(conn, namespace, name, identity_of(meta, uid), int(meta["generation"]), parsed)
        patch.status["event"] = parsed.event
        patch.status["workflow"] = parsed.workflow
        set_ready(patch, body, context, True, "Listening", f"starts workflow {parsed.workflow} on event {parsed.event}")

    await retrying_outages(store())


async def _forget(
    memo: kopf.Memo, remove: Callable[[Connection, str, str], Awaitable[None]], namespace: str, name: str
) -> None:
    async def run() -> None:
        async with context_of(memo).pool.acquire() as conn:
            await remove(conn, namespace, name)

    await retrying_outages(run())


async def delete_task_definition(namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    await _forget(memo, definitions.delete_task_definition, namespace, name)


async def delete_semaphore(namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    await _forget(memo, definitions.delete_semaphore, namespace, name)


async def delete_quota(namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    await _forget(memo, definitions.delete_quota, namespace, name)


async def delete_webhook(namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    await _forget(memo, webhooks.delete, namespace, name)


async def delete_trigger(namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    await _forget(memo, triggers.delete, namespace, name)


LIFECYCLES = (
    Lifecycle(TASK_DEFINITION, reconcile_task_definition, delete_task_definition),
    Lifecycle(SEMAPHORE, reconcile_semaphore, delete_semaphore),
    Lifecycle(QUOTA, reconcile_quota, delete_quota),
    Lifecycle(WEBHOOK, reconcile_webhook, delete_webhook),
    Lifecycle(TRIGGER, reconcile_trigger, delete_trigger),
)


def register_definitions(registry: kopf.OperatorRegistry) -> None:
    register_lifecycles(registry, LIFECYCLES)
