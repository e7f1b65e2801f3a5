"""Quarantine, against a real PostgreSQL: a run the decider cannot evaluate
for a reason nothing foresaw (garbage written straight into the store) is set
aside alone, while every other run of the same batches completes on the same
replicas; its events are consumed, so it is never retried in a loop; it shows
in the API and in `why`; terminate still ends it, and forcing an evaluation
releases it once the cause is fixed."""

from __future__ import annotations

import asyncio
import re
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import asyncpg
import pytest

from sluiceway.devenv.processes import Child
from sluiceway.store import executions
from sluiceway.store.deciding import DeciderConfig
from tests.support.operators import start_operator
from tests.support.plane import Plane
from tests.support.processes import stop_all
from tests.support.store import NS, define_task, define_workflow, fetchval, settle, start, start_runs
from tests.support.waiting import eventually_async


@dataclass
class Replicas:
    urls: list[str]
    children: list[Child]


@pytest.fixture
def replicas(database_url: str, tmp_path: Path) -> Iterator[Replicas]:
    """Two operator processes (no Kubernetes) on the test's database."""
    started = [start_operator(f"operator-{n}", database_url, tmp_path, ready=False) for n in range(2)]
    try:
        for replica in started:
            replica.wait_ready()
        yield Replicas([r.api_url for r in started], [r.child for r in started])
    finally:
        stop_all([r.child for r in started])


# A trigger stands in for any value PostgreSQL refuses in one run's decision:
# the decision is computed, and applying it fails, for that run only.
_REFUSE_SECOND_TASK = """
CREATE FUNCTION refuse_second_task() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.execution_id = '{run}'::uuid AND NEW.ref = 'two' THEN
        RAISE EXCEPTION 'this run''s second task cannot be stored' USING ERRCODE = '{sqlstate}';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_second_task BEFORE INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION refuse_second_task();
"""


async def _work(replicas: Replicas, tasks_wanted: int) -> int:
    """Pollers over both replicas complete tasks of type `work`, reporting
    through the other replica, until `tasks_wanted` are done."""
    done = 0

    async def poller(n: int, http: aiohttp.ClientSession) -> None:
        nonlocal done
        while done < tasks_wanted:
            async with http.post(
                f"{replicas.urls[n % 2]}/v1/ns/{NS}/tasks/poll",
                json={"taskTypes": ["work"], "workerId": f"p{n}", "count": 5, "pollTimeoutSeconds": 1},
            ) as r:
                leased = (await r.json())["tasks"]
            if not leased:
                continue
            async with http.post(
                f"{replicas.urls[(n + 1) % 2]}/v1/ns/{NS}/tasks/results",
                json={"results": [{"taskId": t["taskId"], "epoch": t["epoch"], "status": "COMPLETED"} for t in leased]},
            ) as r:
                assert r.status == 200, await r.text()
            done += len(leased)

    async with aiohttp.ClientSession() as http:
        await asyncio.wait_for(asyncio.gather(*(poller(n, http) for n in range(6))), 180)
    return done


def _quarantined_total(url: str) -> float:
    text = urllib.request.urlopen(f"{url}/metrics", timeout=5).read().decode()
    return sum(float(v) for v in re.findall(r"^sluiceway_runs_quarantined_total\{[^}]*\} (\S+)$", text, re.M))


