"""Continue-as-new chains on a real PostgreSQL with the decider and the
sweeper running: each link starts the next in the transaction that ends it,
every link keeps the chain's one deadline, and the chain ends TIMED_OUT when
that deadline passes, however many links it has made."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import asyncpg

from sluiceway.controls.chains import next_run_id
from sluiceway.store import executions, runs, workflows
from tests.support.plane import Plane
from tests.support.waiting import eventually_async

NAMESPACE = "chains"
LOOP = {
    "timeoutSeconds": 30,
    "chainTimeoutSeconds": 3,
    "tasks": [
        {
            "name": "count",
            "taskReferenceName": "count",
            "type": "INLINE",
            "inputParameters": {"expression": "workflow.input.n + 1"},
        },
        {"name": "pause", "taskReferenceName": "pause", "type": "WAIT", "inputParameters": {"duration": "1s"}},
        {
            "name": "again",
            "taskReferenceName": "again",
            "type": "CONTINUE_AS_NEW",
            "inputParameters": {"input": {"n": "${count.output.result}"}},
        },
    ],
}


async def chain_rows(pool: asyncpg.Pool) -> list[dict[str, Any]]:
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT id, status, reason, input, chain_id, previous_run_id, chain_deadline_at, created_at"
            " FROM executions WHERE namespace = $1 ORDER BY created_at",
            NAMESPACE,
        )
    return [dict(r) for r in rows]


async def test_a_chain_keeps_one_deadline_across_links_and_ends_timed_out_when_it_passes(plane: Plane) -> None:
    pool = plane.pool
    async with pool.acquire() as conn, conn.transaction():
        await workflows.upsert_workflow(conn, NAMESPACE, "poller", "poller", 1, LOOP)
        started = await executions.start_run(conn, NAMESPACE, "poller", None, {"n": 0})
    assert isinstance(started, executions.Started)

    async def ended() -> bool:
        rows = await chain_rows(pool)
        return bool(rows and rows[-1]["status"] == "TIMED_OUT")

    await eventually_async(ended, timeout=30, interval=0.2, what="the chain to end timed out")
    rows = await chain_rows(pool)
    first = rows[0]
    assert len(rows) >= 2, "the loop continued at least once before its 3 s chain deadline"
    assert [r["status"] for r in rows] == ["COMPLETED"] * (len(rows) - 1) + ["TIMED_OUT"]
    assert rows[-1]["reason"].startswith("the chain's deadline passed")
    assert {r["chain_id"] for r in rows} == {first["id"]} and first["previous_run_id"] is None
    assert {r["chain_deadline_at"] for r in rows} == {first["chain_deadline_at"]}, "one deadline, carried verbatim"
    assert first["chain_deadline_at"] - first["created_at"] < datetime.timedelta(seconds=4)
    for previous, link in zip(rows, rows[1:], strict=False):
        assert link["previous_run_id"] == previous["id"] and str(link["id"]) == next_run_id(str(previous["id"]))
        assert link["input"] == {"n": previous["input"]["n"] + 1}
        assert previous["reason"] == f"continued as new: run {link['id']}"
    async with pool.acquire() as conn:
        view = await runs.get_run(conn, NAMESPACE, str(rows[0]["id"]))
    assert view is not None and view.next_run_id == str(rows[1]["id"]) and view.chain_id == str(first["id"])
    assert isinstance(uuid.UUID(view.next_run_id), uuid.UUID)
