"""Task logs: lines shipped by workers, kept bounded per task.

Each task may keep `cap` bytes of log (counting each line's text and a fixed
overhead). What a task offers is counted in `task_log_sizes` under that row's
lock, in the same statement that stores the lines, so concurrent batches of one
task never overshoot; the lines past the cap are dropped, and the batch that
crosses it stores one line saying so. Lines of tasks that are not in the
namespace are ignored."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from sluiceway.model.execution import LogLine

DEFAULT_CAP_BYTES = 256 * 1024
LINE_OVERHEAD = 64  # bytes a line costs besides its text: so a flood of empty lines is bounded too
TRUNCATED = "[log truncated: this task logged more than {cap} bytes; later lines were dropped]"

_APPEND = f"""
WITH incoming AS (
    SELECT l.task_id, l.ord, l.logged_at, l.level, l.message, t.execution_id,
           octet_length(l.message) + {LINE_OVERHEAD} AS cost
      FROM unnest($2::uuid[], $3::int[], $4::timestamptz[], $5::text[], $6::text[])
           AS l(task_id, ord, logged_at, level, message)
      JOIN tasks t ON t.id = l.task_id AND t.namespace = $1
), batches AS (
    SELECT task_id, (array_agg(execution_id))[1] AS execution_id, sum(cost)::bigint AS bytes, count(*)::int AS lines
      FROM incoming GROUP BY task_id
), counted AS (
    INSERT INTO task_log_sizes AS z (task_id, execution_id, bytes, lines)
    SELECT task_id, execution_id, bytes, lines FROM batches
    ON CONFLICT (task_id) DO UPDATE SET bytes = z.bytes + EXCLUDED.bytes, lines = z.lines + EXCLUDED.lines
    RETURNING z.task_id, z.bytes AS after
), placed AS (
    SELECT i.*, c.after - b.bytes AS before,
           sum(i.cost) OVER (PARTITION BY i.task_id ORDER BY i.ord) AS upto
      FROM incoming i JOIN counted c USING (task_id) JOIN batches b USING (task_id)
)
INSERT INTO task_logs (execution_id, task_id, logged_at, level, message)
SELECT execution_id, task_id, logged_at, level, message FROM (
    SELECT execution_id, task_id, ord, logged_at, level, message FROM placed WHERE before + upto <= $7
    UNION ALL
    SELECT DISTINCT ON (task_id) execution_id, task_id, 2147483647, NULL, 'WARNING', $8
      FROM placed WHERE before <= $7 AND before + upto > $7
) kept
ORDER BY task_id, ord
"""


def _instant(text: str | None) -> datetime.datetime | None:
    """A worker's timestamp, if it is one; a worker's clock is informational only."""
    if not text:
        return None
    try:
        instant = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return instant if instant.tzinfo is not None else instant.replace(tzinfo=datetime.UTC)


async def append(
    conn: asyncpg.Connection,
    namespace: str,
    lines: Sequence[tuple[str, Sequence[LogLine]]],
    cap: int = DEFAULT_CAP_BYTES,
) -> None:
    """Store the lines of each (task id, lines), oldest first, within each task's cap."""
    flat = [(uuid.UUID(task_id), i, line) for task_id, batch in lines for i, line in enumerate(batch)]
    if not flat:
        return
    await conn.execute(
        _APPEND,
        namespace,
        [t for t, _, _ in flat],
        [i for _, i, _ in flat],
        [_instant(line.at) for _, _, line in flat],
        [line.level[:16] for _, _, line in flat],
        [line.message.replace("\x00", "\\0") for _, _, line in flat],
        cap,
        TRUNCATED.format(cap=cap),
    )


@dataclass(frozen=True)
class Entry:
    id: int
    task_id: str
    ref: str
    attempt: int
    at: datetime.datetime
    logged_at: datetime.datetime | None
    level: str
    message: str


@dataclass(frozen=True)
class Logs:
    entries: list[Entry]
    truncated: bool


_READ = """
SELECT l.id, l.task_id, t.ref, t.attempt, l.at, l.logged_at, l.level, l.message
  FROM task_logs l JOIN tasks t ON t.id = l.task_id
 WHERE l.execution_id = $1 AND l.id > $2 AND ($3::text IS NULL OR t.ref = $3) AND ($4::uuid IS NULL OR l.task_id = $4)
 ORDER BY l.id
 LIMIT $5
"""
_TRUNCATED = """
SELECT EXISTS (SELECT 1 FROM task_log_sizes z JOIN tasks t ON t.id = z.task_id
                WHERE z.execution_id = $1 AND z.bytes > $2
                  AND ($3::text IS NULL OR t.ref = $3) AND ($4::uuid IS NULL OR z.task_id = $4))
"""
_RUN_OF_TASK = "SELECT execution_id FROM tasks WHERE id = $1 AND namespace = $2"


async def read(
    conn: asyncpg.Connection,
    run_id: uuid.UUID,
    *,
    after: int = 0,
    limit: int = 1000,
    ref: str | None = None,
    task_id: uuid.UUID | None = None,
    cap: int = DEFAULT_CAP_BYTES,
) -> Logs:
    """Lines of a run (or of one task ref, or one task attempt), after `after`, in the order stored."""
    rows = await conn.fetch(_READ, run_id, after, ref, task_id, limit)
    truncated = bool(await conn.fetchval(_TRUNCATED, run_id, cap, ref, task_id))
    return Logs(
        [
            Entry(r["id"], str(r["task_id"]), r["ref"], r["attempt"], r["at"], r["logged_at"], r["level"], r["message"])
            for r in rows
        ],
        truncated,
    )


async def run_of_task(conn: asyncpg.Connection, namespace: str, task_id: uuid.UUID) -> uuid.UUID | None:
    found: uuid.UUID | None = await conn.fetchval(_RUN_OF_TASK, task_id, namespace)
    return found
