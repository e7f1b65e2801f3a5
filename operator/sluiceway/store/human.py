"""HUMAN tasks: the ones waiting for a person, and a person's decision on one."""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from sluiceway.store import executions


@dataclass(frozen=True)
class WaitingTask:
    id: str
    execution_id: str
    workflow_name: str
    ref: str
    type: str
    name: str
    status: str
    attempt: int
    input: dict[str, Any]
    output: dict[str, Any]
    reason: str
    created_at: datetime.datetime
    ended_at: datetime.datetime | None
    completed_by: str | None


_COLUMNS = """
SELECT t.id, t.execution_id, e.workflow_name, t.ref, t.type, t.name, t.status, t.attempt, t.input, t.output,
       t.reason, t.created_at, t.ended_at, t.completed_by
  FROM tasks t JOIN executions e ON e.id = t.execution_id
"""
_FIND = _COLUMNS + " WHERE t.id = $1 AND t.namespace = $2"


def _task(row: asyncpg.Record) -> WaitingTask:
    values = dict(row)
    values["id"], values["execution_id"] = str(values["id"]), str(values["execution_id"])
    return WaitingTask(**values)


async def find(conn: asyncpg.Connection, namespace: str, task_id: uuid.UUID) -> WaitingTask | None:
    row = await conn.fetchrow(_FIND, task_id, namespace)
    return None if row is None else _task(row)


_DECIDE = """
UPDATE tasks SET status = $3, output = $4, reason = $5, completed_by = $6, ended_at = now(), total_at = NULL
 WHERE id = $1 AND namespace = $2 AND type = 'HUMAN' AND status = 'IN_PROGRESS'
RETURNING execution_id
"""


async def settle(
    conn: asyncpg.Connection,
    namespace: str,
    task_id: uuid.UUID,
    status: str,
    output: dict[str, Any],
    reason: str,
    by: str,
) -> bool:
    """A person's decision on a waiting HUMAN task, recorded with who made it,
    and its run woken; False when it no longer waits (someone else decided)."""
    execution_id = await conn.fetchval(_DECIDE, task_id, namespace, status, output, reason, by)
    if execution_id is None:
        return False
    await executions.enqueue_decide(conn, execution_id, "task_updated")
    return True
