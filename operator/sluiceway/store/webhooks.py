"""Webhook endpoints and the intake's one transaction: complete the waiting
tasks a verified call matches."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import asyncpg

from sluiceway.model.webhook import WebhookSpec
from sluiceway.store import executions, sql
from sluiceway.store.definitions import Claim

_RELEASE_OLD = "DELETE FROM webhooks WHERE namespace = $1 AND resource_name = $2 AND name <> $3"
_UPSERT = """
INSERT INTO webhooks (namespace, name, resource_name, generation, spec) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (namespace, name) DO UPDATE
   SET generation = EXCLUDED.generation, spec = EXCLUDED.spec, updated_at = now()
 WHERE webhooks.resource_name = EXCLUDED.resource_name
RETURNING resource_name
"""
_OWNER = "SELECT resource_name FROM webhooks WHERE namespace = $1 AND name = $2"
_DELETE = "DELETE FROM webhooks WHERE namespace = $1 AND resource_name = $2"
_GET = "SELECT spec FROM webhooks WHERE namespace = $1 AND name = $2"


async def upsert(
    conn: asyncpg.Connection, namespace: str, name: str, resource_name: str, generation: int, spec: dict[str, Any]
) -> Claim:
    async with conn.transaction():
        await conn.execute(_RELEASE_OLD, namespace, resource_name, name)
        row = await conn.fetchrow(_UPSERT, namespace, name, resource_name, generation, spec)
        if row is not None:
            return Claim(owner=row["resource_name"])
        return Claim(owner=await conn.fetchval(_OWNER, namespace, name))


async def delete(conn: asyncpg.Connection, namespace: str, resource_name: str) -> None:
    await conn.execute(_DELETE, namespace, resource_name)


async def get(conn: asyncpg.Connection, namespace: str, name: str) -> WebhookSpec | None:
    """The endpoint's spec; None when no Webhook of that name is stored."""
    raw = await conn.fetchval(_GET, namespace, name)
    return None if raw is None else WebhookSpec.model_validate(raw)


@dataclass(frozen=True)
class Waiting:
    task_id: str
    execution_id: str
    ref: str
    input: dict[str, Any]


_WAITING = sql.claim(
    "id, execution_id, ref, input",
    "tasks",
    "namespace = $1 AND type = 'WAIT_FOR_WEBHOOK' AND status = 'IN_PROGRESS' AND input ->> 'webhook' = $2",
    order_by="created_at",
)
_COMPLETE = """
UPDATE tasks SET status = 'COMPLETED', output = $2, ended_at = now(), total_at = NULL
 WHERE id = $1 AND status = 'IN_PROGRESS'
RETURNING execution_id
"""


async def complete_matching(
    conn: asyncpg.Connection,
    namespace: str,
    webhook: str,
    matches: Callable[[Waiting], bool],
    output: dict[str, Any],
) -> list[Waiting]:
    """Complete every task waiting on this webhook that `matches` accepts,
    with `output`, and wake their runs (call in a transaction). A task
    another call is completing at this moment is skipped, not waited for."""
    completed: list[Waiting] = []
    for row in await conn.fetch(_WAITING, namespace, webhook):
        task = Waiting(str(row["id"]), str(row["execution_id"]), row["ref"], dict(row["input"] or {}))
        if matches(task) and await conn.fetchval(_COMPLETE, row["id"], output) is not None:
            completed.append(task)
    await executions.enqueue_decides(conn, sorted({uuid.UUID(t.execution_id) for t in completed}), "task_updated")
    return completed


async def now(conn: asyncpg.Connection) -> datetime.datetime:
    """The database's clock, which timestamps checks compare with."""
    value: datetime.datetime = await conn.fetchval("SELECT now()")
    return value
