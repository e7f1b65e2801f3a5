"""Outages cost latency, never work, and never do work twice unnoticed.

- PostgreSQL down: the API answers 503 with Retry-After, and a worker's result
  reported meanwhile is applied once it is back, not dropped (found by the
  fault suite: the API answered 500 and the SDK gave the results up, so each
  task came back only when its lease expired, an hour by default).
- A worker lost: its task's retry is a new attempt with a new task id, so the
  key a side effect must be given is the SDK's `idempotency_key`, the same for
  every attempt, not the task id.

These tests crash a PostgreSQL of their own, never the session's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from sluiceway.controls.breaker import BreakerConfig, Breakers
from sluiceway.devenv.postgres import LocalPostgres
from sluiceway.systemtasks import runner as system_runner
from sluiceway.systemtasks.http import HttpTasks
from sluiceway.systemtasks.runner import SystemTaskRunner
from sluiceway.worker import Task, Worker
from tests.support.plane import Plane, Running, finished, get, post
from tests.support.store import NS, define_task, define_workflow
from tests.support.waiting import eventually_async


@pytest.fixture
def server() -> Iterator[LocalPostgres]:
    with LocalPostgres(settings={"synchronous_commit": "on"}) as postgres:
        yield postgres


@pytest.fixture
def database_url(server: LocalPostgres) -> str:
    """Every fixture built on the database (pool, plane) uses this crashable server."""
    return server.dsn


async def _start(plane: Plane, workflow: str) -> tuple[int, dict[str, Any], str | None]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{plane.url}/v1/ns/{NS}/executions", json={"name": workflow}) as response,
    ):
        return response.status, await response.json(), response.headers.get("Retry-After")


async def test_the_api_answers_503_with_retry_after_while_the_database_is_down(
    plane: Plane, server: LocalPostgres
) -> None:
    await define_workflow(plane.pool, "nightly", [{"name": "export", "taskReferenceName": "export"}])
    await asyncio.to_thread(server.crash)
    status, body, retry_after = await _start(plane, "nightly")
    assert (status, body["error"], retry_after) == (503, "UNAVAILABLE", "1"), body
    assert "database" in body["message"] or "backing service" in body["message"]
    await asyncio.to_thread(server.start, port=server.port)
    status, body, _ = await eventually_async(lambda: _started(plane, "nightly"), timeout=20, what="a start to succeed")
    assert status == 201 and body["status"] == "RUNNING"


async def _started(plane: Plane, workflow: str) -> tuple[int, dict[str, Any], str | None] | None:
    answer = await _start(plane, workflow)
    return answer if answer[0] == 201 else None


async def test_a_result_reported_while_the_database_restarts_is_applied_not_dropped(
    plane: Plane, server: LocalPostgres
) -> None:
    await define_workflow(plane.pool, "single", [{"name": "export", "taskReferenceName": "export"}])
    worker = Worker(plane.url, NS, poll_timeout=1)
    leased, release = asyncio.Event(), asyncio.Event()

    @worker.task("export")
    async def export(task: Task) -> dict[str, Any]:
        leased.set()
        await release.wait()
        return {"exported": True}

    async with Running(worker):
        status, run, _ = await _start(plane, "single")
        assert status == 201
        await asyncio.wait_for(leased.wait(), 20)
        await asyncio.to_thread(server.crash)
        release.set()  # the result goes out while the database is down
        await asyncio.sleep(1.0)
        await asyncio.to_thread(server.start, port=server.port)
        # The default lease is an hour: only a result that was kept and sent again ends the run in time.
        body = await finished(plane, run["id"])
    assert body["status"] == "COMPLETED"
    assert [(t["referenceName"], t["attempt"], t["status"]) for t in body["tasks"]] == [("export", 1, "COMPLETED")]
    assert worker.completed == 1
    _, again = await get(plane, f"/v1/ns/{NS}/executions/{run['id']}")
    assert again["output"] == body["output"]


async def test_a_lost_workers_retry_has_a_new_task_id_and_the_same_idempotency_key(plane: Plane) -> None:
    await define_task(plane.pool, "charge", heartbeatTimeout=1, retryCount=2, retryDelaySeconds=0)
    await define_workflow(plane.pool, "pay", [{"name": "charge", "taskReferenceName": "charge"}])
    status, run, _ = await _start(plane, "pay")
    assert status == 201
    # A worker leases the task and dies without a word: no heartbeat, no result.
    _, polled = await post(
        plane, f"/v1/ns/{NS}/tasks/poll", {"taskTypes": ["charge"], "workerId": "lost", "pollTimeoutSeconds": 5}
    )
    (lost,) = polled["tasks"]
    lost_task = Task.from_wire(lost)
    worker = Worker(plane.url, NS, poll_timeout=1)
    keys: list[tuple[str, str]] = []

    @worker.task("charge")
    async def charge(task: Task) -> dict[str, Any]:
        keys.append((task.task_id, task.idempotency_key))
        return {}

    async with Running(worker):
        body = await finished(plane, run["id"])
    assert body["status"] == "COMPLETED"
    ((retry_id, retry_key),) = keys
    assert retry_id != lost_task.task_id, "the retry is a new attempt with its own id"
    assert retry_key == lost_task.idempotency_key == f"{run['id']}/charge"


async def test_the_system_task_runner_waits_out_an_outage_instead_of_ending(
    plane: Plane, server: LocalPostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the failover scenario (e2e/faults/test_failover.py): the runner
    read the database while idle outside its outage guard, so a failover's
    ~10 s without a primary ended the system-task part, and with it the operator."""
    assert plane.core is not None
    monkeypatch.setattr(system_runner, "_RECHECK", 0.1)  # idle passes that read the database often
    stop = asyncio.Event()
    runner = SystemTaskRunner(plane.core, [HttpTasks(Breakers(BreakerConfig()))])
    running = asyncio.create_task(runner.run(stop))
    try:
        await asyncio.sleep(0.5)  # idle, waiting for a system task
        await asyncio.to_thread(server.crash)
        await asyncio.sleep(3.0)  # several passes find no database, idle or leasing
        assert not running.done(), running.exception() if running.done() else None
        await asyncio.to_thread(server.start, port=server.port)
        stop.set()
        await asyncio.wait_for(running, 30)  # ends because it was stopped, without an error
    finally:
        running.cancel()
