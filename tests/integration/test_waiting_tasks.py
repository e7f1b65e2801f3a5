"""Tasks that wait for the world, on the real API and PostgreSQL: webhook
calls (verified, matched, refused without a trace), people (an inbox, a
decision recorded with who made it) and run messages (in order, once)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from typing import Any

import aiohttp
import asyncpg
import pytest
from typer.testing import CliRunner

from sluiceway.controls.webhooks import signed_headers
from sluiceway.model.execution import MAX_MESSAGE_BYTES
from sluiceway.runtime.main import app
from sluiceway.store import webhooks
from tests.support.plane import Plane, finished, get, post
from tests.support.store import NS, define_workflow
from tests.support.waiting import eventually_async

SECRET = b"whsec-0123456789abcdef"


async def call(
    plane: Plane, path: str, body: bytes, headers: dict[str, str] | None = None, method: str = "POST"
) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, f"{plane.url}{path}", data=body, headers=headers or {}) as response,
    ):
        text = await response.text()
        return response.status, json.loads(text) if text else None


async def task_rows(pool: asyncpg.Pool, run_id: str) -> dict[str, asyncpg.Record]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT * FROM tasks WHERE execution_id = $1::uuid", run_id)
    return {r["ref"]: r for r in rows}


async def waiting(pool: asyncpg.Pool, run_id: str, ref: str) -> asyncpg.Record:
    async def probe() -> asyncpg.Record | None:
        row = (await task_rows(pool, run_id)).get(ref)
        return row if row is not None and row["status"] == "IN_PROGRESS" else None

    found: asyncpg.Record = await eventually_async(probe, timeout=10, what=f"{ref} to wait")
    return found


# -- webhooks ------------------------------------------------------------------------


async def _webhook(plane: Plane, name: str, spec: dict[str, Any]) -> None:
    async with plane.pool.acquire() as conn:
        await webhooks.upsert(conn, NS, name, name, 1, spec)
    plane.secrets.secrets[(NS, "hooks")] = {"secret": SECRET}


PAID = {
    "tasks": [
        {
            "name": "wait_paid",
            "taskReferenceName": "paid",
            "type": "WAIT_FOR_WEBHOOK",
            "webhook": "orders-paid",
            "inputParameters": {"matches": {"orderId": "${workflow.input.orderId}", "status": "paid"}},
        }
    ],
    "outputParameters": {"amount": "${paid.output.payload.amount}"},
}


async def _start(plane: Plane, workflow: str, input: dict[str, Any]) -> str:
    status, body = await post(plane, f"/v1/ns/{NS}/executions", {"name": workflow, "input": input})
    assert status == 201, body
    run_id: str = body["id"]
    return run_id


async def test_a_signed_call_completes_exactly_the_matching_task(plane: Plane) -> None:
    await _webhook(plane, "orders-paid", {"hmac": {"secretRef": {"name": "hooks", "key": "secret"}}})
    await define_workflow(plane.pool, "checkout", PAID["tasks"], outputParameters=PAID["outputParameters"])
    run_42, run_43 = await _start(plane, "checkout", {"orderId": 42}), await _start(plane, "checkout", {"orderId": 43})
    await waiting(plane.pool, run_42, "paid")
    await waiting(plane.pool, run_43, "paid")
    body = json.dumps({"orderId": 42, "status": "paid", "amount": 99}).encode()
    path = f"/v1/ns/{NS}/webhooks/orders-paid"

    forged = {**signed_headers(b"not-the-secret", int(time.time()), body), "Content-Type": "application/json"}
    status, refused = await call(plane, path, body, forged)
    assert status == 401 and refused["error"] == "UNAUTHENTICATED"
    stale = signed_headers(SECRET, int(time.time()) - 3600, body)
    assert (await call(plane, path, body, stale))[0] == 401, "a replay an hour later is refused"
    assert (await call(plane, path, body))[0] == 401, "no signature at all"
    assert (await task_rows(plane.pool, run_42))["paid"]["status"] == "IN_PROGRESS", "refusals leave nothing behind"
    assert (await call(plane, f"/v1/ns/{NS}/webhooks/nope", body, forged))[0] == 404

    status, answer = await call(plane, path, body, signed_headers(SECRET, int(time.time()), body))
    assert status == 200 and answer["matched"] == 1 and answer["tasks"][0]["executionId"] == run_42
    assert (await finished(plane, run_42))["output"] == {"amount": 99}
    assert (await task_rows(plane.pool, run_43))["paid"]["status"] == "IN_PROGRESS", "order 43 still waits"
    status, again = await call(plane, path, body, signed_headers(SECRET, int(time.time()), body))
    assert status == 200 and again["matched"] == 0, "a task completes once"


async def test_github_and_stripe_signatures_and_a_token_verify(plane: Plane) -> None:
    await _webhook(plane, "gh", {"hmac": {"secretRef": {"name": "hooks", "key": "secret"}, "scheme": "GitHub"}})
    await _webhook(plane, "stripe", {"hmac": {"secretRef": {"name": "hooks", "key": "secret"}, "scheme": "Stripe"}})
    await _webhook(plane, "tok", {"token": {"secretRef": {"name": "hooks", "key": "secret"}, "header": "X-Token"}})
    body = b'{"action": "opened"}'
    github = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    assert (await call(plane, f"/v1/ns/{NS}/webhooks/gh", body, {"X-Hub-Signature-256": github}))[0] == 200
    assert (await call(plane, f"/v1/ns/{NS}/webhooks/gh", body, {"X-Hub-Signature-256": "sha256=00"}))[0] == 401
    t = int(time.time())
    v1 = hmac.new(SECRET, f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    stripe = {"Stripe-Signature": f"t={t},v1=deadbeef,v1={v1}"}
    assert (await call(plane, f"/v1/ns/{NS}/webhooks/stripe", body, stripe))[0] == 200
    assert (await call(plane, f"/v1/ns/{NS}/webhooks/tok", body, {"X-Token": SECRET.decode()}))[0] == 200
    assert (await call(plane, f"/v1/ns/{NS}/webhooks/tok", body, {"X-Token": "guess"}))[0] == 401


async def test_a_webhook_whose_secret_is_missing_verifies_nothing(plane: Plane) -> None:
    async with plane.pool.acquire() as conn:
        await webhooks.upsert(conn, NS, "lost", "lost", 1, {"token": {"secretRef": {"name": "gone", "key": "k"}}})
    assert (await call(plane, f"/v1/ns/{NS}/webhooks/lost", b"{}", {"X-Webhook-Token": "x"}))[0] == 401


async def test_bodies_are_bounded_and_must_be_json_once_verified(plane: Plane) -> None:
    await _webhook(plane, "small", {"hmac": {"secretRef": {"name": "hooks", "key": "secret"}}, "maxPayloadBytes": 64})
    big = json.dumps({"x": "y" * 100}).encode()
    status, body = await call(plane, f"/v1/ns/{NS}/webhooks/small", big, signed_headers(SECRET, int(time.time()), big))
    assert status == 413 and "maxPayloadBytes 64" in body["message"]
    junk = b"not json"
    status, body = await call(
        plane, f"/v1/ns/{NS}/webhooks/small", junk, signed_headers(SECRET, int(time.time()), junk)
    )
    assert status == 422 and body["fields"][0]["field"] == "body"


async def test_cel_matches_see_the_payload_headers_and_the_tasks_input(plane: Plane) -> None:
    await _webhook(plane, "events", {"hmac": {"secretRef": {"name": "hooks", "key": "secret"}}})
    await define_workflow(
        plane.pool,
        "deploys",
        [
            {
                "name": "wait",
                "taskReferenceName": "deployed",
                "type": "WAIT_FOR_WEBHOOK",
                "webhook": "events",
                "inputParameters": {
                    "service": "${workflow.input.service}",
                    "matches": "payload.service == input.service && headers['x-event'] == 'deployed'",
                },
            }
        ],
    )
    run_id = await _start(plane, "deploys", {"service": "cart"})
    await waiting(plane.pool, run_id, "deployed")
    body = b'{"service": "cart"}'
    wrong = {**signed_headers(SECRET, int(time.time()), body), "X-Event": "built"}
    assert (await call(plane, f"/v1/ns/{NS}/webhooks/events", body, wrong))[1]["matched"] == 0
    right = {**signed_headers(SECRET, int(time.time()), body), "X-Event": "deployed"}
    assert (await call(plane, f"/v1/ns/{NS}/webhooks/events", body, right))[1]["matched"] == 1
    assert (await finished(plane, run_id))["status"] == "COMPLETED"


# -- people --------------------------------------------------------------------------

APPROVAL = [
    {
        "name": "approve",
        "taskReferenceName": "approve",
        "type": "HUMAN",
        "inputParameters": {"amount": "${workflow.input.amount}"},
    },
]


async def test_a_person_completes_a_human_task_listed_in_the_inbox(plane: Plane) -> None:
    await define_workflow(plane.pool, "refund", APPROVAL, outputParameters={"ok": "${approve.output.approved}"})
    run_id = await _start(plane, "refund", {"amount": 30})
    await waiting(plane.pool, run_id, "approve")
    status, inbox = await get(plane, f"/v1/ns/{NS}/tasks?type=HUMAN&status=IN_PROGRESS")
    assert status == 200 and [t["executionId"] for t in inbox["items"]] == [run_id]
    task = inbox["items"][0]
    assert task["input"] == {"amount": 30} and task["workflowName"] == "refund"
    status, done = await post(plane, f"/v1/ns/{NS}/tasks/{task['taskId']}/complete", {"output": {"approved": True}})
    assert status == 200 and done["status"] == "COMPLETED" and done["completedBy"].startswith("anonymous")
    assert (await finished(plane, run_id))["output"] == {"ok": True}
    status, late = await post(plane, f"/v1/ns/{NS}/tasks/{task['taskId']}/reject", {"reason": "too late"})
    assert status == 409 and late["error"] == "NOT_WAITING"
    assert (await get(plane, f"/v1/ns/{NS}/tasks?type=HUMAN&status=IN_PROGRESS"))[1]["items"] == []


async def cli(plane: Plane, *argv: str) -> tuple[int, str, str]:
    """`sluiceway ...` against the plane (in a thread: it runs its own event loop)."""
    result = await asyncio.to_thread(CliRunner().invoke, app(), [*argv, "-n", NS, "--server", plane.url])
    return result.exit_code, result.stdout, result.stderr


async def test_the_command_line_lists_the_inbox_and_completes_or_rejects_a_task_by_run_and_reference(
    plane: Plane,
) -> None:
    await define_workflow(plane.pool, "refund", APPROVAL, outputParameters={"ok": "${approve.output.approved}"})
    await define_workflow(plane.pool, "other_approval", APPROVAL)
    # One after the other, each waiting before the next starts: the inbox is
    # ordered by when the HUMAN task began, and the decider may take runs
    # started together in either order.
    started = []
    for workflow, amount in (("refund", 30), ("refund", 99), ("other_approval", 1)):
        started.append(await _start(plane, workflow, {"amount": amount}))
        await waiting(plane.pool, started[-1], "approve")
    approved, refused, elsewhere = started
    inbox = ("tasks", "list", "--kind", "human", "--status", "IN_PROGRESS", "--workflow", "refund", "--oldest")
    code, out, _ = await cli(plane, *inbox, "-o", "json")
    assert code == 0
    items = json.loads(out)["items"]
    assert [(t["executionId"], t["input"]) for t in items] == [(approved, {"amount": 30}), (refused, {"amount": 99})]

    code, out, said = await cli(plane, "tasks", "complete", approved, "approve", "--answer", '{"approved": true}')
    assert code == 0 and "COMPLETED by anonymous" in out, (out, said)
    assert (await finished(plane, approved))["output"] == {"ok": True}
    code, out, said = await cli(plane, "tasks", "reject", refused, "approve", "--reason", "amount looks wrong")
    assert code == 0 and "FAILED_WITH_TERMINAL_ERROR" in out, (out, said)
    assert "amount looks wrong" in (await finished(plane, refused))["reasonForIncompletion"]

    code, _, said = await cli(plane, "tasks", "complete", approved, "approve")
    assert code == 4 and "no longer waits for a person" in said, said
    code, _, said = await cli(plane, "tasks", "reject", elsewhere, "nope", "--reason", "x")
    assert code == 3 and "has no HUMAN task 'nope'" in said, said
    code, _, said = await cli(plane, "tasks", "complete", elsewhere, "approve", "--answer", "[1]")
    assert code == 2 and "--answer must be a JSON object" in said, said
    code, out, _ = await cli(plane, *inbox[:-3], "-o", "name")
    assert out.split() == [t["taskId"] for t in await _inbox(plane, "other_approval")]


async def _inbox(plane: Plane, workflow: str) -> list[dict[str, Any]]:
    status, body = await get(plane, f"/v1/ns/{NS}/tasks?type=HUMAN&status=IN_PROGRESS&workflow={workflow}")
    assert status == 200, body
    items: list[dict[str, Any]] = body["items"]
    return items


async def test_a_rejection_fails_the_run_with_the_reason_and_bad_requests_name_their_field(plane: Plane) -> None:
    await define_workflow(plane.pool, "refund", APPROVAL)
    run_id = await _start(plane, "refund", {"amount": 30})
    row = await waiting(plane.pool, run_id, "approve")
    path = f"/v1/ns/{NS}/tasks/{row['id']}"
    status, body = await post(plane, f"{path}/reject", {"reason": ""})
    assert status == 422 and "reason" in body["message"]
    assert (await post(plane, f"/v1/ns/{NS}/tasks/00000000-0000-0000-0000-000000000000/complete", {}))[0] == 404
    status, rejected = await post(plane, f"{path}/reject", {"reason": "amount looks wrong"})
    assert status == 200 and rejected["status"] == "FAILED_WITH_TERMINAL_ERROR"
    view = await finished(plane, run_id)
    assert view["status"] == "FAILED" and "rejected by anonymous" in view["reasonForIncompletion"]
    assert "amount looks wrong" in view["reasonForIncompletion"]


async def test_only_a_human_task_takes_a_persons_decision(plane: Plane) -> None:
    await define_workflow(plane.pool, "plain", [{"name": "job", "taskReferenceName": "job"}])
    run_id = await _start(plane, "plain", {})

    async def scheduled() -> asyncpg.Record | None:
        return (await task_rows(plane.pool, run_id)).get("job")

    row = await eventually_async(scheduled, timeout=10, what="the job to be scheduled")
    status, body = await post(plane, f"/v1/ns/{NS}/tasks/{row['id']}/complete", {})
    assert status == 409 and body["error"] == "NOT_A_HUMAN_TASK"


# -- messages --------------------------------------------------------------------------

INBOX = [
    {"name": "pull", "taskReferenceName": "first", "type": "PULL_WORKFLOW_MESSAGES", "batchSize": 2},
    {"name": "pull", "taskReferenceName": "second", "type": "PULL_WORKFLOW_MESSAGES", "batchSize": 5},
]


async def send(plane: Plane, run_id: str, message: Any) -> tuple[int, Any]:
    return await call(
        plane,
        f"/v1/ns/{NS}/executions/{run_id}/messages",
        json.dumps(message).encode(),
        {"Content-Type": "application/json"},
    )


async def test_messages_arrive_in_order_each_once_in_batches(plane: Plane) -> None:
    gate = {"name": "gate", "taskReferenceName": "gate", "type": "HUMAN"}
    await define_workflow(
        plane.pool,
        "chat",
        [gate, *INBOX],
        outputParameters={"a": "${first.output.messages}", "b": "${second.output.messages}"},
    )
    run_id = await _start(plane, "chat", {})
    held = await waiting(plane.pool, run_id, "gate")  # the run holds here while messages queue up
    for n in range(1, 4):
        assert (await send(plane, run_id, {"n": n}))[0] == 202
    assert (await post(plane, f"/v1/ns/{NS}/tasks/{held['id']}/complete", {}))[0] == 200
    view = await finished(plane, run_id)
    first = [m["payload"]["n"] for m in view["output"]["a"]]
    second = [m["payload"]["n"] for m in view["output"]["b"]]
    assert (first, second) == ([1, 2], [3]), "in order, two (its batchSize) then the rest, none twice"


async def test_a_message_to_a_waiting_task_is_delivered_at_once(plane: Plane) -> None:
    await define_workflow(plane.pool, "chat", INBOX[:1])
    run_id = await _start(plane, "chat", {})
    await waiting(plane.pool, run_id, "first")
    status, body = await send(plane, run_id, "hello")
    assert status == 202 and body["delivered"] is True
    assert (await finished(plane, run_id))["status"] == "COMPLETED"
    assert (await send(plane, run_id, "late"))[0] == 409, "a finished run takes no message"


async def test_messages_are_bounded_per_message_and_per_run(plane: Plane) -> None:
    await define_workflow(plane.pool, "quiet", [{"name": "nobody", "taskReferenceName": "never"}])
    run_id = await _start(plane, "quiet", {})
    status, body = await send(plane, run_id, "x" * MAX_MESSAGE_BYTES)
    assert status == 413 and "body" in body["message"]
    status, body = await call(plane, f"/v1/ns/{NS}/executions/{run_id}/messages", b"{nope")
    assert status == 422 and body["fields"][0]["field"] == "body"
    async with plane.pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO run_messages (execution_id, payload, bytes) SELECT $1::uuid, to_jsonb(n), 1"
            " FROM generate_series(1, 1000) n",
            run_id,
        )
    status, body = await send(plane, run_id, "one too many")
    assert status == 429 and (body["limit"], body["current"]) == (1000, 1000) and body["control"] == "messagesPerRun"
    assert (await send(plane, "00000000-0000-0000-0000-000000000000", 1))[0] == 404
    assert (await post(plane, f"/v1/ns/{NS}/executions/{run_id}/terminate", {}))[0] == 202

    async def dropped() -> bool:
        async with plane.pool.acquire() as conn:
            return (
                int(await conn.fetchval("SELECT count(*) FROM run_messages WHERE execution_id = $1::uuid", run_id)) == 0
            )

    # A finished run's untaken messages go with it.
    await eventually_async(dropped, timeout=10, what="the terminated run's messages to go")


@pytest.mark.parametrize("concurrent", [20])
async def test_concurrent_messages_are_each_delivered_once(plane: Plane, concurrent: int) -> None:
    tasks = [
        {"name": "pull", "taskReferenceName": f"p{i}", "type": "PULL_WORKFLOW_MESSAGES"} for i in range(concurrent)
    ]
    await define_workflow(plane.pool, "fan_in", tasks)
    run_id = await _start(plane, "fan_in", {})
    await asyncio.gather(*(send(plane, run_id, i) for i in range(concurrent)))
    view = await finished(plane, run_id)
    taken = [m["payload"] for t in view["tasks"] for m in t["output"]["messages"]]
    assert sorted(taken) == list(range(concurrent)), "every message exactly once"
    assert [t["output"]["messages"][0]["payload"] for t in view["tasks"]] != [], view
