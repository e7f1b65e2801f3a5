"""Time travel in SQL: instead of sleeping through a lease, a heartbeat
timeout or a retry delay, a test moves the instants the store compares with
`now()` into the past, as if that much time had gone by.

Every instant on runs, tasks and queued decisions moves (deadlines, the times
a task becomes available, was leased, last beat), so the intervals between
them stay as they were; generated columns (a task's next deadline) follow.
Windows and buckets keyed by aligned instants (rate-limit windows, retry-budget
buckets) stay: moved, they would no longer be the window the store looks up.
The production code has no hook for this: the store reads time only through
PostgreSQL's `now()`, so moving the rows is moving the clock for them."""

from __future__ import annotations

import datetime

from sluiceway.store.database import Pool

TABLES = ("executions", "tasks", "decide_queue")

_INSTANTS = """
SELECT table_name, array_agg(column_name::text ORDER BY column_name) AS columns
  FROM information_schema.columns
 WHERE table_schema = current_schema() AND table_name = ANY($1::text[])
   AND data_type = 'timestamp with time zone' AND is_generated = 'NEVER'
 GROUP BY table_name
"""


async def time_passes(pool: Pool, seconds: float) -> None:
    """As if `seconds` went by for every run, task and queued decision: what
    falls due in that time is due now."""
    shift = datetime.timedelta(seconds=seconds)
    async with pool.acquire() as conn, conn.transaction():
        for row in await conn.fetch(_INSTANTS, list(TABLES)):
            moved = ", ".join(f"{column} = {column} - $1::interval" for column in row["columns"])
            await conn.execute(f"UPDATE {row['table_name']} SET {moved}", shift)
