"""The numbers behind "why is my task not running?" and the gauges that move
first when something is wrong."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

_DECIDE_LAG = """
SELECT coalesce(extract(epoch FROM now() - min(due_at)), 0) FROM decide_queue WHERE due_at <= now()
"""
_QUEUE_DEPTHS = """
SELECT namespace, name,
       count(*) FILTER (WHERE available_at <= now())::int AS ready,
       count(*) FILTER (WHERE available_at > now())::int AS delayed
  FROM tasks WHERE status = 'SCHEDULED' AND type = 'SIMPLE'
 GROUP BY namespace, name
"""
_OVERDUE = """
SELECT (SELECT count(*) FROM tasks WHERE status IN ('SCHEDULED', 'IN_PROGRESS') AND next_deadline IS NOT NULL
          AND next_deadline < now() - interval '2 seconds')
     + (SELECT count(*) FROM executions WHERE status = 'RUNNING' AND timeout_at IS NOT NULL
          AND timeout_at < now() - interval '2 seconds')
"""


@dataclass(frozen=True)
class QueueDepth:
    namespace: str
    name: str
    ready: int
    delayed: int


@dataclass(frozen=True)
class Health:
    decide_lag_seconds: float
    queues: list[QueueDepth]
    timers_overdue: int


async def health(conn: asyncpg.Connection) -> Health:
    lag = float(await conn.fetchval(_DECIDE_LAG))
    queues = [QueueDepth(r["namespace"], r["name"], r["ready"], r["delayed"]) for r in await conn.fetch(_QUEUE_DEPTHS)]
    overdue = int(await conn.fetchval(_OVERDUE))
    return Health(lag, queues, overdue)
