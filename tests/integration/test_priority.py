"""Priority on the real store: an urgent run jumps a deep bulk backlog, aging
gives old bulk work its turn back, gates still win, and the priority of a
run comes from its start, its Workflow, its parent or its task."""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import uuid
from typing import Any

import aiohttp
import asyncpg
from typer.testing import CliRunner

from sluiceway.controls import priority
from sluiceway.runtime.main import app
from sluiceway.store import executions, leasing
from tests.support.plane import Plane
from tests.support.store import NS, define_task, define_workflow, gates_of, lease, settle, start
from tests.support.waiting import eventually_async

BACKLOG = 100_000

# A bulk run with `count` ready tasks of type `work` at priority 5, ready since `age` seconds ago.
_BACKLOG = """
WITH bulk AS (
    INSERT INTO executions (id, namespace, workflow_name, workflow_version, status, priority, evaluated)
    VALUES (gen_random_uuid(), $1, 'bulk', 1, 'RUNNING', 5, true) RETURNING id
)
INSERT INTO tasks (id, execution_id, namespace, ref, type, name, attempt, status, first_scheduled_at,
                   available_at, executor, priority)
SELECT gen_random_uuid(), bulk.id, $1, 'b' || i, 'SIMPLE', 'work', 1, 'SCHEDULED',
       now() - make_interval(secs => $3), now() - make_interval(secs => $3), 'worker', 5
  FROM bulk, generate_series(1, $2) AS i
"""


async def backlog(pool: asyncpg.Pool, count: int, age: float) -> None:
    async with pool.acquire() as conn:
        await conn.execute(_BACKLOG, NS, count, age)
        await conn.execute("ANALYZE tasks")


async def run_of(pool: asyncpg.Pool, task_id: str) -> str:
    async with pool.acquire() as conn:
        return str(await conn.fetchval("SELECT execution_id FROM tasks WHERE id = $1", uuid.UUID(task_id)))


async def start_with(pool: asyncpg.Pool, workflow: str, **item: Any) -> str:
    async with pool.acquire() as conn, conn.transaction():
        [outcome] = await executions.start_runs(conn, NS, [executions.StartItem(name=workflow, **item)])
    assert isinstance(outcome, executions.Started), outcome
    return outcome.id


async def test_an_urgent_run_is_leased_next_behind_a_hundred_thousand_bulk_tasks(pool: asyncpg.Pool) -> None:
    await backlog(pool, BACKLOG, age=30)
    await define_workflow(pool, "urgent", [{"name": "work", "taskReferenceName": "w"}])
    urgent = await start_with(pool, "urgent", priority=1)
    await settle(pool)
    [first] = await lease(pool, "work", 1)
    assert first.execution_id == urgent
    [then] = await lease(pool, "work", 1)
    assert then.execution_id != urgent, "the backlog follows"
    # The lease reads its queue's index in that order: no sort of the backlog.
    async with pool.acquire() as conn:
        plan = json.dumps(
            await conn.fetchval(
                """EXPLAIN (FORMAT JSON) SELECT id FROM tasks
                    WHERE executor = 'worker' AND namespace = $1 AND name = 'work' AND status = 'SCHEDULED'
                      AND available_at <= now() ORDER BY sluiceway_ready_order(available_at, priority), id
                    LIMIT 10""",
                NS,
            )
        )
    assert '"Index Name": "tasks_ready"' in plan and '"Node Type": "Sort"' not in plan, plan


async def test_bulk_work_that_waited_past_its_aging_goes_before_new_urgent_work(pool: asyncpg.Pool) -> None:
    aged = priority.longest_overtaken(5).total_seconds() + 30  # ready 4.5 minutes ago at priority 5
    await backlog(pool, 3, age=aged)
    await define_workflow(pool, "urgent", [{"name": "work", "taskReferenceName": "w"}])
    urgent = await start_with(pool, "urgent", priority=1)
    await settle(pool)
    leased = [await run_of(pool, t.task_id) for t in await lease(pool, "work", 4)]
    assert leased.index(urgent) == 3, "the three aged bulk tasks first, then the urgent one"


async def test_the_database_orders_as_the_aging_rule_says(pool: asyncpg.Pool) -> None:
    at = datetime.datetime(2026, 12, 2, 12, 0, tzinfo=datetime.UTC)
    async with pool.acquire() as conn:
        for level in range(priority.HIGHEST, priority.LOWEST + 1):
            found = await conn.fetchval("SELECT sluiceway_ready_order($1, $2::smallint)", at, level)
            assert found == priority.ready_order(at, level)


