"""A long poll waiting on an ungated queue is leased the task the decider
schedules for it in the decider's own transaction (store.matching), on a real
PostgreSQL with the real HTTP API and decider loop.

Whose transaction leased a task shows in its row: a row's `xmin` is the
transaction that wrote its current version. Matched, the lease and the run's
"decided" mark share one; left to the poll, the lease is a transaction of its
own. The same check with matching off (and for a capped type, which never
matches) shows the other outcome, so the check can fail."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import REGISTRY

from sluiceway.store import matching
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
