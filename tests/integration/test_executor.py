"""The executor column, against a real PostgreSQL: every task row carries its
type's executor from the model; rows that were there before the column, and
rows a replica of the previous release inserts during a rolling upgrade, get
the same answer."""

from __future__ import annotations

import uuid

from sluiceway.model.workflow import TaskType
from sluiceway.store.database import Pool
from tests.support.store import NS, define_workflow, settle, start

# The types that existed when migration 0008 was written: all an older replica can insert.
TYPES_AT_0008 = [
    "SIMPLE",
    "FORK_JOIN",
    "FORK_JOIN_DYNAMIC",
    "JOIN",
    "SWITCH",
    "WAIT",
    "INLINE",
    "TERMINATE",
    "SUB_WORKFLOW",
    "HTTP",
    "HTTP_POLL",
]


async def test_the_decider_stores_each_tasks_executor(pool: Pool) -> None:
    await define_workflow(
        pool,
        "mixed",
        [
            {"name": "calc", "taskReferenceName": "calc", "type": "INLINE", "inputParameters": {"expression": "1"}},
            {"name": "pause", "taskReferenceName": "pause", "type": "WAIT"},
            {"name": "call", "taskReferenceName": "call", "type": "HTTP", "inputParameters": {"uri": "http://x"}},
            {"name": "work", "taskReferenceName": "work"},
        ],
    )
    run = await start(pool, "mixed")
    await settle(pool)
    async with pool.acquire() as conn:
        await conn.execute("UPDATE tasks SET status = 'COMPLETED' WHERE ref = 'pause'")
        await conn.execute("INSERT INTO decide_queue (execution_id, event) VALUES ($1, 'task_updated')", uuid.UUID(run))
    await settle(pool)
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT type, executor FROM tasks WHERE execution_id = $1", uuid.UUID(run))
    assert {r["type"] for r in rows} == {"INLINE", "WAIT", "HTTP"}
    assert all(r["executor"] == TaskType(r["type"]).executor().value for r in rows), rows


async def test_the_backfill_and_an_older_replicas_inserts_agree_with_the_model(pool: Pool) -> None:
    async with pool.acquire() as conn:
        for task_type in TYPES_AT_0008:
            assert await conn.fetchval("SELECT sluiceway_executor_0008($1)", task_type) == (
                TaskType(task_type).executor().value
            ), task_type
        # An insert that names no executor, as the previous release's decider writes it.
        await conn.execute(
            "INSERT INTO tasks (id, execution_id, namespace, ref, type, name, attempt, status, first_scheduled_at,"
            " available_at) VALUES ($1, $2, $3, 'r', 'HTTP_POLL', 'poll', 1, 'SCHEDULED', now(), now())",
            uuid.uuid4(),
            uuid.uuid4(),
            NS,
        )
        assert await conn.fetchval("SELECT executor FROM tasks WHERE ref = 'r'") == "system"
