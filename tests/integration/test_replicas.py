"""Two operator processes on one PostgreSQL, each serving the API and running
its own deciders and sweeper, with pollers spread over both: no gate is
exceeded and no transition happens twice."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import asyncpg
import pytest

from tests.support.operators import start_operator
from tests.support.processes import stop_all
from tests.support.store import NS, define_task, define_workflow, intervals, max_overlap, start_runs
from tests.support.waiting import eventually_async


@pytest.fixture
def replicas(database_url: str, tmp_path: Path) -> Iterator[list[str]]:
    """Two operator processes (no Kubernetes) on the test's database."""
    started = [start_operator(f"operator-{n}", database_url, tmp_path, ready=False) for n in range(2)]
    try:
        for replica in started:
            replica.wait_ready()
        yield [replica.api_url for replica in started]
    finally:
        stop_all([replica.child for replica in started])


async def test_two_replicas_never_exceed_a_cap_or_decide_twice(pool: asyncpg.Pool, replicas: list[str]) -> None:
    await define_task(pool, "shared", concurrentExecLimit=4)
    await define_workflow(
        pool,
        "two_steps",
        [{"name": "shared", "taskReferenceName": "one"}, {"name": "shared", "taskReferenceName": "two"}],
    )
    runs = await start_runs(pool, "two_steps", 300)
    completed = 0

    async def poller(n: int, http: aiohttp.ClientSession) -> None:
        nonlocal completed
        base = f"{replicas[n % 2]}/v1/ns/{NS}/tasks"
        while completed < 600:
            async with http.post(
                f"{base}/poll",
                json={"taskTypes": ["shared"], "workerId": f"p{n}", "count": 1 + n % 5, "pollTimeoutSeconds": 1},
            ) as r:
                tasks = (await r.json())["tasks"]
            if not tasks:
                continue
            await asyncio.sleep(0.002)
            # Report through the *other* replica: any replica may take any result.
            other = f"{replicas[(n + 1) % 2]}/v1/ns/{NS}/tasks"
            async with http.post(
                f"{other}/results",
                json={"results": [{"taskId": t["taskId"], "epoch": t["epoch"], "status": "COMPLETED"} for t in tasks]},
            ) as r:
                assert r.status == 200, await r.text()
            completed += len(tasks)

    async with aiohttp.ClientSession() as http:
        await asyncio.wait_for(asyncio.gather(*(poller(n, http) for n in range(12))), 180)

    async def all_done() -> bool:
        async with pool.acquire() as conn:
            return bool(
                await conn.fetchval(
                    "SELECT count(*) = 300 FROM executions WHERE status = 'COMPLETED' AND id = ANY($1::uuid[])", runs
                )
            )

    await eventually_async(all_done, timeout=20, interval=0.1, what="the 300 runs to complete")
    worst = max_overlap(await intervals(pool, ["shared"]))
    print(f"two replicas, concurrentExecLimit 4: worst in flight {worst} over 600 leases")
    assert worst == 4
    async with pool.acquire() as conn:
        attempts = await conn.fetch(
            "SELECT ref, count(*) AS n FROM tasks GROUP BY execution_id, ref HAVING count(*) > 1"
        )
        leftovers = await conn.fetchval("SELECT count(*) FROM decide_queue")
    assert attempts == [], "a task was scheduled twice"
    assert leftovers == 0
