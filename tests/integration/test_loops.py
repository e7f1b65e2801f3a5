"""DO_WHILE on a real PostgreSQL: a long loop keeps its run small (keepLastN),
its tasks are addressed by iteration, and a start's overrides reach them."""

from __future__ import annotations

import asyncpg

from sluiceway.model.execution import ResultStatus, RunStatus
from tests.support.store import define_workflow, lease, report, run_status, settle, start


async def _rows(pool: asyncpg.Pool, run_id: str) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return await conn.fetch(
            "SELECT ref, loop_ref, iteration, status FROM tasks WHERE execution_id = $1::uuid ORDER BY created_at",
            run_id,
        )


async def test_a_thousand_iterations_with_keep_last_n_keep_the_run_small(pool: asyncpg.Pool) -> None:
    body = [
        {
            "name": "count",
            "taskReferenceName": "count",
            "type": "INLINE",
            "inputParameters": {"expression": "input.n * 2", "n": "${loop.output.iteration}"},
        }
    ]
    await define_workflow(
        pool,
        "counter",
        [
            {
                "name": "loop",
                "taskReferenceName": "loop",
                "type": "DO_WHILE",
                "loopOver": body,
                "loopCondition": "iteration < 1000",
                "maxIterations": 1000,
                "keepLastN": 10,
            }
        ],
        outputParameters={"last": "${count.output.result}", "iterations": "${loop.output.iteration}"},
    )
    run_id = await start(pool, "counter")
    await settle(pool)
    view = await run_status(pool, run_id)
    assert view.status is RunStatus.COMPLETED and view.output == {"last": 2000, "iterations": 1000}
    rows = await _rows(pool, run_id)
    assert len(rows) == 11, f"the loop and its last 10 iterations, not 1,001 rows: {len(rows)}"
    assert sorted(r["iteration"] for r in rows if r["loop_ref"]) == list(range(991, 1001))
    loop = next(r for r in rows if r["ref"] == "loop")
    assert loop["status"] == "COMPLETED"
    async with pool.acquire() as conn:
        output = await conn.fetchval("SELECT output FROM tasks WHERE execution_id = $1::uuid AND ref = 'loop'", run_id)
    assert output["summarized"] == {"iterations": 990, "tasks": {"COMPLETED": 990}}


async def test_a_loop_of_worker_tasks_runs_each_iteration_as_ref__n(pool: asyncpg.Pool) -> None:
    await define_workflow(
        pool,
        "batches",
        [
            {
                "name": "loop",
                "taskReferenceName": "loop",
                "type": "DO_WHILE",
                "loopOver": [
                    {
                        "name": "fetch_page",
                        "taskReferenceName": "page",
                        "inputParameters": {"n": "${loop.output.iteration}"},
                    }
                ],
                "loopCondition": "tasks.page.output.more == true",
                "maxIterations": 100,
                "keepLastN": 2,
            }
        ],
    )
    run_id = await start(pool, "batches")
    await settle(pool)
    for n in range(1, 6):
        [task] = await lease(pool, "fetch_page")
        assert (task.ref, task.input) == (f"page__{n}", {"n": n})
        await report(pool, task, ResultStatus.COMPLETED, output={"more": n < 5})
        await settle(pool)
        assert len(await _rows(pool, run_id)) <= 3
    assert (await run_status(pool, run_id)).status is RunStatus.COMPLETED
