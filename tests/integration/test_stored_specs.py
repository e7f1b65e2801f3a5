"""The decider reads each workflow version's stored text once per process
(store.workflows.stored_specs), keyed by the version and its row's creation
time, instead of converting the spec to text for every run on every pass."""

from __future__ import annotations

import datetime
import uuid

from sluiceway.store import workflows
from sluiceway.store.database import Pool
from tests.support.store import NS, define_workflow, settle, start


async def created_at(pool: Pool, name: str, version: int) -> datetime.datetime:
    async with pool.acquire() as conn:
        value: datetime.datetime = await conn.fetchval(
            "SELECT created_at FROM workflow_versions WHERE namespace = $1 AND name = $2 AND version = $3",
            NS,
            name,
            version,
        )
    return value


async def test_a_version_is_read_once_and_a_row_made_again_is_read_anew(pool: Pool) -> None:
    await define_workflow(pool, "specs_once", [{"name": "work", "taskReferenceName": "a"}])
    key = (NS, "specs_once", 1, await created_at(pool, "specs_once", 1))
    async with pool.acquire() as conn:
        first = await workflows.stored_specs(conn, [key])
        assert '"taskReferenceName": "a"' in first[key]
        # The row changes under the same key (it never does; this shows the text is not read again).
        await conn.execute(
            "UPDATE workflow_versions SET spec = '{\"tasks\": []}' WHERE namespace = $1 AND name = $2", NS, "specs_once"
        )
        again = await workflows.stored_specs(conn, [key, key])
        assert again == {key: first[key]} and again[key] is first[key]
        # A row made again under the same version number has another creation time: read anew.
        await conn.execute(
            "UPDATE workflow_versions SET created_at = created_at + interval '1 second' WHERE name = $1", "specs_once"
        )
        remade = (NS, "specs_once", 1, await created_at(pool, "specs_once", 1))
        assert (await workflows.stored_specs(conn, [remade]))[remade] == '{"tasks": []}'


async def test_a_missing_version_row_is_left_out(pool: Pool) -> None:
    async with pool.acquire() as conn:
        assert await workflows.stored_specs(conn, [(NS, "no_such_workflow", 1, None)]) == {}
        gone = (NS, "no_such_workflow", 1, datetime.datetime.now(datetime.UTC))
        assert await workflows.stored_specs(conn, [gone]) == {}


async def test_a_run_whose_version_row_is_gone_is_quarantined_saying_so(pool: Pool) -> None:
    await define_workflow(pool, "specs_gone", [{"name": "work", "taskReferenceName": "a"}])
    run_id = await start(pool, "specs_gone")
    async with pool.acquire() as conn:
        await conn.execute("DELETE FROM workflow_versions WHERE namespace = $1 AND name = $2", NS, "specs_gone")
    await settle(pool)
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT quarantined_at, quarantine_reason FROM executions WHERE id = $1", uuid.UUID(run_id)
        )
    assert row["quarantined_at"] is not None
    assert row["quarantine_reason"].startswith("workflow specs_gone version 1 cannot be read: ")
