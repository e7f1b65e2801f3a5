"""A long poll waiting on an ungated queue is leased the task the decider
schedules for it in the decider's own transaction (store.matching), on a real
PostgreSQL with the real HTTP API and decider loop.

Whose transaction leased a task shows in its row: a row's `xmin` is the
transaction that wrote its current version. Matched, the lease and the run's
"decided" mark share one; left to the poll, the lease is a transaction of its
own. The same check with matching off (and for a capped type, which never
matches) shows the other outcome, so the check can fail. With inline
deciding, the start's or the result's own transaction is the one that matches."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prometheus_client import REGISTRY

from sluiceway.store import audit, matching
from sluiceway.store.database import Pool
from tests.support.plane import Plane, execution_plane, post
from tests.support.store import NS, define_task, define_workflow
from tests.support.waiting import eventually_async

API = f"/v1/ns/{NS}"


@pytest.fixture
async def plane(pool: Pool, database_url: str) -> AsyncIterator[Plane]:
    async with execution_plane(pool, database_url) as running:
        yield running


async def long_poll(plane: Plane, task_type: str = "work", count: int = 1, worker: str = "w") -> list[dict[str, Any]]:
    body = {"taskTypes": [task_type], "workerId": worker, "count": count, "pollTimeoutSeconds": 20}
    status, answer = await post(plane, f"{API}/tasks/poll", body)
    assert status == 200, answer
    tasks: list[dict[str, Any]] = answer["tasks"]
    return tasks


async def polls_waiting(plane: Plane, count: int) -> None:
    """Until `count` polls stand as offers (only they can be matched)."""
    assert plane.offers is not None

    async def probe() -> bool | None:
        return True if plane.offers is not None and len(plane.offers) == count else None

    await eventually_async(probe, timeout=10, what=f"{count} polls waiting")


async def leased_by_the_decider(plane: Plane, task: dict[str, Any]) -> bool:
    """Whether the task's lease was written by the transaction that marked its run decided."""
    async with plane.pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT t.xmin::text AS task, e.xmin::text AS run, t.status, t.epoch, t.worker_id FROM tasks t"
            " JOIN executions e ON e.id = t.execution_id WHERE t.id = $1",
            uuid.UUID(task["taskId"]),
        )
    assert row["status"] == "IN_PROGRESS" and row["epoch"] == task["epoch"] == 1
    return bool(row["task"] == row["run"])


def leases_asked() -> float:
    """How many times a poll asked the database for tasks (each poll's lease is timed)."""
    return REGISTRY.get_sample_value("sluiceway_lease_seconds_count") or 0.0


def matched_so_far() -> float:
    return REGISTRY.get_sample_value("sluiceway_tasks_matched_total", {"namespace": NS}) or 0.0


async def count_runs(plane: Plane) -> int:
    async with plane.pool.acquire() as conn:
        return int(await conn.fetchval("SELECT count(*) FROM executions WHERE namespace = $1", NS))


async def test_a_waiting_poll_is_leased_its_task_in_the_deciders_transaction(plane: Plane) -> None:
    await define_workflow(plane.pool, "one", [{"name": "work", "taskReferenceName": "one"}])
    before = matched_so_far()
    waiting = asyncio.create_task(long_poll(plane))
    await polls_waiting(plane, 1)
    status, run = await post(plane, f"{API}/executions", {"name": "one"})
    assert status == 201, run
    [task] = await asyncio.wait_for(waiting, 15)
    assert task["executionId"] == run["id"] and task["referenceName"] == "one"
    assert await leased_by_the_decider(plane, task)
    assert matched_so_far() == before + 1
    assert plane.offers is not None and len(plane.offers) == 0  # an answered poll stands no more


