"""The statements that find a batch of leased tasks by id (results, progress
reports, heartbeats) look each task up by its primary key, on a real
PostgreSQL whose statistics see few leased tasks.

The alternative the planner likes by those statistics is to scan the partial
index of leased tasks for the whole namespace and hash-join the batch. That
index still holds an entry for every task leased and finished since the last
vacuum, and none can be skipped while some transaction is open, so such a
scan grows with everything leased lately (store.sql.STILL_LEASED). Here a few
hundred tasks are leased and finished while a transaction holds its snapshot
open, in a table holding the attempts of 20,000 earlier runs, and each
statement's plan is read with EXPLAIN: written with a plain
`status = 'IN_PROGRESS'`, all three take the partial index."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import pytest

from sluiceway.model.execution import ResultStatus, TaskResult
from sluiceway.store import leasing, results
from sluiceway.store.database import Pool
from tests.support.store import NS, define_workflow, settle

FINISHED, BATCH, EARLIER = 300, 50, 20_000


async def leased_batch(pool: Pool) -> list[leasing.Lease]:
    """FINISHED tasks leased and completed under an open snapshot, then a
    batch of BATCH leased, with the statistics taken before any was leased."""
    await define_workflow(pool, "one", [{"name": "work", "taskReferenceName": "one"}])
    async with pool.acquire() as conn:
        await conn.execute("ALTER TABLE tasks SET (autovacuum_enabled = false)")  # the statistics stay ours
        version = await conn.fetchval("SELECT latest_version FROM workflows WHERE namespace = $1", NS)
        await conn.execute(
            "INSERT INTO executions (id, namespace, workflow_name, workflow_version, status)"
            " SELECT gen_random_uuid(), $1, 'one', $2, 'RUNNING' FROM generate_series(1, $3)",
            NS,
            version,
            FINISHED + BATCH,
        )
        await conn.execute("INSERT INTO decide_queue (execution_id, event) SELECT id, 'started' FROM executions")
    await settle(pool)
    async with pool.acquire() as conn:
        # The attempts of earlier runs, as a table in use holds: on a few hundred
        # rows a sequential scan is the cheaper way to find a batch, and rightly chosen.
        await conn.execute(
            "INSERT INTO tasks (id, execution_id, namespace, ref, type, name, attempt, status,"
            " first_scheduled_at, available_at)"
            " SELECT gen_random_uuid(), gen_random_uuid(), $1, 'one', 'SIMPLE', 'work', 1, 'COMPLETED', now(), now()"
            " FROM generate_series(1, $2)",
            NS,
            EARLIER,
        )
        await conn.execute("ANALYZE tasks")
    async with pool.acquire() as holder, holder.transaction(isolation="repeatable_read"):
        await holder.fetchval("SELECT count(*) FROM tasks")  # the snapshot: nothing finished from now on is skippable
        async with pool.acquire() as conn:
            for _ in range(FINISHED // BATCH):
                done = await leasing.lease_ungated(conn, NS, "work", "w", BATCH)
                await results.apply_results(conn, NS, [_completed(lease) for lease in done])
            return await leasing.lease_ungated(conn, NS, "work", "w", BATCH)


def _completed(lease: leasing.Lease) -> TaskResult:
    return TaskResult(task_id=lease.task_id, epoch=lease.epoch, status=ResultStatus.COMPLETED)


def _statements(batch: list[leasing.Lease]) -> dict[str, tuple[str, list[Any]]]:
    ids = [uuid.UUID(lease.task_id) for lease in batch]
    epochs = [lease.epoch for lease in batch]
    none: list[Any] = [None] * len(batch)
    finish = [NS, ids, epochs, ["COMPLETED"] * len(batch), [{}] * len(batch), [""] * len(batch)]
    return {
        "results": (results._FINISH_ATTEMPTS, [*finish, none, none, none, [], True, []]),
        "progress": (results._PROGRESS, [NS, ids, epochs, [{}] * len(batch)]),
        "heartbeats": (leasing._HEARTBEAT, [NS, ids, epochs]),
    }


async def plan_of(conn: asyncpg.Connection, statement: str, args: list[Any]) -> str:
    rows = await conn.fetch("EXPLAIN " + statement, *args)
    return "\n".join(row[0] for row in rows)


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
async def test_a_batch_of_leased_tasks_is_looked_up_by_primary_key(pool: Pool, plan_cache_mode: str) -> None:
    batch = await leased_batch(pool)
    assert len(batch) == BATCH
    async with pool.acquire() as conn:
        await conn.execute(f"SET plan_cache_mode = {plan_cache_mode}")
        try:
            for name, (statement, args) in _statements(batch).items():
                plan = await plan_of(conn, statement, args)
                assert "tasks_pkey" in plan and "tasks_leased" not in plan, f"{name}:\n{plan}"
        finally:
            await conn.execute("RESET plan_cache_mode")
