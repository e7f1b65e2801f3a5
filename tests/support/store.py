"""Driving the real store from integration tests: define, start, decide,
lease and report as the operator would, in namespace NS; and read back the
lease intervals that the gate tests measure their worst case on."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from sluiceway.controls.policy import Gates, resolve
from sluiceway.model.execution import ResultStatus, TaskResult
from sluiceway.model.taskdefinition import TaskDefinitionSpec
from sluiceway.store import definitions, executions, leasing, results, runs, workflows
from sluiceway.store.deciding import DeciderConfig, decide_batch

NS = "team-a"


async def define_task(pool: asyncpg.Pool, name: str, **spec: Any) -> None:
    async with pool.acquire() as conn:
        await definitions.upsert_task_definition(conn, NS, name, name.replace("_", "-"), 1, spec)


async def define_workflow(pool: asyncpg.Pool, name: str, tasks: list[dict[str, Any]], **spec: Any) -> int:
    async with pool.acquire() as conn:
        _, version = await workflows.upsert_workflow(
            conn, NS, name, name.replace("_", "-"), 1, {"tasks": tasks, **spec}
        )
    return version


async def start(pool: asyncpg.Pool, workflow: str, input: dict[str, Any] | None = None) -> str:
    async with pool.acquire() as conn, conn.transaction():
        outcome = await executions.start_run(conn, NS, workflow, None, input or {})
    assert isinstance(outcome, executions.Started), outcome
    return outcome.id


async def settle(pool: asyncpg.Pool, config: DeciderConfig | None = None) -> int:
    """Run the decider until the queue has nothing due."""
    config = config or DeciderConfig()
    total = 0
    while (n := await decide_batch(pool, config)) > 0:
        total += n
    return total


async def lease(pool: asyncpg.Pool, task_type: str, count: int = 10, worker: str = "w1") -> list[leasing.Lease]:
    async with pool.acquire() as conn, conn.transaction():
        return await leasing.lease_ungated(conn, NS, task_type, worker, count)


async def report(
    pool: asyncpg.Pool, lease_: leasing.Lease, status: ResultStatus = ResultStatus.COMPLETED, **fields: Any
) -> results.Outcome:
    result = TaskResult(task_id=lease_.task_id, epoch=lease_.epoch, status=status, **fields)
    async with pool.acquire() as conn, conn.transaction():
        outcomes = await results.apply_results(conn, NS, [result])
    return outcomes[lease_.task_id]


async def run_status(pool: asyncpg.Pool, run_id: str) -> runs.RunView:
    async with pool.acquire() as conn:
        view = await runs.get_run(conn, NS, run_id)
    assert view is not None
    return view


async def start_runs(pool: asyncpg.Pool, workflow: str, count: int) -> list[str]:
    ids = []
    async with pool.acquire() as conn:
        for _ in range(count):
            async with conn.transaction():
                outcome = await executions.start_run(conn, NS, workflow, None, {})
            assert isinstance(outcome, executions.Started)
            ids.append(outcome.id)
    return ids


async def gates_of(pool: asyncpg.Pool, task_type: str) -> Gates:
    async with pool.acquire() as conn:
        stored = await definitions.get_task_definition(conn, NS, task_type)
    return resolve(TaskDefinitionSpec.model_validate(stored.spec) if stored else None).gates


async def fetchval(pool: asyncpg.Pool, query: str, *args: Any) -> Any:
    async with pool.acquire() as conn:
        return await conn.fetchval(query, *args)


async def intervals(pool: asyncpg.Pool, task_types: list[str]) -> list[tuple[Any, Any]]:
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT leased_at, ended_at FROM tasks WHERE namespace = $1 AND name = ANY($2) AND leased_at IS NOT NULL",
            NS,
            task_types,
        )
    return [(r["leased_at"], r["ended_at"]) for r in rows]


def max_overlap(intervals: list[tuple[Any, Any]]) -> int:
    """The most intervals open at one instant; an end at t closes before a start at t."""
    events = sorted(
        [(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals], key=lambda e: (e[0], e[1])
    )
    open_, worst = 0, 0
    for _, delta in events:
        open_ += delta
        worst = max(worst, open_)
    return worst


async def scheduled(pool: asyncpg.Pool, task_type: str, count: int) -> None:
    """Wait until `count` tasks of the type are queued: the plane's own decider
    may still be deciding a run when a settle() beside it finds nothing due."""
    for _ in range(400):
        async with pool.acquire() as conn:
            found = await conn.fetchval(
                "SELECT count(*) FROM tasks WHERE name = $1 AND status = 'SCHEDULED'", task_type
            )
        if found >= count:
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"{count} {task_type} tasks never got scheduled")
