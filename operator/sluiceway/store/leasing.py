"""Leasing tasks to workers, and the heartbeats that keep a lease alive.

A lease bumps the task's epoch; every later result or heartbeat must carry
that epoch, so a worker whose lease expired (and whose task was handed to
someone else) can change nothing. Every task may be delivered more than once;
each state transition happens exactly once."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg


@dataclass(frozen=True)
class Lease:
    task_id: str
    epoch: int
    task_type: str
    execution_id: str
    ref: str
    attempt: int
    input: dict[str, Any]
    response_timeout: int
    heartbeat_timeout: int
    start_to_close_timeout: int


_LEASE_UNGATED = """
WITH picked AS (
    SELECT id FROM tasks
     WHERE namespace = $1 AND name = $2 AND type = 'SIMPLE' AND status = 'SCHEDULED' AND available_at <= now()
     ORDER BY available_at
     LIMIT $3
       FOR UPDATE SKIP LOCKED
)
UPDATE tasks t
   SET status = 'IN_PROGRESS', epoch = t.epoch + 1, worker_id = $4, leased_at = now(), last_heartbeat_at = now(),
       schedule_to_start_at = NULL, schedule_to_close_at = NULL,
       start_to_close_at = CASE WHEN t.start_to_close_timeout > 0
                                THEN now() + make_interval(secs => t.start_to_close_timeout) END,
       heartbeat_at = CASE WHEN t.heartbeat_timeout > 0 THEN now() + make_interval(secs => t.heartbeat_timeout) END,
       lease_expires_at = now() + make_interval(secs => t.response_timeout)
  FROM picked
 WHERE t.id = picked.id
RETURNING t.id, t.epoch, t.name, t.execution_id, t.ref, t.attempt, t.input, t.response_timeout,
          t.heartbeat_timeout, t.start_to_close_timeout
"""


def _lease(row: asyncpg.Record) -> Lease:
    return Lease(str(row["id"]), row["epoch"], row["name"], str(row["execution_id"]), row["ref"], row["attempt"],
                 row["input"], row["response_timeout"], row["heartbeat_timeout"], row["start_to_close_timeout"])


async def lease_ungated(conn: asyncpg.Connection, namespace: str, task_type: str, worker_id: str,
                        count: int) -> list[Lease]:
    return [_lease(r) for r in await conn.fetch(_LEASE_UNGATED, namespace, task_type, count, worker_id)]


_SECONDS_UNTIL_AVAILABLE = """
SELECT extract(epoch FROM min(available_at) - clock_timestamp()) FROM tasks
 WHERE namespace = $1 AND name = ANY($2) AND type = 'SIMPLE' AND status = 'SCHEDULED'
"""


async def seconds_until_available(conn: asyncpg.Connection, namespace: str, task_types: list[str]
                                  ) -> float | None:
    """Seconds until the earliest queued task of these types becomes leasable
    (zero or less: it already is, and a gate or a race is what holds it);
    None when nothing is queued. Measured on the database's clock."""
    value = await conn.fetchval(_SECONDS_UNTIL_AVAILABLE, namespace, task_types)
    return None if value is None else float(value)


_HEARTBEAT = """
UPDATE tasks t
   SET last_heartbeat_at = now(),
       heartbeat_at = CASE WHEN t.heartbeat_timeout > 0 THEN now() + make_interval(secs => t.heartbeat_timeout) END,
       lease_expires_at = now() + make_interval(secs => t.response_timeout)
  FROM unnest($2::uuid[], $3::int[]) AS b(id, epoch)
 WHERE t.id = b.id AND t.epoch = b.epoch AND t.status = 'IN_PROGRESS' AND t.namespace = $1
RETURNING t.id
"""


async def heartbeat(conn: asyncpg.Connection, namespace: str, beats: list[tuple[str, int]]) -> set[str]:
    """Renew leases; return the ids that were still leased under those epochs."""
    ids = [uuid.UUID(task_id) for task_id, _ in beats]
    rows = await conn.fetch(_HEARTBEAT, namespace, ids, [epoch for _, epoch in beats])
    return {str(r["id"]) for r in rows}


_TOUCH_POLLER = """
INSERT INTO pollers (namespace, name, worker_id, last_poll) SELECT $1, unnest($2::text[]), $3, now()
ON CONFLICT (namespace, name, worker_id) DO UPDATE SET last_poll = now()
"""


async def record_poll(conn: asyncpg.Connection, namespace: str, task_types: list[str], worker_id: str) -> None:
    await conn.execute(_TOUCH_POLLER, namespace, task_types, worker_id)


