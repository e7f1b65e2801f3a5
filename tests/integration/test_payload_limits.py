"""Payload limits at the edge, through the HTTP app on a real PostgreSQL:
every value over its namespace's limit is refused with 413 naming the field
and the limit, before anything is stored; a task result over the limit fails
its task with a reason naming the limit (never truncated); a body over the
request limit is refused as it arrives, declared or not."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, cast

import aiohttp
import asyncpg
import pytest

from sluiceway.store import definitions
from sluiceway.store.database import Pool
from sluiceway.store.definitions import DEFINITIONS_CHANNEL
from sluiceway.store.notifications import Notifications
from sluiceway.store.tenancy import Tenants
from tests.support.plane import Plane, execution_plane, finished, get, post
from tests.support.store import NS, define_workflow, fetchval
from tests.support.waiting import eventually_async

API = f"/v1/ns/{NS}"
OPERATOR_LIMIT = 64 * 1024
REQUEST_LIMIT = 256 * 1024
QUOTA_LIMIT = 4096


@pytest.fixture
async def plane(pool: Pool, database_url: str) -> AsyncIterator[Plane]:
    async with execution_plane(
        pool, database_url, max_payload_bytes=OPERATOR_LIMIT, max_request_bytes=REQUEST_LIMIT
    ) as running:
        yield running


def blob(size: int) -> dict[str, str]:
    """An object of exactly `size` bytes of compact JSON."""
    return {"b": "x" * (size - len('{"b":""}'))}


async def quota(plane: Plane, limit: int) -> None:
    async with plane.pool.acquire() as conn:
        await definitions.upsert_quota(conn, NS, "tenant", 1, None, None, None, None, max_payload_bytes=limit)


def assert_too_large(status: int, body: dict[str, Any], field: str, limit: int, source: str) -> None:
    assert status == 413, body
    assert body["error"] == "PAYLOAD_TOO_LARGE" and body["control"] == "maxPayloadBytes", body
    assert body["field"] == field and body["limit"] == limit and body["limitSource"] == source, body
    assert body["message"].startswith(f"{field}: ") and str(limit) in body["message"], body


async def runs_stored(plane: Plane) -> int:
    return int(await fetchval(plane.pool, "SELECT count(*) FROM executions WHERE namespace = $1", NS))


async def test_a_start_over_the_operator_limit_is_refused_and_stores_nothing(plane: Plane) -> None:
    await define_workflow(plane.pool, "w", [{"name": "work", "taskReferenceName": "work"}])
    status, body = await post(plane, f"{API}/executions", {"name": "w", "input": blob(OPERATOR_LIMIT + 1)})
    assert_too_large(status, body, "input", OPERATOR_LIMIT, "SLUICEWAY_MAX_PAYLOAD_BYTES")
    assert body["size"] == OPERATOR_LIMIT + 1
    assert await runs_stored(plane) == 0
    status, body = await post(plane, f"{API}/executions", {"name": "w", "input": blob(OPERATOR_LIMIT)})
    assert status == 201, body  # exactly at the limit is allowed


async def test_a_quota_lowers_the_limit_of_its_namespace_only(plane: Plane) -> None:
    await quota(plane, QUOTA_LIMIT)
    await define_workflow(plane.pool, "w", [{"name": "work", "taskReferenceName": "work"}])
    status, body = await post(plane, f"{API}/executions", {"name": "w", "input": blob(QUOTA_LIMIT + 1)})
    assert_too_large(status, body, "input", QUOTA_LIMIT, "Quota tenant maxPayloadBytes")
    assert await runs_stored(plane) == 0
    # Another namespace keeps the operator's limit (its workflow is unknown: 404, past the size check).
    status, body = await post(plane, "/v1/ns/team-b/executions", {"name": "w", "input": blob(QUOTA_LIMIT + 1)})
    assert status == 404, body


async def test_a_quota_applies_to_the_very_next_start_once_stored(plane: Plane) -> None:
    await define_workflow(plane.pool, "w", [{"name": "work", "taskReferenceName": "work"}])
    status, body = await post(plane, f"{API}/executions", {"name": "w", "input": blob(QUOTA_LIMIT + 1)})
    assert status == 201, body  # and the namespace's rules (no Quota yet) are now cached
    await quota(plane, QUOTA_LIMIT)
    status, body = await post(plane, f"{API}/executions", {"name": "w", "input": blob(QUOTA_LIMIT + 1)})
    assert_too_large(status, body, "input", QUOTA_LIMIT, "Quota tenant maxPayloadBytes")
    async with plane.pool.acquire() as conn:
        await definitions.delete_quota(conn, NS, "tenant")
    status, body = await post(plane, f"{API}/executions", {"name": "w", "input": blob(QUOTA_LIMIT + 1)})
    assert status == 201, "a deleted Quota stops limiting at once too"


async def test_another_replica_drops_its_rules_when_a_quota_is_stored(pool: Pool, database_url: str) -> None:
    """The replica that stores a Quota applies it before the store returns;
    another replica learns it from the notification the store's transaction
    sends. Here the other replica is a Notifications listener with its own
    rules cache, kept for an hour so only the notification can refresh it;
    the Quota is written as another replica's store writes it, in SQL, with
    the notification of that same transaction."""
    other = Notifications(database_url)
    rules = Tenants(ttl=3600)
    other.caches.append(rules)
    await other.start()
    try:
        assert (await rules.of(pool, NS)).payload_limits == ()
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO quotas (namespace, resource_name, generation, max_payload_bytes)"
                " VALUES ($1, 'far', 1, $2)",
                NS,
                QUOTA_LIMIT,
            )
            await conn.execute("SELECT pg_notify($1, $2)", DEFINITIONS_CHANNEL, NS)

        async def limits_seen() -> tuple[tuple[str, int | None], ...] | None:
            return (await rules.of(pool, NS)).payload_limits or None

        assert await eventually_async(limits_seen, what="the other replica to read the Quota") == (
            ("far", QUOTA_LIMIT),
        )
    finally:
        await other.stop()


async def test_rules_read_across_a_change_are_answered_but_not_kept(pool: Pool) -> None:
    """A read of the rules that began before a Quota was stored and ends after
    answers its request, but the next request reads the Quota."""
    read, go_on = asyncio.Event(), asyncio.Event()

    class PausedAfterReading:
        """A real connection whose reads, once done, wait for the test."""

        def __init__(self, conn: Any) -> None:
            self.conn = conn

        async def fetch(self, *args: Any) -> Any:
            rows = await self.conn.fetch(*args)
            read.set()
            await go_on.wait()
            return rows

    class PausingPool:
        @contextlib.asynccontextmanager
        async def acquire(self) -> AsyncIterator[PausedAfterReading]:
            async with pool.acquire() as conn:
                yield PausedAfterReading(conn)

    rules = Tenants(ttl=3600)
    reading = asyncio.create_task(rules.of(cast(Pool, PausingPool()), NS))
    await read.wait()
    async with pool.acquire() as conn:
        await definitions.upsert_quota(conn, NS, "tenant", 1, None, None, None, None, max_payload_bytes=QUOTA_LIMIT)
    go_on.set()
    assert (await reading).payload_limits == (), "read before the Quota was stored"
    assert (await rules.of(pool, NS)).payload_limits == (("tenant", QUOTA_LIMIT),)


async def test_storing_a_quota_notifies_every_replica(pool: Pool, database_url: str) -> None:
    heard: asyncio.Queue[str] = asyncio.Queue()
    listener = await asyncpg.connect(database_url)
    await listener.add_listener(DEFINITIONS_CHANNEL, lambda *args: heard.put_nowait(args[-1]))
    try:
        async with pool.acquire() as conn:
            await definitions.upsert_quota(conn, NS, "tenant", 1, None, None, None, None, max_payload_bytes=QUOTA_LIMIT)
            assert await asyncio.wait_for(heard.get(), timeout=30) == NS
            await definitions.delete_quota(conn, NS, "tenant")
            assert await asyncio.wait_for(heard.get(), timeout=30) == NS
    finally:
        await listener.close()


async def test_a_body_over_the_request_limit_is_refused_as_it_arrives(plane: Plane) -> None:
    huge = b'{"name": "w", "input": {"b": "' + b"x" * (REQUEST_LIMIT * 4) + b'"}}'
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{plane.url}{API}/executions", data=huge, headers={"Content-Type": "application/json"}
        ) as response:
            declared = response.status, await response.json()

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it is read
            for start in range(0, len(huge), 65536):
                yield huge[start : start + 65536]

        async with http.post(
            f"{plane.url}{API}/executions", data=chunks(), headers={"Content-Type": "application/json"}
        ) as response:
            streamed = response.status, await response.json()
    for status, body in (declared, streamed):
        assert status == 413 and body["error"] == "PAYLOAD_TOO_LARGE", body
        assert str(REQUEST_LIMIT) in body["message"] and "SLUICEWAY_MAX_REQUEST_BYTES" in body["message"], body
    assert await runs_stored(plane) == 0


async def _leased(plane: Plane, task_type: str) -> dict[str, Any]:
    async def one() -> dict[str, Any] | None:
        status, body = await post(
            plane, f"{API}/tasks/poll", {"taskTypes": [task_type], "workerId": "w1", "pollTimeoutSeconds": 0}
        )
        assert status == 200, body
        return body["tasks"][0] if body["tasks"] else None

    return await eventually_async(one, timeout=10, what=f"a {task_type} task to lease")


async def test_a_result_over_the_limit_fails_its_task_with_a_reason_naming_the_limit(plane: Plane) -> None:
    await quota(plane, QUOTA_LIMIT)
    await define_workflow(plane.pool, "w", [{"name": "work", "taskReferenceName": "work"}])
    for route in ("batch", "single"):
        status, started = await post(plane, f"{API}/executions", {"name": "w", "input": {}})
        assert status == 201, started
        task = await _leased(plane, "work")
        result = {"taskId": task["taskId"], "epoch": task["epoch"], "status": "COMPLETED"}
        result["output"] = blob(QUOTA_LIMIT + 10)
        if route == "batch":
            status, body = await post(plane, f"{API}/tasks/results", {"results": [result]})
            assert status == 207, body
            [outcome] = body["results"]
            assert outcome["code"] == 413 and "output: " in outcome["error"], outcome
        else:
            status, body = await post(plane, f"{API}/tasks/{task['taskId']}/result", result)
            assert_too_large(status, body, "output", QUOTA_LIMIT, "Quota tenant maxPayloadBytes")
        run = await finished(plane, started["id"])
        assert run["status"] == "FAILED", run
        [failed] = run["tasks"]
        assert failed["status"] == "FAILED_WITH_TERMINAL_ERROR" and failed["output"] == {}, failed
        assert f"over the limit of {QUOTA_LIMIT} bytes (Quota tenant maxPayloadBytes)" in failed["reason"], failed
        assert failed["attempt"] == 1  # terminal: not retried with the same output


async def test_messages_human_outputs_and_rerun_inputs_over_the_limit_are_refused(plane: Plane) -> None:
    await quota(plane, QUOTA_LIMIT)
    await define_workflow(
        plane.pool, "approval", [{"name": "approve", "taskReferenceName": "approve", "type": "HUMAN"}]
    )
    status, started = await post(plane, f"{API}/executions", {"name": "approval", "input": {}})
    assert status == 201, started
    run_id = started["id"]

    async def human_task() -> str | None:
        _, body = await get(plane, f"{API}/tasks?type=HUMAN&status=IN_PROGRESS")
        return str(body["items"][0]["taskId"]) if body["items"] else None

    task_id = await eventually_async(human_task, timeout=10, what="the HUMAN task")
    status, body = await post(plane, f"{API}/executions/{run_id}/messages", blob(QUOTA_LIMIT + 1))
    assert_too_large(status, body, "body", QUOTA_LIMIT, "Quota tenant maxPayloadBytes")
    assert await fetchval(plane.pool, "SELECT count(*) FROM run_messages") == 0
    status, body = await post(plane, f"{API}/tasks/{task_id}/complete", {"output": blob(QUOTA_LIMIT + 1)})
    assert_too_large(status, body, "output", QUOTA_LIMIT, "Quota tenant maxPayloadBytes")
    status, body = await post(plane, f"{API}/tasks/{task_id}/complete", {"output": {"approved": True}})
    assert status == 200 and body["status"] == "COMPLETED", body  # still waiting after the refusal
    await finished(plane, run_id)
    status, body = await post(
        plane,
        f"{API}/executions/{run_id}/rerun",
        {"taskReferenceName": "approve", "input": blob(QUOTA_LIMIT + 1)},
    )
    assert_too_large(status, body, "input", QUOTA_LIMIT, "Quota tenant maxPayloadBytes")
    status, body = await post(plane, f"{API}/executions/{run_id}/restart", {"input": blob(QUOTA_LIMIT + 1)})
    assert_too_large(status, body, "input", QUOTA_LIMIT, "Quota tenant maxPayloadBytes")
    assert await runs_stored(plane) == 1