async def test_a_higher_priority_never_breaks_a_cap(pool: asyncpg.Pool) -> None:
    await define_task(pool, "capped", concurrentExecLimit=1)
    await define_workflow(pool, "capped_wf", [{"name": "capped", "taskReferenceName": "c"}])
    bulk = await start_with(pool, "capped_wf", priority=5)
    await settle(pool)
    gates = await gates_of(pool, "capped")
    async with pool.acquire() as conn:
        held = await leasing.lease(conn, NS, "capped", "w1", 5, gates)
    assert [t.execution_id for t in held.leases] == [bulk]
    await start_with(pool, "capped_wf", priority=1)
    await settle(pool)
    async with pool.acquire() as conn:
        refused = await leasing.lease(conn, NS, "capped", "w2", 5, gates)
    assert refused.leases == [] and refused.holds[0].control == "concurrentExecLimit"


async def test_a_run_takes_its_start_s_priority_else_its_workflow_s_and_a_task_may_set_its_own(
    pool: asyncpg.Pool,
) -> None:
    await define_workflow(pool, "defaults", [{"name": "work", "taskReferenceName": "plain"}], priority=4)
    await define_workflow(pool, "pinned", [{"name": "work", "taskReferenceName": "pinned", "priority": 2}])
    by_workflow = await start(pool, "defaults")
    by_start = await start_with(pool, "defaults", priority=5)
    pinned = await start_with(pool, "pinned", priority=5)
    await settle(pool)
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            """SELECT e.id, e.priority AS run, t.priority AS task
                 FROM executions e JOIN tasks t ON t.execution_id = e.id WHERE e.id = ANY($1::uuid[])""",
            [uuid.UUID(by_workflow), uuid.UUID(by_start), uuid.UUID(pinned)],
        )
    found = {str(r["id"]): (r["run"], r["task"]) for r in rows}
    assert found == {by_workflow: (4, 4), by_start: (5, 5), pinned: (5, 2)}


async def test_a_child_run_is_as_urgent_as_its_parent(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "child", [{"name": "work", "taskReferenceName": "w"}])
    await define_workflow(
        pool,
        "parent",
        [{"name": "sub", "taskReferenceName": "sub", "type": "SUB_WORKFLOW", "subWorkflowParam": {"name": "child"}}],
    )
    parent = await start_with(pool, "parent", priority=1)
    await settle(pool)
    async with pool.acquire() as conn:
        child = await conn.fetchrow("SELECT priority FROM executions WHERE parent_execution_id = $1", uuid.UUID(parent))
    assert child["priority"] == 1


async def test_the_api_takes_a_priority_shows_it_and_names_the_field_it_refuses(plane: Plane) -> None:
    await define_workflow(plane.pool, "api_prio", [{"name": "slow_queue", "taskReferenceName": "w"}])
    async with plane.pool.acquire() as conn:  # a worker polled the queue a moment ago (and is busy)
        await leasing.record_poll(conn, NS, ["slow_queue"], "w-busy")
    base = f"{plane.url}/v1/ns/{NS}"
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base}/executions", json={"name": "api_prio", "priority": 9}) as refused:
            assert refused.status == 422
            body = await refused.json()
            assert body["fields"][0]["field"] == "priority", body
        async with http.post(f"{base}/executions", json={"name": "api_prio", "priority": 2}) as started:
            assert started.status == 201
            run_id = (await started.json())["id"]
        async with http.get(f"{base}/executions/{run_id}") as got:
            view = await got.json()
        assert view["priority"] == 2

        async def why() -> str | None:
            async with http.get(f"{base}/executions/{run_id}/why") as answered:
                text = json.dumps(await answered.json())
            return text if "ready at priority 2" in text else None

        said = await eventually_async(why, timeout=10, what="why to name the task's priority")
    assert "0 of 1 ready tasks of its queue go first" in said, said


async def test_the_cli_starts_at_a_priority_and_shows_it(plane: Plane) -> None:
    await define_workflow(plane.pool, "cli_prio", [{"name": "slow_queue", "taskReferenceName": "w"}])

    async def cli(*argv: str) -> tuple[int, str]:
        args = [*argv, "-n", NS, "--server", plane.url]
        result = await asyncio.to_thread(CliRunner().invoke, app(), args)
        return result.exit_code, result.stdout + result.stderr

    code, said = await cli("runs", "start", "cli_prio", "--priority", "0")
    assert code == 2 and "--priority" in said, said
    code, said = await cli("runs", "start", "cli_prio", "--priority", "1", "-o", "json")
    assert code == 0, said
    run_id = json.loads(said)["id"]
    code, said = await cli("runs", "get", run_id)
    assert code == 0 and re.search(r"^Priority +1$", said, re.MULTILINE), said
