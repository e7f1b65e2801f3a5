"""Run messages: a durable queue per run, appended by callers and taken by
PULL_WORKFLOW_MESSAGES tasks, in order, each message once.

A message is appended and a waiting task takes what is queued in the same
transaction, under an advisory lock on the run; the decider takes the same
lock before it hands messages to a task it just started. Whichever commits
second sees what the first wrote, so a message never waits beside a task that
waits for it. A taken message is deleted in the transaction that completes
its task with it: it is delivered once, and the task's output keeps it."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import asyncpg

from sluiceway.store import executions

_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('messages:' || $1::text, 0))"
_RUN = "SELECT status FROM executions WHERE id = $1 AND namespace = $2"
_PENDING = "SELECT count(*) FROM run_messages WHERE execution_id = $1"
_APPEND = "INSERT INTO run_messages (execution_id, payload, bytes) VALUES ($1, $2, $3) RETURNING id"
_WAITING = """
SELECT id, input FROM tasks
 WHERE execution_id = $1 AND type = 'PULL_WORKFLOW_MESSAGES' AND status = 'IN_PROGRESS'
 ORDER BY created_at, ref
   FOR UPDATE
"""
_TAKE = """
WITH taken AS (
    DELETE FROM run_messages WHERE id IN (
        SELECT id FROM run_messages WHERE execution_id = $1 ORDER BY id LIMIT $2 FOR UPDATE
    )
    RETURNING id, payload, created_at
)
SELECT id, payload, created_at FROM taken ORDER BY id
"""
_COMPLETE = """
UPDATE tasks SET status = 'COMPLETED', output = $2, ended_at = now(), total_at = NULL
 WHERE id = $1 AND status = 'IN_PROGRESS'
"""


@dataclass(frozen=True)
class Appended:
    id: int
    delivered_to: list[str]  # the tasks that took messages in this transaction


@dataclass(frozen=True)
class NoSuchRun:
    pass


@dataclass(frozen=True)
class NotRunning:
    status: str


@dataclass(frozen=True)
class QueueFull:
    """The run holds `limit` messages nobody took yet."""

    limit: int
    current: int


AppendOutcome = Appended | NoSuchRun | NotRunning | QueueFull


async def append(
    conn: asyncpg.Connection, namespace: str, run_id: str, payload: Any, size: int, max_pending: int
) -> AppendOutcome:
    """Queue one message for a running run (call in a transaction)."""
    try:
        key = uuid.UUID(run_id)
    except ValueError:
        return NoSuchRun()
    await conn.execute(_LOCK, str(key))
    status = await conn.fetchval(_RUN, key, namespace)
    if status is None:
        return NoSuchRun()
    if status != "RUNNING":
        return NotRunning(status)
    pending = int(await conn.fetchval(_PENDING, key))
    if pending >= max_pending:
        return QueueFull(max_pending, pending)
    message_id = int(await conn.fetchval(_APPEND, key, payload, size))
    return Appended(message_id, await _deliver(conn, key))


async def lock(conn: asyncpg.Connection, run_ids: Iterable[uuid.UUID]) -> None:
    """Take the runs' message locks, in a stable order: before the decider
    changes any task row, so it never waits for one while holding another."""
    for run_id in sorted(set(run_ids)):
        await conn.execute(_LOCK, str(run_id))


async def deliver(conn: asyncpg.Connection, run_ids: Iterable[uuid.UUID]) -> None:
    """Hand queued messages to the waiting tasks of these runs (their locks taken)."""
    for run_id in sorted(set(run_ids)):
        await _deliver(conn, run_id)


async def _deliver(conn: asyncpg.Connection, run_id: uuid.UUID) -> list[str]:
    completed: list[str] = []
    for task in await conn.fetch(_WAITING, run_id):
        batch = task["input"].get("batchSize", 1) if isinstance(task["input"], dict) else 1
        taken = await conn.fetch(_TAKE, run_id, max(1, int(batch)))
        if not taken:
            break
        output = {
            "messages": [
                {"id": m["id"], "payload": m["payload"], "receivedAt": m["created_at"].isoformat()} for m in taken
            ],
            "count": len(taken),
        }
        await conn.execute(_COMPLETE, task["id"], output)
        completed.append(str(task["id"]))
    if completed:
        await executions.enqueue_decide(conn, run_id, "task_updated")
    return completed


_QUEUED = "SELECT count(*) FROM run_messages WHERE execution_id = $1"


async def queued(conn: asyncpg.Connection, run_id: uuid.UUID) -> int:
    """Messages of the run nobody took yet."""
    return int(await conn.fetchval(_QUEUED, run_id))
