"""Rows for the definitions reconciled from custom resources: task
definitions, semaphores and quotas.

One resource owns one engine name. When two objects claim the same name (say,
`spec.name: charge` on two TaskDefinitions), the first keeps it and the second
is told who owns it, instead of silently overwriting the policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import asyncpg

from sluiceway.store.tenancy import rules_changed

# Written to on every definition change, so every replica drops its cache.
DEFINITIONS_CHANNEL = "sluiceway_definitions"
_NOTIFY = f"SELECT pg_notify('{DEFINITIONS_CHANNEL}', $1)"


@dataclass(frozen=True)
class Claim:
    """The outcome of writing a definition under an engine name."""

    owner: str  # resource_name of the object that holds the name

    def is_ours(self, resource_name: str) -> bool:
        return self.owner == resource_name


_RELEASE_OLD_TASK_NAME = """
DELETE FROM task_definitions WHERE namespace = $1 AND resource_name = $2 AND name <> $3
"""
_UPSERT_TASK_DEFINITION = """
INSERT INTO task_definitions (namespace, name, resource_name, generation, spec)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (namespace, name) DO UPDATE
   SET generation = EXCLUDED.generation, spec = EXCLUDED.spec, updated_at = now()
 WHERE task_definitions.resource_name = EXCLUDED.resource_name
RETURNING resource_name
"""
_TASK_NAME_OWNER = "SELECT resource_name FROM task_definitions WHERE namespace = $1 AND name = $2"
_DELETE_TASK_DEFINITION = "DELETE FROM task_definitions WHERE namespace = $1 AND resource_name = $2"
_GET_TASK_DEFINITION = """
SELECT name, resource_name, generation, spec FROM task_definitions WHERE namespace = $1 AND name = $2
"""


async def _claim(
    conn: asyncpg.Connection, release: str, upsert: str, owner: str, key: tuple[str, str, str], *values: Any
) -> Claim:
    namespace, name, resource_name = key
    async with conn.transaction():
        await conn.execute(_NOTIFY, namespace)
        await conn.execute(release, namespace, resource_name, name)
        row = await conn.fetchrow(upsert, namespace, name, resource_name, *values)
        if row is not None:
            return Claim(owner=row["resource_name"])
        holder = await conn.fetchval(owner, namespace, name)
        return Claim(owner=holder)


async def upsert_task_definition(
    conn: asyncpg.Connection,
    namespace: str,
    name: str,
    resource_name: str,
    generation: int,
    spec: dict[str, Any],
) -> Claim:
    return await _claim(
        conn,
        _RELEASE_OLD_TASK_NAME,
        _UPSERT_TASK_DEFINITION,
        _TASK_NAME_OWNER,
        (namespace, name, resource_name),
        generation,
        spec,
    )


async def delete_task_definition(conn: asyncpg.Connection, namespace: str, resource_name: str) -> None:
    async with conn.transaction():
        await conn.execute(_DELETE_TASK_DEFINITION, namespace, resource_name)
        await conn.execute(_NOTIFY, namespace)


@dataclass(frozen=True)
class StoredDefinition:
    name: str
    resource_name: str
    generation: int
    spec: dict[str, Any]


async def get_task_definition(conn: asyncpg.Connection, namespace: str, name: str) -> StoredDefinition | None:
    row = await conn.fetchrow(_GET_TASK_DEFINITION, namespace, name)
    return StoredDefinition(**dict(row)) if row else None


_RELEASE_OLD_SEMAPHORE_NAME = """
DELETE FROM semaphores WHERE namespace = $1 AND resource_name = $2 AND name <> $3
"""
_UPSERT_SEMAPHORE = """
INSERT INTO semaphores (namespace, name, resource_name, generation, permits)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (namespace, name) DO UPDATE
   SET generation = EXCLUDED.generation, permits = EXCLUDED.permits, updated_at = now()
 WHERE semaphores.resource_name = EXCLUDED.resource_name
RETURNING resource_name
"""
_SEMAPHORE_NAME_OWNER = "SELECT resource_name FROM semaphores WHERE namespace = $1 AND name = $2"
_DELETE_SEMAPHORE = "DELETE FROM semaphores WHERE namespace = $1 AND resource_name = $2"


async def upsert_semaphore(
    conn: asyncpg.Connection, namespace: str, name: str, resource_name: str, generation: int, permits: int
) -> Claim:
    return await _claim(
        conn,
        _RELEASE_OLD_SEMAPHORE_NAME,
        _UPSERT_SEMAPHORE,
        _SEMAPHORE_NAME_OWNER,
        (namespace, name, resource_name),
        generation,
        permits,
    )


async def delete_semaphore(conn: asyncpg.Connection, namespace: str, resource_name: str) -> None:
    await conn.execute(_DELETE_SEMAPHORE, namespace, resource_name)


_UPSERT_QUOTA = """
INSERT INTO quotas (namespace, resource_name, generation, max_concurrent_executions,
                    max_executions_per_minute, max_workflow_definitions, max_schedules,
                    max_payload_bytes, allowed_egress, dispatch_weight)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (namespace, resource_name) DO UPDATE
   SET generation = EXCLUDED.generation,
       max_concurrent_executions = EXCLUDED.max_concurrent_executions,
       max_executions_per_minute = EXCLUDED.max_executions_per_minute,
       max_workflow_definitions = EXCLUDED.max_workflow_definitions,
       max_schedules = EXCLUDED.max_schedules,
       max_payload_bytes = EXCLUDED.max_payload_bytes,
       allowed_egress = EXCLUDED.allowed_egress,
       dispatch_weight = EXCLUDED.dispatch_weight,
       updated_at = now()
"""
_DELETE_QUOTA = "DELETE FROM quotas WHERE namespace = $1 AND resource_name = $2"


async def upsert_quota(
    conn: asyncpg.Connection,
    namespace: str,
    resource_name: str,
    generation: int,
    max_concurrent_executions: int | None,
    max_executions_per_minute: int | None,
    max_workflow_definitions: int | None,
    max_schedules: int | None,
    max_payload_bytes: int | None = None,
    allowed_egress: tuple[str, ...] = (),
    dispatch_weight: int | None = None,
) -> None:
    """Store a Quota. Its tenant rules (payload limit, egress, dispatch weight)
    apply to this process's next request, and to other replicas' as soon as
    this transaction's notification reaches them (store.tenancy)."""
    async with conn.transaction():
        await conn.execute(_NOTIFY, namespace)
        await conn.execute(
            _UPSERT_QUOTA,
            namespace,
            resource_name,
            generation,
            max_concurrent_executions,
            max_executions_per_minute,
            max_workflow_definitions,
            max_schedules,
            max_payload_bytes,
            list(allowed_egress),
            dispatch_weight,
        )
    rules_changed(namespace)


async def delete_quota(conn: asyncpg.Connection, namespace: str, resource_name: str) -> None:
    async with conn.transaction():
        await conn.execute(_NOTIFY, namespace)
        await conn.execute(_DELETE_QUOTA, namespace, resource_name)
    rules_changed(namespace)


_LIST_TASK_DEFINITIONS = (
    "SELECT name, resource_name, generation, spec FROM task_definitions WHERE namespace = $1 ORDER BY name"
)


async def list_task_definitions(conn: asyncpg.Connection, namespace: str) -> list[StoredDefinition]:
    return [StoredDefinition(**dict(r)) for r in await conn.fetch(_LIST_TASK_DEFINITIONS, namespace)]
