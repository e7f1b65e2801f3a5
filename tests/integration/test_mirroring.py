"""The mirror's queue: which runs wait to have their WorkflowRun status written."""

from __future__ import annotations

import asyncpg

from sluiceway.store import executions, mirroring
from tests.support.store import NS, define_workflow, settle, start


async def test_deciding_a_run_bumps_its_mirror_only_when_it_has_a_workflowrun(pool: asyncpg.Pool) -> None:
    """A run started through the API has no WorkflowRun to mirror, so marking
    it decided leaves mirror_seq alone (an indexed predicate's column: a
    change would cost the row's every index entry); a WorkflowRun's run is
    bumped and waits for the mirror."""
    await define_workflow(pool, "one", [{"name": "job", "taskReferenceName": "j"}])
    api_run = await start(pool, "one")
    async with pool.acquire() as conn, conn.transaction():
        started = await executions.start_run(conn, NS, "one", None, {}, resource_name="order-1")
    assert isinstance(started, executions.Started)
    before = await mirror_seqs(pool)
    await settle(pool)
    after = await mirror_seqs(pool)
    assert after[api_run] == before[api_run], (before, after)
    assert after[started.id] > before[started.id], (before, after)
    async with pool.acquire() as conn:
        assert {p.id for p in await mirroring.pending(conn, 10)} == {started.id}


async def mirror_seqs(pool: asyncpg.Pool) -> dict[str, int]:
    async with pool.acquire() as conn:
        return dict(await conn.fetch("SELECT id::text, mirror_seq FROM executions"))
