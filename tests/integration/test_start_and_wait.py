"""Start and wait: `POST .../executions?wait=` and `GET .../{id}?wait=`
answer when the run ends, woken by its end (no polling), on a real
PostgreSQL; the SDK's `Client.execute` and the CLI's `runs start --wait`
on top of them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import asyncpg
import pytest
from typer.testing import CliRunner

from sluiceway.engine.commands import FinishRun
from sluiceway.model.execution import RunStatus
from sluiceway.runtime.main import app
from sluiceway.store import endings, wakeups
from sluiceway.store.database import Pool
from sluiceway.worker import Client, RunFailed, StillRunning, Task, TerminalError, Worker
from tests.support.plane import Plane, Running, execution_plane, get, post
from tests.support.store import NS, define_workflow, start
from tests.support.waiting import eventually_async

RUNS = f"/v1/ns/{NS}/executions"


async def _echo_workflow(plane: Plane) -> Worker:
    """A one-task workflow `echo` whose output is its input, and a worker for it (not running yet)."""
    await define_workflow(
        plane.pool,
        "echo",
        [{"name": "echo", "taskReferenceName": "e", "inputParameters": {"said": "${workflow.input.say}"}}],
        outputParameters={"said": "${e.output.said}"},
    )
    worker = Worker(plane.url, NS, poll_timeout=2)

    @worker.task("echo", concurrency=32)
    async def echo(task: Task) -> dict[str, Any]:
        if task.input["said"] == "fail":
            raise TerminalError("told to fail")
        return {"said": task.input["said"]}

    return worker


async def _waiters(plane: Plane, count: int) -> None:
    assert plane.core is not None
    core = plane.core

    async def waiting() -> bool:
        return core.run_waiters == count

    await eventually_async(waiting, what=f"{count} waiters")


async def test_a_start_that_waits_answers_with_the_runs_output(plane: Plane) -> None:
    async with Running(await _echo_workflow(plane)):
        status, run = await post(plane, f"{RUNS}?wait=20s", {"name": "echo", "input": {"say": "hi"}})
    assert status == 200, run
    assert run["status"] == "COMPLETED" and run["output"] == {"said": "hi"}
    assert run["id"] and run["tasks"] == []


async def test_a_failed_runs_wait_answers_its_status_and_reason(plane: Plane) -> None:
    async with Running(await _echo_workflow(plane)):
        status, run = await post(plane, f"{RUNS}?wait=20", {"name": "echo", "input": {"say": "fail"}})
    assert status == 200, run
    assert run["status"] == "FAILED" and "told to fail" in run["reasonForIncompletion"]


async def test_a_wait_that_ends_first_answers_the_id_and_status_and_a_retry_reattaches(plane: Plane) -> None:
    worker = await _echo_workflow(plane)
    start_body = {"name": "echo", "input": {"say": "later"}, "requestId": "order-7"}
    status, first = await post(plane, f"{RUNS}?wait=0.3s", start_body)
    assert status == 202, first
    assert first["status"] == "RUNNING" and first["created"] is True
    # A retried start (same requestId) waits for the same run, which ends once a worker runs.
    retried = asyncio.create_task(post(plane, f"{RUNS}?wait=30s", start_body))
    await _waiters(plane, 1)
    async with Running(worker):
        status, run = await retried
    assert status == 200 and run["id"] == first["id"] and run["output"] == {"said": "later"}
    # A read that waits for a run already ended answers at once.
    status, read = await get(plane, f"{RUNS}/{first['id']}?wait=30s")
    assert status == 200 and read["status"] == "COMPLETED" and [t["referenceName"] for t in read["tasks"]] == ["e"]


async def test_a_read_that_waits_answers_when_the_run_ends_or_as_it_is(plane: Plane) -> None:
    worker = await _echo_workflow(plane)
    _, started = await post(plane, RUNS, {"name": "echo", "input": {"say": "x"}})
    status, still = await get(plane, f"{RUNS}/{started['id']}?wait=0.2s&include_tasks=false")
    assert status == 200 and still["status"] == "RUNNING"
    waiting = asyncio.create_task(get(plane, f"{RUNS}/{started['id']}?wait=30s"))
    await _waiters(plane, 1)
    async with Running(worker):
        status, run = await waiting
    assert status == 200 and run["status"] == "COMPLETED" and run["output"] == {"said": "x"}
    status, missing = await get(plane, f"{RUNS}/{uuid.uuid4()}?wait=1s")
    assert status == 404, missing


async def test_hundreds_of_waiters_are_each_answered_by_their_runs_end_without_rereading(plane: Plane) -> None:
    worker = await _echo_workflow(plane)
    assert plane.core is not None
    count, reads_before = 200, plane.core.run_reads
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def start_and_wait(n: int) -> tuple[int, Any]:
            body = {"name": "echo", "input": {"say": f"n{n}"}}
            async with http.post(f"{plane.url}{RUNS}?wait=60s", json=body) as response:
                return response.status, await response.json()

        answers = [asyncio.create_task(start_and_wait(n)) for n in range(count)]
        await _waiters(plane, count)  # every run started, none can end: no worker yet
        async with Running(worker):
            done = await asyncio.gather(*answers)
    assert [status for status, _ in done] == [200] * count
    assert sorted(run["output"]["said"] for _, run in done) == sorted(f"n{n}" for n in range(count))
    assert len({run["id"] for _, run in done}) == count
    # Each waiter read its run once on arrival and once when its end woke it: never on a timer.
    assert plane.core.run_reads - reads_before <= 2 * count
    assert plane.core.run_waiters == 0


@pytest.fixture
async def capped(pool: Pool, database_url: str) -> AsyncIterator[Plane]:
    async with execution_plane(pool, database_url, max_run_waiters=2) as running:
        yield running


async def test_waiters_beyond_the_cap_are_refused_and_a_caller_that_hangs_up_frees_its_slot(capped: Plane) -> None:
    plane = capped
    await _echo_workflow(plane)  # no worker: the run never ends
    _, started = await post(plane, RUNS, {"name": "echo", "input": {"say": "never"}})
    wait_on_it = f"{plane.url}{RUNS}/{started['id']}?wait=60s"
    async with aiohttp.ClientSession() as http, aiohttp.ClientSession() as hanging_up:
        first = asyncio.create_task(hanging_up.get(wait_on_it))
        second = asyncio.create_task(http.get(wait_on_it))
        try:
            await _waiters(plane, 2)
            async with http.get(wait_on_it) as refused:
                assert refused.status == 429
                assert refused.headers["Retry-After"] == "1"
                body = await refused.json()
            assert body["error"] == "TOO_MANY_WAITERS" and body["limit"] == 2
            async with http.post(f"{plane.url}{RUNS}?wait=10s", json={"name": "echo"}) as refused_start:
                assert refused_start.status == 429
            _, runs = await get(plane, RUNS)
            assert [run["id"] for run in runs["items"]] == [started["id"]]  # the refused start started nothing
            await hanging_up.close()  # the caller hangs up: its slot is free again
            await _waiters(plane, 1)
            async with http.get(f"{plane.url}{RUNS}/{started['id']}?wait=0.1s") as answered:
                assert answered.status == 200
        finally:
            for request in (first, second):
                request.cancel()
            await asyncio.gather(first, second, return_exceptions=True)


@pytest.mark.parametrize("wait", ["61s", "2m", "soon", "-1"])
async def test_a_wait_beyond_the_bound_or_unreadable_is_refused_naming_it(plane: Plane, wait: str) -> None:
    status, body = await post(plane, f"{RUNS}?wait={wait}", {"name": "echo"})
    assert status == 422 and [f["field"] for f in body["fields"]] == ["wait"], body
    status, body = await get(plane, f"{RUNS}/{uuid.uuid4()}?wait={wait}")
    assert status == 422 and [f["field"] for f in body["fields"]] == ["wait"], body


async def test_runs_ending_together_are_announced_in_notifications_within_notifys_payload(
    pool: Pool, database_url: str
) -> None:
    await define_workflow(pool, "idle", [{"name": "never", "taskReferenceName": "n"}])
    run_ids = [await start(pool, "idle") for _ in range(450)]
    heard: list[str] = []
    listener = await asyncpg.connect(database_url)
    try:
        await listener.add_listener(wakeups.ENDED_CHANNEL, lambda *args: heard.append(args[3]))
        async with pool.acquire() as conn, conn.transaction():
            finishing = [endings.Finishing(r, NS, FinishRun(RunStatus.TERMINATED, "test")) for r in run_ids]
            await endings.finish_runs(conn, finishing)

        async def all_heard() -> bool:
            return len(heard) == 3

        await eventually_async(all_heard, what="three notifications")
    finally:
        await listener.close()
    assert sorted(len(wakeups.parse_ended(payload)) for payload in heard) == [50, 200, 200]
    assert sorted(r for payload in heard for r in wakeups.parse_ended(payload)) == sorted(run_ids)
    assert max(len(payload.encode()) for payload in heard) < 8000


async def test_the_sdk_executes_a_run_and_raises_what_kept_it_from_its_output(plane: Plane) -> None:
    worker = await _echo_workflow(plane)
    async with Client(plane.url, NS) as client:
        with pytest.raises(StillRunning) as still:
            await client.execute("echo", {"say": "slow"}, timeout=0.5)
        assert still.value.status == "RUNNING"
        async with Running(worker):
            assert await client.execute("echo", {"say": "hello"}, timeout=30) == {"said": "hello"}
            with pytest.raises(RunFailed) as failed:
                await client.execute("echo", {"say": "fail"}, timeout=30)
            run = await client.wait(still.value.run_id, timeout=30)
    assert failed.value.status == "FAILED" and "told to fail" in failed.value.reason
    assert run["status"] == "COMPLETED" and run["output"] == {"said": "slow"}


async def test_the_cli_starts_and_waits_on_the_server(plane: Plane) -> None:
    worker = await _echo_workflow(plane)
    command = ["runs", "start", "echo", "-p", "say=cli", "--wait", "-n", NS, "--server", plane.url]
    waiting = asyncio.create_task(asyncio.to_thread(CliRunner().invoke, app(), command))
    await _waiters(plane, 1)  # the command waits on the server, not in a polling loop
    async with Running(worker):
        result = await waiting
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "started (RUNNING)" in result.stdout and "COMPLETED" in result.stdout + result.stderr
