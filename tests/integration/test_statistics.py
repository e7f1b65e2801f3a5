"""The operator keeps the statistics of its hot tables fresh after a burst:
the planner must not go on believing that few runs are RUNNING when a million
were just started (bench/backlog.py shows what that costs)."""

from __future__ import annotations

import asyncpg

from sluiceway.store.database import Pool
from sluiceway.store.sweeping import refresh_statistics
from tests.support.waiting import eventually_async

_ANALYZED = (
    "SELECT relname, analyze_count FROM pg_stat_user_tables WHERE relname IN ('tasks', 'executions', 'decide_queue')"
)


async def _analyze_counts(database_url: str) -> dict[str, int]:
    conn = await asyncpg.connect(database_url)
    try:
        return {r["relname"]: r["analyze_count"] for r in await conn.fetch(_ANALYZED)}
    finally:
        await conn.close()


async def _burst(database_url: str, runs: int) -> None:
    """Runs started in bulk; returns once the statistics collector counts them."""
    await _changed(
        database_url,
        "INSERT INTO executions (id, namespace, workflow_name, workflow_version, status)"
        " SELECT gen_random_uuid(), 'ns', 'wf', 1, 'RUNNING' FROM generate_series(1, $1)",
        runs,
    )


async def _changed(database_url: str, statement: str, rows: int) -> None:
    """Run `statement` (which changes `rows` rows of executions, given as $1);
    return once the statistics collector counts them."""
    conn = await asyncpg.connect(database_url)
    try:
        changed = "SELECT coalesce(sum(n_mod_since_analyze), 0) FROM pg_stat_user_tables WHERE relname = 'executions'"
        before = int(await conn.fetchval(changed))
        await conn.execute(statement, rows)
        await conn.execute("SELECT pg_stat_force_next_flush()")

        async def counted() -> bool:
            await conn.execute("SELECT pg_stat_clear_snapshot()")
            return int(await conn.fetchval(changed)) >= before + rows

        await eventually_async(counted, what="the statistics collector to count the changes")
    finally:
        await conn.close()


async def test_a_burst_of_changes_is_analyzed_and_a_trickle_is_left_to_autovacuum(
    pool: Pool, database_url: str
) -> None:
    await _burst(database_url, 50)
    before = await _analyze_counts(database_url)
    assert await refresh_statistics(pool, min_changes=100) == [], "50 changes are below the floor"
    await _burst(database_url, 500)
    assert await refresh_statistics(pool, min_changes=100) == ["executions"]
    after = await _analyze_counts(database_url)
    assert after["executions"] == before.get("executions", 0) + 1
    assert after.get("tasks", 0) == before.get("tasks", 0), "an unchanged table is not analyzed"
    assert await refresh_statistics(pool, min_changes=100) == [], "fresh statistics are left alone"


async def test_status_changes_soon_after_an_analyze_wait_for_the_interval_and_growth_does_not(
    pool: Pool, database_url: str
) -> None:
    """A drain changes statuses, not the row count: re-analyzing it every few
    seconds cost PostgreSQL a quarter of its time at 300,000 tasks. New rows
    past the planner's count are analyzed at once."""
    await _burst(database_url, 500)
    assert await refresh_statistics(pool, min_changes=100) == ["executions"]
    ended = "UPDATE executions SET status = 'COMPLETED' WHERE id IN (SELECT id FROM executions LIMIT $1)"
    await _changed(database_url, ended, 400)
    assert await refresh_statistics(pool, min_changes=100) == [], "analyzed a moment ago, and no more rows"
    assert await refresh_statistics(pool, min_changes=100, min_interval=0) == ["executions"]
    await _burst(database_url, 500)
    assert await refresh_statistics(pool, min_changes=100) == ["executions"], "500 new rows on 500"
