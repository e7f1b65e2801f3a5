"""The audit trail through the HTTP app on a real PostgreSQL: every
operation that changes a run records who did it, in the operation's own
transaction (a refused operation records nothing), readable at
GET .../executions/{id}/audit, and purged with the run."""

from __future__ import annotations

from typing import Any

import aiohttp

from sluiceway.store import webhooks
from tests.support.plane import Plane, finished, get, post
from tests.support.store import NS, define_workflow, fetchval
from tests.support.waiting import eventually_async

API = f"/v1/ns/{NS}"
ANONYMOUS = "anonymous (authentication is off)"


async def trail(plane: Plane, run_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    status, body = await get(plane, f"{API}/executions/{run_id}/audit")
    assert status == 200, body
    return [(e["operation"], e["actor"], e["detail"]) for e in body["entries"]]


async def test_each_operation_on_a_run_is_recorded_with_who_did_it(plane: Plane) -> None:
    await define_workflow(plane.pool, "w", [{"name": "work", "taskReferenceName": "work"}])
    status, started = await post(plane, f"{API}/executions", {"name": "w", "input": {"a": 1}, "requestId": "r-1"})
    assert status == 201, started
    run_id = started["id"]
    again = {"name": "w", "input": {"a": 1}, "requestId": "r-1"}
    assert (await post(plane, f"{API}/executions", again))[0] == 200  # a retry: not a start
    assert (await post(plane, f"{API}/executions/{run_id}/pause", {"reason": "deploy"}))[0] == 200
    assert (await post(plane, f"{API}/executions/{run_id}/resume", {}))[0] == 200
    assert (await post(plane, f"{API}/executions/{run_id}/messages", {"hello": 1}))[0] == 202
    assert (await post(plane, f"{API}/executions/{run_id}/decide", {}))[0] == 202
    assert (await post(plane, f"{API}/executions/{run_id}/terminate", {"reason": "enough"}))[0] == 202
    await finished(plane, run_id)
    assert (await post(plane, f"{API}/executions/{run_id}/terminate", {}))[0] == 409  # refused: not recorded
    assert (await post(plane, f"{API}/executions/{run_id}/retry", {}))[0] == 200
    assert (await post(plane, f"{API}/executions/{run_id}/terminate", {}))[0] == 202
    await finished(plane, run_id)
    status, restarted = await post(plane, f"{API}/executions/{run_id}/restart", {})
    assert status == 201, restarted
    found = await trail(plane, run_id)
    assert [operation for operation, _, _ in found] == [
        "start",
        "pause",
        "resume",
        "message",
        "decide",
        "terminate",
        "retry",
        "terminate",
        "restart",
    ]
    assert {actor for _, actor, _ in found} == {ANONYMOUS}
    assert found[1][2] == {"reason": "deploy"} and found[5][2] == {"reason": "enough"}
    assert found[-1][2] == {"restartedFrom": run_id, "newRun": restarted["id"]}
    assert [operation for operation, _, _ in await trail(plane, restarted["id"])] == ["restart"]


async def test_a_human_decision_and_a_webhook_acceptance_are_recorded(plane: Plane) -> None:
    await define_workflow(
        plane.pool,
        "approval",
        [
            {"name": "approve", "taskReferenceName": "approve", "type": "HUMAN"},
            {
                "name": "paid",
                "taskReferenceName": "paid",
                "type": "WAIT_FOR_WEBHOOK",
                "webhook": "payments",
            },
        ],
    )
    async with plane.pool.acquire() as conn:
        spec = {"token": {"header": "X-Token", "secretRef": {"name": "hook", "key": "t"}}}
        await webhooks.upsert(conn, NS, "payments", "payments", 1, spec)
    plane.secrets.secrets[(NS, "hook")] = {"t": b"s3cret-token"}
    _, started = await post(plane, f"{API}/executions", {"name": "approval"})
    run_id = started["id"]

    async def human_task() -> str | None:
        _, body = await get(plane, f"{API}/tasks?type=HUMAN&status=IN_PROGRESS")
        return str(body["items"][0]["taskId"]) if body["items"] else None

    task_id = await eventually_async(human_task, timeout=10, what="the HUMAN task")
    assert (await post(plane, f"{API}/tasks/{task_id}/complete", {"output": {"ok": True}}))[0] == 200

    async def delivered() -> bool | None:
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"{plane.url}{API}/webhooks/payments", json={"paid": True}, headers={"X-Token": "s3cret-token"}
            ) as response,
        ):
            assert response.status == 200, await response.text()
            return (await response.json())["matched"] == 1 or None

    await eventually_async(delivered, timeout=10, what="the webhook to complete the waiting task")
    assert (await finished(plane, run_id))["status"] == "COMPLETED"
    found = await trail(plane, run_id)
    assert [(operation, actor) for operation, actor, _ in found] == [
        ("start", ANONYMOUS),
        ("complete", ANONYMOUS),
        ("webhook", "webhook payments (signature verified)"),
    ]
    assert found[1][2] == {"taskId": task_id, "taskReferenceName": "approve"}


async def test_the_trail_of_another_namespace_is_not_found(plane: Plane) -> None:
    await define_workflow(plane.pool, "w", [{"name": "work", "taskReferenceName": "work"}])
    _, started = await post(plane, f"{API}/executions", {"name": "w"})
    status, body = await get(plane, f"/v1/ns/team-b/executions/{started['id']}/audit")
    assert status == 404, body
    assert await fetchval(plane.pool, "SELECT count(*) FROM run_audit WHERE namespace = 'team-b'") == 0