async def test_waiting_polls_are_matched_oldest_first_each_task_to_one_poll(plane: Plane) -> None:
    await define_workflow(plane.pool, "one", [{"name": "work", "taskReferenceName": "one"}])
    polls = []
    for n in range(3):
        polls.append(asyncio.create_task(long_poll(plane, worker=f"w{n}")))
        await polls_waiting(plane, n + 1)
    asked = leases_asked()
    status, batch = await post(plane, f"{API}/executions/starts", {"starts": [{"name": "one"}] * 2})
    assert status == 200, batch
    answered = await asyncio.wait_for(asyncio.gather(polls[0], polls[1]), 15)
    # The two oldest polls got one task each, in the pass that scheduled them; the third still waits,
    # never woken: every new task went to a poll, so the pass told nobody of its queue.
    assert [len(tasks) for tasks in answered] == [1, 1]
    await asyncio.sleep(0.3)
    assert not polls[2].done() and plane.offers is not None and len(plane.offers) == 1
    assert leases_asked() == asked, "a poll was woken to ask for tasks that were all leased already"
    assert {tasks[0]["executionId"] for tasks in answered} == {item["id"] for item in batch["starts"]}
    for tasks in answered:
        assert await leased_by_the_decider(plane, tasks[0])
    status, third = await post(plane, f"{API}/executions", {"name": "one"})
    assert status == 201, third
    [task] = await asyncio.wait_for(polls[2], 15)
    assert task["executionId"] == third["id"]
    assert await leased_by_the_decider(plane, task)


async def test_a_capped_type_is_leased_by_its_poll_under_the_gate(plane: Plane) -> None:
    await define_task(plane.pool, "capped", concurrentExecLimit=1)
    await define_workflow(plane.pool, "gated", [{"name": "capped", "taskReferenceName": "one"}])
    waiting = asyncio.create_task(long_poll(plane, "capped"))
    await asyncio.sleep(0.3)  # a gated poll never stands as an offer, so nothing to wait for
    assert plane.offers is not None and len(plane.offers) == 0
    status, run = await post(plane, f"{API}/executions", {"name": "gated"})
    assert status == 201, run
    [task] = await asyncio.wait_for(waiting, 15)
    assert not await leased_by_the_decider(plane, task)


async def test_with_matching_off_the_poll_leases_in_its_own_transaction(pool: Pool, database_url: str) -> None:
    async with execution_plane(pool, database_url, match_polls=False) as plane:
        await define_workflow(plane.pool, "one", [{"name": "work", "taskReferenceName": "one"}])
        waiting = asyncio.create_task(long_poll(plane))
        await asyncio.sleep(0.3)
        status, run = await post(plane, f"{API}/executions", {"name": "one"})
        assert status == 201, run
        [task] = await asyncio.wait_for(waiting, 15)
        assert not await leased_by_the_decider(plane, task)


