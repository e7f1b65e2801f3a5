"""Retention: finished runs are deleted, with their tasks, logs and
attributes, once their `expires_at` has passed (set when they end, from their
WorkflowRun's ttlSecondsAfterFinished, their workflow's spec.retention or the
operator's default).

In small batches, each one short transaction that locks only the finished
runs it deletes (SKIP LOCKED, so replicas share the work), never a queued or
leased task: dispatch never waits on a purge. A run whose parent is still
running is kept, since the parent's SUB_WORKFLOW task points at it.

Schedule fires older than the operator's retention go too, in the same small
batches: a fire still buffered is pending work and is kept. A pruned fire
time is still never started twice while its run exists, since the run's id
is derived from the schedule and the fire time.

Published events older than the event retention go too (store.events): a
sender reads what happened to its call for that long.

With an archive (store.archives), each batch's runs are written to it, and
synced, inside the batch's transaction before the delete: a run leaves the
database only with its history on disk."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import asyncpg

from sluiceway.store import archives, events
from sluiceway.store.sql import claim

_DOOMED = claim(
    "e.id",
    "executions e",
    """e.expires_at <= now() AND e.status <> 'RUNNING'
   AND NOT EXISTS (SELECT 1 FROM executions p WHERE p.id = e.parent_execution_id AND p.status = 'RUNNING')""",
    order_by="e.expires_at",
    limit="$1",
    of="e",
)
# What the purge deletes of each doomed run (store.archives writes the same tables first).
_DELETE_HISTORY = """
), tasks_gone AS (
    DELETE FROM tasks WHERE execution_id IN (SELECT id FROM doomed) RETURNING 1
), logs_gone AS (
    DELETE FROM task_logs WHERE execution_id IN (SELECT id FROM doomed) RETURNING 1
), sizes_gone AS (
    DELETE FROM task_log_sizes WHERE execution_id IN (SELECT id FROM doomed)
), attributes_gone AS (
    DELETE FROM run_attributes WHERE run_id IN (SELECT id FROM doomed)
), events_gone AS (
    DELETE FROM decide_queue WHERE execution_id IN (SELECT id FROM doomed)
), parked_gone AS (
    DELETE FROM parked_tasks WHERE execution_id IN (SELECT id FROM doomed)
), keys_gone AS (
    DELETE FROM start_requests WHERE execution_id IN (SELECT id FROM doomed)
), messages_gone AS (
    DELETE FROM run_messages WHERE execution_id IN (SELECT id FROM doomed)
), audit_gone AS (
    DELETE FROM run_audit WHERE execution_id IN (SELECT id FROM doomed)
), runs_gone AS (
    DELETE FROM executions e WHERE e.id IN (SELECT id FROM doomed) RETURNING 1
)
SELECT (SELECT count(*) FROM runs_gone)::int AS runs, (SELECT count(*) FROM tasks_gone)::int AS tasks,
       (SELECT count(*) FROM logs_gone)::int AS logs
"""
_PURGE = f"WITH doomed AS ({_DOOMED}" + _DELETE_HISTORY
# The runs an archiving purge claimed (_DOOMED, same transaction) and archived.
_PURGE_THESE = "WITH doomed AS (SELECT unnest($1::uuid[]) AS id" + _DELETE_HISTORY
_FORGET_REQUESTS = """
DELETE FROM start_requests WHERE ctid IN (
    SELECT ctid FROM start_requests WHERE created_at < now() - make_interval(secs => $1::float8) LIMIT $2)
"""
# Through each schedule's primary key range (namespace, schedule, fire_at),
# never a scan of every fire; a fire handled recently (a backfill of old
# times) stays for the retention too.
_FORGET_FIRES = """
DELETE FROM schedule_fires WHERE ctid IN (
    SELECT f.ctid FROM schedules s CROSS JOIN LATERAL (
        SELECT ctid FROM schedule_fires f
         WHERE f.namespace = s.namespace AND f.schedule = s.name
           AND f.fire_at < now() - make_interval(secs => $1::float8)
           AND f.handled_at < now() - make_interval(secs => $1::float8) AND f.outcome <> 'buffered'
         LIMIT $2) f
     LIMIT $2)
"""
_EXPIRE_NOW = "UPDATE executions SET expires_at = now() WHERE id = $1 AND namespace = $2 AND status <> 'RUNNING'"


@dataclass(frozen=True)
class Purged:
    runs: int = 0
    tasks: int = 0
    logs: int = 0
    requests: int = 0
    fires: int = 0
    events: int = 0
    archived: int = 0


async def purge(
    conn: asyncpg.Connection,
    batch: int,
    idempotency_window: float,
    retention_seconds: float = 0,
    event_retention_seconds: float = 0,
    archive: archives.Archive | None = None,
) -> Purged:
    """Delete one batch of expired runs (archived first, with an archive), of
    forgotten idempotency keys and, with a retention (0 keeps them for ever),
    of schedule fires older than it and of events older than the event
    retention."""
    archived = 0
    async with conn.transaction():
        if archive is None:
            row = await conn.fetchrow(_PURGE, batch)
        else:
            doomed = [r["id"] for r in await conn.fetch(_DOOMED, batch)]
            archived = await archives.archive(conn, archive, doomed)
            row = await conn.fetchrow(_PURGE_THESE, doomed)
    forgotten = await conn.execute(_FORGET_REQUESTS, idempotency_window, batch)
    fires = await conn.execute(_FORGET_FIRES, retention_seconds, batch) if retention_seconds > 0 else "DELETE 0"
    gone = await events.forget(conn, event_retention_seconds, batch) if event_retention_seconds > 0 else 0
    return Purged(row["runs"], row["tasks"], row["logs"], _count(forgotten), _count(fires), gone, archived)


def _count(status: str) -> int:
    """The row count of a command status such as `DELETE 12`."""
    return int(status.split()[-1])


async def expire_now(conn: asyncpg.Connection, namespace: str, run_id: str) -> None:
    """Let the next purge delete a finished run (its WorkflowRun's TTL passed)."""
    await conn.execute(_EXPIRE_NOW, uuid.UUID(run_id), namespace)
