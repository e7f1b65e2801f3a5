"""Starting many runs in one request (`POST .../executions/starts`) on a real
PostgreSQL: plain starts go in with multi-row inserts and are decided like any
other; each item is judged on its own, with the code and body the single start
would have answered, in the order sent; bad items start nothing and cost the
others nothing; the envelope is bounded."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sluiceway.model.execution import MAX_BATCH
from sluiceway.store.database import Pool
from tests.support.plane import Plane, execution_plane, finished, post
from tests.support.store import NS, define_workflow, fetchval, lease, report
from tests.support.waiting import eventually_async

API = f"/v1/ns/{NS}/executions"
PAYLOAD_LIMIT = 4096
ONE_TASK = [{"name": "work", "taskReferenceName": "work"}]
TENANT = [{"name": "tenant", "type": "keyword", "source": "${workflow.input.tenant}"}]


@pytest.fixture
async def plane(pool: Pool, database_url: str) -> AsyncIterator[Plane]:
    async with execution_plane(pool, database_url, max_payload_bytes=PAYLOAD_LIMIT) as running:
        yield running


async def runs_of(plane: Plane, workflow: str) -> int:
    return int(await fetchval(plane.pool, "SELECT count(*) FROM executions WHERE workflow_name = $1", workflow))


async def test_plain_starts_go_in_together_and_run_to_the_end(plane: Plane) -> None:
    await define_workflow(plane.pool, "batch_wf", ONE_TASK, searchAttributes=TENANT, slaSeconds=60)
    starts = [{"name": "batch_wf", "input": {"tenant": f"t{n}"}, "correlationId": f"c{n}"} for n in range(50)]
    status, body = await post(plane, f"{API}/starts", {"starts": starts})
    assert status == 200, body
    assert [item["code"] for item in body["starts"]] == [201] * 50
    assert all(item["status"] == "RUNNING" and item["created"] for item in body["starts"])
    ids = [item["id"] for item in body["starts"]]
    assert len(set(ids)) == 50
    # What a single start stores: correlation id, SLA, search attributes, its own chain, the audit trail.
    first = uuid.UUID(ids[0])
    row = await fetchval(
        plane.pool,
        "SELECT row(correlation_id, sla_seconds, sla_at IS NOT NULL, chain_id = id)::text FROM executions"
        " WHERE id = $1",
        first,
    )
    assert row == "(c0,60,t,t)"
    assert await fetchval(plane.pool, "SELECT keyword FROM run_attributes WHERE run_id = $1", first) == "t0"
    audited = await fetchval(
        plane.pool,
        "SELECT count(*) FROM run_audit WHERE operation = 'start' AND execution_id = ANY($1)",
        [uuid.UUID(i) for i in ids],
    )
    assert audited == 50

    async def all_leased() -> list[Any] | None:
        found.extend(await lease(plane.pool, "work", count=50 - len(found)))
        return found if len(found) == 50 else None

    found: list[Any] = []
    await eventually_async(all_leased, timeout=20, what="the decider to queue the 50 batch-started tasks")
    for leased in found:
        await report(plane.pool, leased)
    assert (await finished(plane, ids[-1]))["status"] == "COMPLETED"


async def test_each_item_is_judged_alone_in_the_order_sent(plane: Plane) -> None:
    await define_workflow(plane.pool, "plain_wf", ONE_TASK)
    await define_workflow(plane.pool, "capped_wf", ONE_TASK, maxConcurrentExecutions=1)
    await define_workflow(plane.pool, "typed_wf", ONE_TASK, searchAttributes=[{"name": "size", "type": "int"}])
    starts: list[Any] = [
        {"name": "plain_wf"},  # 0: started
        {"input": {}},  # 1: no name
        {"name": "no_such_wf"},  # 2: unknown workflow
        {"name": "plain_wf", "input": {"b": "x" * PAYLOAD_LIMIT}},  # 3: over the payload limit
        {"name": "typed_wf", "searchAttributes": {"size": "large"}},  # 4: not an int
        {"name": "plain_wf", "taskOverrides": {"nope": {"retryCount": 1}}},  # 5: no such task
        {"name": "capped_wf"},  # 6: takes the one slot
        {"name": "capped_wf"},  # 7: LIMIT_EXCEEDED
        {"name": "plain_wf", "requestId": "order-1"},  # 8: started, keyed
        {"name": "plain_wf", "requestId": "order-1"},  # 9: the same start again: found
        {"name": "plain_wf", "requestId": "order-1", "input": {"other": 1}},  # 10: the key reused
        "not an object",  # 11
        {"name": "plain_wf", "version": 0},  # 12: out of range
    ]
    status, body = await post(plane, f"{API}/starts", {"starts": starts})
    assert status == 207, body
    answers = body["starts"]
    assert [a["code"] for a in answers] == [201, 422, 404, 413, 422, 422, 201, 409, 201, 200, 409, 422, 422]
    assert answers[1]["fields"][0]["field"] == "name"
    assert answers[2]["error"] == "WORKFLOW_NOT_FOUND"
    assert answers[3]["error"] == "PAYLOAD_TOO_LARGE" and answers[3]["field"] == "input", answers[3]
    assert answers[3]["limit"] == PAYLOAD_LIMIT
    assert answers[4]["fields"][0]["field"].startswith("searchAttributes"), answers[4]
    assert answers[5]["fields"][0]["field"] == "taskOverrides.nope", answers[5]
    assert answers[7]["error"] == "LIMIT_EXCEEDED" and answers[7]["limit"] == 1, answers[7]
    assert answers[9]["id"] == answers[8]["id"] and answers[9]["created"] is False
    assert answers[10]["error"] == "IDEMPOTENCY_KEY_REUSED" and answers[10]["executionId"] == answers[8]["id"]
    assert answers[12]["fields"][0]["field"] == "version"
    # Refused items stored nothing; the others stored one run each.
    assert await runs_of(plane, "plain_wf") == 2
    assert await runs_of(plane, "capped_wf") == 1
    assert await runs_of(plane, "typed_wf") == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"starts": []}, "starts"),
        ({"starts": [{"name": "plain_wf"}] * (MAX_BATCH + 1)}, "starts"),
        ({"starts": {"name": "plain_wf"}}, "starts"),
        ({}, "starts"),
        ([], "body"),
    ],
)
async def test_the_envelope_is_bounded_and_refused_whole(plane: Plane, body: Any, field: str) -> None:
    await define_workflow(plane.pool, "plain_wf", ONE_TASK)
    status, answer = await post(plane, f"{API}/starts", body)
    assert status == 422, answer
    assert answer["error"] == "INVALID_REQUEST"
    assert answer["fields"][0]["field"] == field, answer
    assert await runs_of(plane, "plain_wf") == 0


async def test_a_full_batch_starts_every_run(plane: Plane) -> None:
    await define_workflow(plane.pool, "plain_wf", ONE_TASK)
    status, body = await post(plane, f"{API}/starts", {"starts": [{"name": "plain_wf"}] * MAX_BATCH})
    assert status == 200, body
    assert await runs_of(plane, "plain_wf") == MAX_BATCH