async def test_a_claim_rolled_back_leaves_the_poll_to_lease_the_task_itself(
    plane: Plane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decider's pass fails after it leased a task to a waiting poll: its
    lease is undone with it, the poll is answered with nothing and asks the
    database itself, and gets the task the one-by-one pass then schedules."""
    await define_workflow(plane.pool, "one", [{"name": "work", "taskReferenceName": "one"}])
    lease_to = matching.lease_to
    failed = []

    async def lease_then_fail(conn: Any, claimed: list[matching.Offer], tasks: Any) -> int:
        leased = await lease_to(conn, claimed, tasks)
        if not failed:
            failed.append(leased)
            raise RuntimeError("injected: the pass fails after leasing to a waiting poll")
        return leased

    monkeypatch.setattr(matching, "lease_to", lease_then_fail)
    waiting = asyncio.create_task(long_poll(plane))
    await polls_waiting(plane, 1)
    status, run = await post(plane, f"{API}/executions", {"name": "one"})
    assert status == 201, run
    [task] = await asyncio.wait_for(waiting, 15)
    assert failed == [1]  # the pass did lease it to the poll before it failed
    assert task["executionId"] == run["id"]
    assert not await leased_by_the_decider(plane, task)  # epoch 1: the rolled-back lease left no trace


# -- inline deciding (SLUICEWAY_DECIDE_INLINE): the start's or the result's transaction matches


@pytest.fixture
async def inline_plane(pool: Pool, database_url: str) -> AsyncIterator[Plane]:
    """Starts and results decide inline, and no decider loop runs: only their transactions can match."""
    async with execution_plane(pool, database_url, decide_inline=True, decider_loop=False) as running:
        yield running


async def test_inline_a_waiting_poll_is_leased_its_task_in_the_starts_transaction(inline_plane: Plane) -> None:
    plane = inline_plane
    await define_workflow(plane.pool, "one", [{"name": "work", "taskReferenceName": "one"}])
    before = matched_so_far()
    waiting = asyncio.create_task(long_poll(plane))
    await polls_waiting(plane, 1)
    asked = leases_asked()
    status, run = await post(plane, f"{API}/executions", {"name": "one"})
    assert status == 201, run
    [task] = await asyncio.wait_for(waiting, 15)
    assert task["executionId"] == run["id"]
    assert await leased_by_the_decider(plane, task)  # the start's transaction wrote both
    assert matched_so_far() == before + 1
    assert leases_asked() == asked, "the poll asked the database for a task it had been leased"


async def test_inline_a_start_rolled_back_answers_its_claimed_poll_with_nothing(
    inline_plane: Plane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start's transaction fails after its inline decision leased the new
    task to a waiting poll: the run, its task and the lease are all undone,
    the poll is answered with nothing, asks the database, finds nothing and
    waits again; the next start's task is its own."""
    plane = inline_plane
    await define_workflow(plane.pool, "one", [{"name": "work", "taskReferenceName": "one"}])
    record = audit.record  # the last thing a command's transaction does, after its inline decisions
    failed: list[int] = []

    async def fail_once(*args: Any) -> Any:
        if not failed:
            failed.append(1)
            raise RuntimeError("injected: the start fails after deciding its run inline")
        return await record(*args)

    lease_to = matching.lease_to
    leased: list[int] = []

    async def counted(conn: Any, claimed: list[matching.Offer], tasks: Any) -> int:
        leased.append(await lease_to(conn, claimed, tasks))
        return leased[-1]

    monkeypatch.setattr(audit, "record", fail_once)
    monkeypatch.setattr(matching, "lease_to", counted)
    waiting = asyncio.create_task(long_poll(plane))
    await polls_waiting(plane, 1)
    matched = matched_so_far()
    try:
        status, _ = await post(plane, f"{API}/executions", {"name": "one"})
    except aiohttp.ClientError:  # the server may drop the connection of a request that raised
        status = 500
    assert failed == [1] and status == 500
    assert leased == [1]  # the failed start had leased its task to the waiting poll
    assert await count_runs(plane) == 0  # rolled back: no run, so no task to have been leased
    await polls_waiting(plane, 1)  # answered with nothing by the rollback, it stands again
    assert not waiting.done() and matched_so_far() == matched
    status, run = await post(plane, f"{API}/executions", {"name": "one"})
    assert status == 201, run
    [task] = await asyncio.wait_for(waiting, 15)
    assert task["executionId"] == run["id"] and task["epoch"] == 1
    assert await leased_by_the_decider(plane, task) and leased == [1, 1]


async def test_inline_a_chains_next_task_goes_back_with_the_result_not_to_a_waiting_poll(
    inline_plane: Plane,
) -> None:
    """A result that asks for `next` of the type its run's next step is of
    gets that step in its own answer; another poll waiting on the queue is
    not matched with it."""
    plane = inline_plane
    steps = [{"name": "work", "taskReferenceName": "one"}, {"name": "work", "taskReferenceName": "two"}]
    await define_workflow(plane.pool, "chain", steps)
    first = asyncio.create_task(long_poll(plane, worker="w1"))
    await polls_waiting(plane, 1)
    status, run = await post(plane, f"{API}/executions", {"name": "chain"})
    assert status == 201, run
    [one] = await asyncio.wait_for(first, 15)
    other = asyncio.create_task(long_poll(plane, worker="w2"))
    await polls_waiting(plane, 1)
    done = {"taskId": one["taskId"], "epoch": one["epoch"], "status": "COMPLETED", "output": {}}
    body = {"results": [done], "next": {"workerId": "w1", "counts": {"work": 1}}}
    status, answer = await post(plane, f"{API}/tasks/results", body)
    assert status == 200, answer
    [two] = answer["tasks"]
    assert two["executionId"] == run["id"] and two["referenceName"] == "two"
    await asyncio.sleep(0.3)
    assert not other.done(), "the waiting poll was handed the step the result's own answer carries"
    other.cancel()
