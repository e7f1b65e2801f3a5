"""TaskDefinitions, Semaphores and Quotas: parse the spec, store the
definition in PostgreSQL, report the outcome in `status`; forget it when the
object is deleted. The three share one shape, registered from `LIFECYCLES`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import kopf

from sluiceway.k8s.reconciling import (
    Lifecycle,
    context_of,
    parse,
    register_lifecycles,
    report_claim,
    retrying_outages,
    set_ready,
)
from sluiceway.model.quota import QuotaSpec
from sluiceway.model.resources import QUOTA, SEMAPHORE, TASK_DEFINITION
from sluiceway.model.semaphore import SemaphoreSpec
from sluiceway.model.taskdefinition import TaskDefinitionSpec
from sluiceway.store import definitions


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
            )
        set_ready(patch, body, context, True, "Stored", "quota is enforced")

    await retrying_outages(store())


async def _forget(
    memo: kopf.Memo, remove: Callable[[asyncpg.Connection, str, str], Awaitable[None]], namespace: str, name: str
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


LIFECYCLES = (
    Lifecycle(TASK_DEFINITION, reconcile_task_definition, delete_task_definition),
    Lifecycle(SEMAPHORE, reconcile_semaphore, delete_semaphore),
    Lifecycle(QUOTA, reconcile_quota, delete_quota),
)


def register_definitions(registry: kopf.OperatorRegistry) -> None:
    register_lifecycles(registry, LIFECYCLES)
