"""Starts and results decide the runs they queue in their own transaction
(SLUICEWAY_DECIDE_INLINE), on a real PostgreSQL, with no decider loop
running unless a test says so: a started run's first task is SCHEDULED when
the start answers; a chain's next task comes back with the result that
completed the previous one (`next`); a one-task run is COMPLETED when its
result answers. A run another transaction holds, or whose decision fails, is
left queued for the decider loop, which decides it: nothing is lost and the
start or the result still succeeds. Off, the loop decides everything."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from sluiceway.store import deciding
from sluiceway.store.database import Pool
from sluiceway.store.deciding import DeciderConfig, decide_batch
from sluiceway.store.wakeups import DECIDE_CHANNEL
from tests.support.plane import Plane, execution_plane, finished, post
from tests.support.store import NS, define_workflow, fetchval

API = f"/v1/ns/{NS}"
ONE = [{"name": "work", "taskReferenceName": "one"}]
CHAIN = [{"name": "work", "taskReferenceName": "one"}, {"name": "work", "taskReferenceName": "two"}]


@pytest.fixture
async def plane(pool: Pool, database_url: str) -> AsyncIterator[Plane]:
    """Inline deciding on, and no decider loop: only the inline decisions move runs on."""
    async with execution_plane(pool, database_url, decide_inline=True, decider_loop=False) as running:
        yield running


async def tasks_of(plane: Plane, run_id: str) -> dict[str, str]:
    async with plane.pool.acquire() as conn:
        rows = await conn.fetch("SELECT ref, status FROM tasks WHERE execution_id = $1", uuid.UUID(run_id))
    return {row["ref"]: row["status"] for row in rows}


async def queued(plane: Plane, run_id: str) -> int:
    count = await fetchval(plane.pool, "SELECT count(*) FROM decide_queue WHERE execution_id = $1", uuid.UUID(run_id))
    return int(count)


async def status_of(plane: Plane, run_id: str) -> str:
    return str(await fetchval(plane.pool, "SELECT status FROM executions WHERE id = $1", uuid.UUID(run_id)))


async def poll(plane: Plane, count: int = 1) -> list[dict[str, Any]]:
    status, body = await post(
        plane, f"{API}/tasks/poll", {"taskTypes": ["work"], "workerId": "w", "count": count, "pollTimeoutSeconds": 0}
    )
    assert status == 200, body
    tasks: list[dict[str, Any]] = body["tasks"]
    return tasks


async def complete(plane: Plane, task: dict[str, Any], next_count: int = 1) -> dict[str, Any]:
    """Report the task COMPLETED, asking for `next_count` more tasks in the same round trip."""
    done = {"taskId": task["taskId"], "epoch": task["epoch"], "status": "COMPLETED", "output": {"n": 1}}
    body: dict[str, Any] = {"results": [done]}
    if next_count:
        body["next"] = {"workerId": "w", "counts": {"work": next_count}}
    status, answer = await post(plane, f"{API}/tasks/results", body)
    assert status == 200, answer
    return answer


async def decide_all(plane: Plane) -> int:
    """What the decider loop does, pass after pass, until nothing is due."""
    total = 0
    while (decided := await decide_batch(plane.pool, DeciderConfig())) > 0:
        total += decided
    return total


async def test_a_started_run_has_its_first_task_scheduled_when_the_start_answers(plane: Plane) -> None:
    await define_workflow(plane.pool, "one", ONE)
    status, body = await post(plane, f"{API}/executions", {"name": "one"})
    assert status == 201, body
    assert await tasks_of(plane, body["id"]) == {"one": "SCHEDULED"}
    assert await queued(plane, body["id"]) == 0  # its event was consumed by the start's own transaction
    status, batch = await post(plane, f"{API}/executions/starts", {"starts": [{"name": "one"}] * 20})
    assert status == 200, batch
    for item in batch["starts"]:
        assert await tasks_of(plane, item["id"]) == {"one": "SCHEDULED"}
        assert await queued(plane, item["id"]) == 0


async def test_a_plain_start_is_written_decided_and_one_its_first_decision_cannot_make_alone_is_left_to_the_loop(
    plane: Plane,
) -> None:
    """Plain starts are decided before they are written: the run's row is
    written once, decided, with its first tasks, and no event is queued for
    it. A first decision that ends the run is written decided and ends it; one
    that reaches another run (a SUB_WORKFLOW) is written undecided, queued."""
    await define_workflow(plane.pool, "one", ONE)
    inline = {"name": "add", "taskReferenceName": "add", "type": "INLINE", "inputParameters": {"expression": "1 + 1"}}
    await define_workflow(plane.pool, "instant", [inline])
    await define_workflow(
        plane.pool,
        "parent",
        [{"name": "child", "taskReferenceName": "child", "type": "SUB_WORKFLOW", "subWorkflowParam": {"name": "one"}}],
    )
    starts = [{"name": "one"}, {"name": "instant"}, {"name": "parent"}]
    status, batch = await post(plane, f"{API}/executions/starts", {"starts": starts})
    assert status == 200, batch
    one, instant, parent = (item["id"] for item in batch["starts"])
    assert await tasks_of(plane, one) == {"one": "SCHEDULED"} and await queued(plane, one) == 0
    assert await fetchval(plane.pool, "SELECT evaluated FROM executions WHERE id = $1", uuid.UUID(one))
    assert await status_of(plane, instant) == "COMPLETED" and await queued(plane, instant) == 0
    assert await tasks_of(plane, parent) == {} and await queued(plane, parent) == 1  # the loop's
    assert await decide_all(plane) >= 1
    assert await tasks_of(plane, parent) == {"child": "IN_PROGRESS"}


async def test_a_chain_s_next_task_comes_back_with_the_result_and_the_last_result_completes_the_run(
    plane: Plane,
) -> None:
    await define_workflow(plane.pool, "chain", CHAIN)
    await define_workflow(plane.pool, "one", ONE)
    _, chain = await post(plane, f"{API}/executions", {"name": "chain"})
    [first] = await poll(plane)
    answer = await complete(plane, first)
    [second] = answer["tasks"]  # scheduled and leased by the very request that completed the first
    assert second["executionId"] == chain["id"] and second["referenceName"] == "two"
    answer = await complete(plane, second)
    assert answer["tasks"] == []
    assert await status_of(plane, chain["id"]) == "COMPLETED"
    # A one-task run, reported without `next`, is finished by its result's transaction too.
    _, one = await post(plane, f"{API}/executions", {"name": "one"})
    [task] = await poll(plane)
    await complete(plane, task, next_count=0)
    assert await status_of(plane, one["id"]) == "COMPLETED"
    assert await queued(plane, one["id"]) == 0 and await queued(plane, chain["id"]) == 0


async def test_a_run_another_transaction_holds_is_left_to_the_loop_which_decides_it(
    plane: Plane, database_url: str
) -> None:
    await define_workflow(plane.pool, "chain", CHAIN)
    _, run = await post(plane, f"{API}/executions", {"name": "chain"})
    [first] = await poll(plane)
    holder = await asyncpg.connect(database_url)
    listener = await asyncpg.connect(database_url)
    woken = asyncio.Event()
    await listener.add_listener(DECIDE_CHANNEL, lambda *_: woken.set())
    try:
        # What a decider (of this replica or another) deciding the run holds.
        holding = holder.transaction()
        await holding.start()
        await holder.execute("SELECT 1 FROM executions WHERE id = $1 FOR UPDATE", uuid.UUID(run["id"]))
        # The result does not wait for the lock: it answers, its run left queued.
        answer = await asyncio.wait_for(complete(plane, first), 10)
        assert answer["tasks"] == [] and answer["results"][0]["code"] == 200
        assert await tasks_of(plane, run["id"]) == {"one": "COMPLETED"}
        assert await queued(plane, run["id"]) == 1
        await asyncio.wait_for(woken.wait(), 10)  # every replica's decider is told
        await holding.rollback()
    finally:
        await holder.close()
        await listener.close()
    assert await decide_all(plane) == 1
    assert await tasks_of(plane, run["id"]) == {"one": "COMPLETED", "two": "SCHEDULED"}
    assert await queued(plane, run["id"]) == 0


async def test_a_run_with_branches_still_in_flight_is_left_to_the_loop_and_its_last_branch_decides_it(
    plane: Plane, database_url: str
) -> None:
    """Each branch's result would decide the fork again: the loop decides it
    once for many; the result of the last branch in flight decides it inline."""
    branches = [[{"name": "work", "taskReferenceName": f"b{i}"}] for i in range(3)]
    await define_workflow(
        plane.pool,
        "fan",
        [
            {"name": "fan", "taskReferenceName": "fan", "type": "FORK_JOIN", "forkTasks": branches},
            {"name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": ["b0", "b1", "b2"]},
            {"name": "work", "taskReferenceName": "after"},
        ],
    )
    _, run = await post(plane, f"{API}/executions", {"name": "fan"})
    first, second, last = await poll(plane, count=3)  # the start forked the run inline
    listener = await asyncpg.connect(database_url)
    woken = [asyncio.Event()]
    await listener.add_listener(DECIDE_CHANNEL, lambda *_: woken[-1].set())
    try:
        for n, task in enumerate((first, second), start=1):
            woken.append(asyncio.Event())
            answer = await complete(plane, task)
            assert answer["tasks"] == [] and answer["results"][0]["code"] == 200
            assert await queued(plane, run["id"]) == n  # left for the loop,
            await asyncio.wait_for(woken[-1].wait(), 10)  # which is told
    finally:
        await listener.close()
    [after] = (await complete(plane, last))["tasks"]
    assert after["referenceName"] == "after" and after["executionId"] == run["id"]
    assert (await tasks_of(plane, run["id"]))["join"] == "COMPLETED"
    assert await queued(plane, run["id"]) == 0  # the events the others left were consumed with it


# A trigger stands in for anything that makes applying a decision fail.
_REFUSE = """
CREATE FUNCTION refuse_task() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.ref = 'refused' THEN RAISE EXCEPTION 'this task cannot be stored'; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_task BEFORE INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION refuse_task();
"""


async def test_a_decision_that_fails_inline_falls_back_to_the_loop_and_loses_nothing(
    plane: Plane, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deciding, "_inline_failures", deciding._InlineFailures())  # none logged yet
    await define_workflow(plane.pool, "refused_first", [{"name": "work", "taskReferenceName": "refused"}])
    await define_workflow(plane.pool, "refused_second", [*ONE, {"name": "work", "taskReferenceName": "refused"}])
    await define_workflow(plane.pool, "poisoned", ONE)
    async with plane.pool.acquire() as conn:
        await conn.execute(_REFUSE)
        # A spec no model accepts: the decider would quarantine the run.
        await conn.execute(
            'UPDATE workflow_versions SET spec = \'{"tasks": "not a list"}\' WHERE namespace = $1 AND name = $2',
            NS,
            "poisoned",
        )
    status, refused_first = await post(plane, f"{API}/executions", {"name": "refused_first"})
    assert status == 201, refused_first
    assert await tasks_of(plane, refused_first["id"]) == {} and await queued(plane, refused_first["id"]) == 1
    status, poisoned = await post(plane, f"{API}/executions", {"name": "poisoned"})
    assert status == 201, poisoned
    assert await queued(plane, poisoned["id"]) == 1  # not quarantined inline: that is the loop's job
    # In a batch, the one run that fails costs the others nothing but their inline decision.
    status, batch = await post(plane, f"{API}/executions/starts", {"starts": [{"name": "refused_second"}] * 3})
    assert status == 200 and [i["code"] for i in batch["starts"]] == [201] * 3, batch
    leased = await poll(plane, count=3)
    assert len(leased) == 3
    # Each result's decision fails on its second task: the results still apply.
    for task in leased:
        answer = await complete(plane, task)
        assert answer["tasks"] == [] and answer["results"][0]["code"] == 200
    for item in batch["starts"]:
        assert await tasks_of(plane, item["id"]) == {"one": "COMPLETED"}
        assert await queued(plane, item["id"]) == 1
    # Four failures, one line (then at most one a minute): a storm does not flood the log.
    failures = [r for r in caplog.records if "inline failed" in r.getMessage()]
    assert len(failures) == 1 and "this task cannot be stored" in failures[0].getMessage()
    async with plane.pool.acquire() as conn:
        await conn.execute("DROP TRIGGER refuse_task ON tasks")
    assert await decide_all(plane) == 4  # the poisoned run is quarantined, not decided
    assert await tasks_of(plane, refused_first["id"]) == {"refused": "SCHEDULED"}
    for item in batch["starts"]:
        assert await tasks_of(plane, item["id"]) == {"one": "COMPLETED", "refused": "SCHEDULED"}
    assert await fetchval(
        plane.pool, "SELECT quarantined_at IS NOT NULL FROM executions WHERE id = $1", uuid.UUID(poisoned["id"])
    )


async def test_off_the_loop_decides_every_run(pool: Pool, database_url: str) -> None:
    await define_workflow(pool, "chain", CHAIN)
    async with execution_plane(pool, database_url, decide_inline=False, decider_loop=False) as plane:
        _, run = await post(plane, f"{API}/executions", {"name": "chain"})
        assert await tasks_of(plane, run["id"]) == {} and await queued(plane, run["id"]) == 1
        assert await decide_all(plane) == 1
        [first] = await poll(plane)
        answer = await complete(plane, first)
        assert answer["tasks"] == [] and await queued(plane, run["id"]) == 1
    async with execution_plane(pool, database_url, decide_inline=False) as plane:
        [second] = await poll_until(plane)
        await complete(plane, second, next_count=0)
        assert (await finished(plane, run["id"]))["status"] == "COMPLETED"


async def poll_until(plane: Plane) -> list[dict[str, Any]]:
    """A long poll: the decider loop schedules the task in its own time."""
    status, body = await post(
        plane, f"{API}/tasks/poll", {"taskTypes": ["work"], "workerId": "w", "count": 1, "pollTimeoutSeconds": 10}
    )
    assert status == 200 and body["tasks"], body
    tasks: list[dict[str, Any]] = body["tasks"]
    return tasks