async def test_runs_the_decider_cannot_evaluate_are_quarantined_alone_while_100_others_complete(
    pool: asyncpg.Pool, replicas: Replicas
) -> None:
    await define_task(pool, "work")
    steps = [{"name": "work", "taskReferenceName": "one"}, {"name": "work", "taskReferenceName": "two"}]
    await define_workflow(pool, "steady", steps)
    await define_workflow(pool, "poisoned", steps)
    async with pool.acquire() as conn:
        # 1. A spec no model accepts, written where only a reconciled Workflow should be.
        await conn.execute(
            'UPDATE workflow_versions SET spec = \'{"tasks": "not a list"}\' WHERE namespace = $1 AND name = $2',
            NS,
            "poisoned",
        )
    bad_spec = await start(pool, "poisoned")
    bad_row = await start(pool, "steady")
    refused = await start(pool, "steady")
    async with pool.acquire() as conn:
        await conn.execute(_REFUSE_SECOND_TASK.format(run=refused, sqlstate="P0001"))
    others = await start_runs(pool, "steady", 100)

    # 2. A task row nothing wrote this way, once the decider has scheduled it (and out of every
    # executor's reach: the run must wait for the fix below, with its first task still to do).
    await eventually_async(
        lambda: fetchval(pool, "SELECT count(*) = 1 FROM tasks WHERE execution_id = $1", bad_row),
        timeout=60,
        what="bad_row's task",
    )
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "UPDATE tasks SET type = 'NO_SUCH_TYPE', executor = 'engine' WHERE execution_id = $1", bad_row
        )
        await executions.enqueue_decide(conn, bad_row, "task_updated")

    # 3. Work: every task of the 100 (two each), and the first task of `refused`.
    worked = await _work(replicas, 201)
    assert worked >= 201

    async def all_settled() -> bool:
        completed = await fetchval(
            pool, "SELECT count(*) FROM executions WHERE status = 'COMPLETED' AND id = ANY($1::uuid[])", others
        )
        quarantined = await fetchval(pool, "SELECT count(*) FROM executions WHERE quarantined_at IS NOT NULL")
        return bool(completed == 100 and quarantined == 3)

    await eventually_async(all_settled, timeout=60, what="100 completed and 3 quarantined")
    async with pool.acquire() as conn:
        rows = {
            str(r["id"]): r
            for r in await conn.fetch(
                "SELECT id, status, quarantine_reason FROM executions WHERE quarantined_at IS NOT NULL"
            )
        }
    assert set(rows) == {bad_spec, bad_row, refused}, "quarantined alone: no other run"
    assert all(r["status"] == "RUNNING" for r in rows.values())
    assert rows[bad_spec]["quarantine_reason"].startswith("workflow poisoned version 1 cannot be read: ValidationError")
    assert "task one attempt 1" in rows[bad_row]["quarantine_reason"]
    assert "KeyError: 'NO_SUCH_TYPE'" in rows[bad_row]["quarantine_reason"]
    assert rows[refused]["quarantine_reason"] == (
        "deciding it failed, even alone: RaiseError: this run's second task cannot be stored"
    )

    # Never retried in a loop: new events for a quarantined run are consumed
    # without deciding it, and it is counted once.
    async with pool.acquire() as conn, conn.transaction():
        for run in (bad_spec, bad_row, refused):
            for _ in range(5):
                await executions.enqueue_decide(conn, run, "task_updated")
    await eventually_async(
        lambda: fetchval(pool, "SELECT count(*) = 0 FROM decide_queue"), timeout=60, what="the events consumed"
    )
    assert await fetchval(pool, "SELECT count(*) FROM executions WHERE quarantined_at IS NOT NULL") == 3
    assert sum(_quarantined_total(url) for url in replicas.urls) == 3
    assert all(child.alive() for child in replicas.children), "the operator processes keep running"
    logs = "".join(child.log_path.read_text() for child in replicas.children)
    assert f"run {bad_spec} ({NS}/poisoned) is quarantined" in logs

    async with aiohttp.ClientSession() as http:
        api = f"{replicas.urls[0]}/v1/ns/{NS}/executions"
        async with http.get(f"{api}/{bad_spec}") as r:
            view = await r.json()
        assert view["status"] == "RUNNING" and view["quarantinedAt"] and "cannot be read" in view["quarantineReason"]
        async with http.get(f"{api}/{bad_spec}/why") as r:
            why = await r.json()
        assert why["quarantined"] is True
        assert [(x["control"], x["blocking"]) for x in why["reasons"]] == [("quarantine", True)]
        assert "is quarantined: the decider cannot evaluate it (workflow poisoned" in why["reasons"][0]["message"]

        # Terminate still works on a run whose spec cannot be read.
        async with http.post(f"{api}/{bad_spec}/terminate", json={"reason": "cleaning up"}) as r:
            assert r.status == 202
        # Forcing an evaluation releases a run once its cause is fixed.
        async with pool.acquire() as conn:
            await conn.execute("UPDATE tasks SET type = 'SIMPLE', executor = 'worker' WHERE execution_id = $1", bad_row)
        async with http.post(f"{api}/{bad_row}/decide") as r:
            assert r.status == 202 and (await r.json())["released"] is True
        # ... and a run whose cause is still there is quarantined again, once.
        async with http.post(f"{api}/{refused}/decide") as r:
            assert (await r.json())["released"] is True

    await eventually_async(
        lambda: fetchval(pool, "SELECT status = 'TERMINATED' FROM executions WHERE id = $1", bad_spec),
        timeout=60,
        what="terminated",
    )
    await eventually_async(
        lambda: fetchval(pool, "SELECT quarantined_at IS NOT NULL FROM executions WHERE id = $1", refused),
        timeout=60,
        what="quarantined again",
    )
    assert await _work(replicas, 2) == 2, "the released run goes on: its two tasks are leased"
    await eventually_async(
        lambda: fetchval(pool, "SELECT status = 'COMPLETED' FROM executions WHERE id = $1", bad_row),
        timeout=60,
        what="completed",
    )
    assert sum(_quarantined_total(url) for url in replicas.urls) == 4


