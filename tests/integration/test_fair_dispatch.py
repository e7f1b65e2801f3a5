"""Fair dispatch of the operator's system-task slots across namespaces, on a
real PostgreSQL with a real local HTTP server: a namespace whose HTTP calls
queue behind another's backlog is served in turn, not after it, and the
Quota's dispatchWeight sets the proportions."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from sluiceway.controls.breaker import BreakerConfig, Breakers
from sluiceway.controls.egress import EgressPolicy
from sluiceway.plane import Plane as ExecutionPlane
from sluiceway.store import definitions, executions, workflows
from sluiceway.store.tenancy import Tenants
from sluiceway.systemtasks.egress import Egress
from sluiceway.systemtasks.http import HttpTasks
from sluiceway.systemtasks.runner import SystemTaskRunner
from tests.support.plane import Plane
from tests.support.store import fetchval
from tests.support.waiting import eventually_async

BUSY, QUIET = "team-busy", "team-quiet"


class Recorder:
    """Answers at once, and remembers which namespace called, in order."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.order.append(request.match_info["namespace"])
        return web.json_response({"ok": True})


@pytest.fixture
async def recorder() -> AsyncIterator[Recorder]:
    found = Recorder()
    app = web.Application()
    app.router.add_get("/{namespace}/{n}", found.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    found.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    yield found
    await runner.cleanup()


async def queue_calls(plane: Plane, namespace: str, url: str, count: int) -> None:
    task: dict[str, Any] = {
        "name": "call",
        "taskReferenceName": "call",
        "type": "HTTP",
        "inputParameters": {"http_request": {"uri": f"{url}/{namespace}/" + "${workflow.input.n}", "method": "GET"}},
    }
    async with plane.pool.acquire() as conn:
        await workflows.upsert_workflow(conn, namespace, "calls", "calls", 1, {"tasks": [task]})
        for n in range(count):
            async with conn.transaction():
                await executions.start_run(conn, namespace, "calls", None, {"n": n})


async def scheduled(plane: Plane, count: int) -> None:
    query = "SELECT count(*) FROM tasks WHERE executor = 'system' AND status = 'SCHEDULED'"
    await eventually_async(
        lambda: _at_least(plane, query, count), timeout=60, what=f"{count} HTTP tasks to be scheduled"
    )


async def _at_least(plane: Plane, query: str, count: int) -> bool | None:
    return (await fetchval(plane.pool, query)) >= count or None


async def run_until(plane: Plane, recorder: Recorder, total: int) -> None:
    stop = asyncio.Event()
    egress = Egress(EgressPolicy(allowed=("127.0.0.1",)))
    core = ExecutionPlane(plane.pool, tenants=Tenants(ttl=0))
    runner = SystemTaskRunner(core, [HttpTasks(Breakers(BreakerConfig()), egress=egress)], concurrency=2)
    running = asyncio.create_task(runner.run(stop))
    try:
        await eventually_async(lambda: _done(recorder, total), timeout=120, what=f"{total} calls", interval=0.1)
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)


async def _done(recorder: Recorder, total: int) -> bool | None:
    return len(recorder.order) >= total or None


async def test_a_small_namespace_is_served_in_turn_behind_a_backlog(plane: Plane, recorder: Recorder) -> None:
    await queue_calls(plane, BUSY, recorder.url, 200)
    await queue_calls(plane, QUIET, recorder.url, 10)
    await scheduled(plane, 210)
    await run_until(plane, recorder, 210)
    last_quiet = max(i for i, namespace in enumerate(recorder.order) if namespace == QUIET)
    print(f"\nthe quiet namespace's 10 calls were done by call {last_quiet + 1} of 210")
    # Shared equally while both wait: its 10 calls among the first ~20, not after the busy 200.
    assert last_quiet < 40, recorder.order[:60]


async def test_the_quota_weight_sets_the_proportions(plane: Plane, recorder: Recorder) -> None:
    async with plane.pool.acquire() as conn:
        await definitions.upsert_quota(conn, QUIET, "weight", 1, None, None, None, None, dispatch_weight=3)
    await queue_calls(plane, BUSY, recorder.url, 100)
    await queue_calls(plane, QUIET, recorder.url, 100)
    await scheduled(plane, 200)
    await run_until(plane, recorder, 200)
    first = recorder.order[:80]
    ratio = first.count(QUIET) / max(1, first.count(BUSY))
    print(f"\nweights 3:1 -> the first 80 calls split {first.count(QUIET)}:{first.count(BUSY)}")
    assert 2.0 <= ratio <= 4.5, first
