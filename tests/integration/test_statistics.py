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
    conn = await asyncpg.connect(database_url)
    try:
        changed = "SELECT coalesce(sum(n_mod_since_analyze), 0) FROM pg_stat_user_tables WHERE relname = 'executions'"
        before = int(await conn.fetchval(changed))
        await conn.execute(
            "INSERT INTO executions (id, namespace, workflow_name, workflow_version, status)"
            " SELECT gen_random_uuid(), 'ns', 'wf', 1, 'RUNNING' FROM generate_series(1, $1)",
            runs,
        )
        await conn.execute("SELECT pg_stat_force_next_flush()")

        async def counted() -> bool:
            await conn.execute("SELECT pg_stat_clear_snapshot()")
            return int(await conn.fetchval(changed)) >= before + runs

        await eventually_async(counted, what="the statistics collector to count the burst")
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