async def test_a_transient_failure_defers_the_run_instead_of_quarantining_it(pool: asyncpg.Pool) -> None:
    await define_task(pool, "work")
    await define_workflow(
        pool, "steady", [{"name": "work", "taskReferenceName": "one"}, {"name": "work", "taskReferenceName": "two"}]
    )
    run = await start(pool, "steady")
    other = await start(pool, "steady")
    async with pool.acquire() as conn:
        # A serialization failure passes by itself: that run is tried again later.
        await conn.execute(
            _REFUSE_SECOND_TASK.format(run=run, sqlstate="40001").replace("'two'", "'one'"),
        )
    await settle(pool, DeciderConfig())
    async with pool.acquire() as conn:
        quarantined = await conn.fetchval("SELECT count(*) FROM executions WHERE quarantined_at IS NOT NULL")
        deferred = await conn.fetchval(
            "SELECT count(*) FROM decide_queue WHERE execution_id = $1 AND event = 'retry_after_error'"
            " AND due_at > now() + interval '20 seconds'",
            run,
        )
        scheduled = await conn.fetchval("SELECT count(*) FROM tasks WHERE execution_id = $1", other)
    assert (quarantined, deferred, scheduled) == (0, 1, 1)


async def test_garbage_in_a_batch_costs_only_its_run(plane: Plane) -> None:
    """The plane's decider loop keeps deciding the good runs of its batches
    while a run whose stored input is not an object (no API could store it)
    is among them."""
    await define_task(plane.pool, "work")
    await define_workflow(
        plane.pool,
        "one_step",
        [{"name": "work", "taskReferenceName": "one", "inputParameters": {"x": "${workflow.input.x}"}}],
    )
    async with plane.pool.acquire() as conn, conn.transaction():
        outcome = await executions.start_run(conn, NS, "one_step", None, {})
        assert isinstance(outcome, executions.Started)
        await conn.execute("UPDATE executions SET input = '[1, 2]' WHERE id = $1", outcome.id)
    fine = [await start(plane.pool, "one_step", {"x": n}) for n in range(20)]
    query = "SELECT count(DISTINCT execution_id) = 20 FROM tasks WHERE execution_id = ANY($1::uuid[])"
    await eventually_async(lambda: fetchval(plane.pool, query, fine), timeout=60, what="every good run scheduled")
    reason = await eventually_async(
        lambda: fetchval(plane.pool, "SELECT quarantine_reason FROM executions WHERE id = $1", outcome.id),
        timeout=60,
        what="quarantine",
    )
    assert reason == "the decider cannot evaluate this run: TypeError: the run's input is not a JSON object"
    assert await fetchval(plane.pool, "SELECT count(*) FROM tasks WHERE execution_id = $1", outcome.id) == 0


async def test_a_run_row_the_driver_cannot_decode_is_quarantined_alone(plane: Plane) -> None:
    """PostgreSQL holds 1e400 in jsonb; no client can read it as a double. The
    batch that locks this run fails as a whole, and the runs of that batch are
    decided one by one: this run is quarantined, the others go on."""
    await define_task(plane.pool, "work")
    await define_workflow(plane.pool, "one_step", [{"name": "work", "taskReferenceName": "one"}])
    async with plane.pool.acquire() as conn, conn.transaction():
        outcome = await executions.start_run(conn, NS, "one_step", None, {})
        assert isinstance(outcome, executions.Started)
        await conn.execute("UPDATE executions SET input = '{\"x\": 1e400}' WHERE id = $1", outcome.id)
    fine = [await start(plane.pool, "one_step") for _ in range(20)]
    query = "SELECT count(DISTINCT execution_id) = 20 FROM tasks WHERE execution_id = ANY($1::uuid[])"
    await eventually_async(lambda: fetchval(plane.pool, query, fine), timeout=60, what="every good run scheduled")
    reason = await eventually_async(
        lambda: fetchval(plane.pool, "SELECT quarantine_reason FROM executions WHERE id = $1", outcome.id),
        timeout=60,
        what="quarantine",
    )
    assert reason.startswith("deciding it failed, even alone: JSONDecodeError: number is infinity")
    assert await fetchval(plane.pool, "SELECT count(*) FROM decide_queue") == 0
