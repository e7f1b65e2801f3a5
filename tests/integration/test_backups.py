"""The database half of `sluiceway admin export/import` (store/backups.py)
against a real PostgreSQL: the tools chosen by version, a dump restored into
an empty database with every row, a database that is not empty refused, and
the restored WorkflowRuns' runs handed to the status mirror again. The whole
procedure, with the API servers: e2e/test_backup.py."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from sluiceway.store import backups, executions, mirroring
from sluiceway.store.database import Pool
from tests.support.store import NS, define_task, define_workflow, settle

STEP = [{"name": "step", "taskReferenceName": "step"}]


async def start_for_workflow_run(pool: Pool, name: str) -> str:
    """A run as a WorkflowRun starts it: with the object's name."""
    async with pool.acquire() as conn, conn.transaction():
        outcome = await executions.start_run(conn, NS, "wf", None, {"day": "monday"}, resource_name=name)
    assert isinstance(outcome, executions.Started), outcome
    return outcome.id


async def test_a_dump_restores_into_an_empty_database_with_its_runs(
    pool: Pool, database_url: str, empty_database_url: str, tmp_path: Path
) -> None:
    await define_task(pool, "step")
    await define_workflow(pool, "wf", STEP)
    run_id = await start_for_workflow_run(pool, "nightly")
    await settle(pool)
    major = await backups.server_major(database_url)
    dumper = backups.find_tool("pg_dump", major)
    assert dumper.major >= major
    backups.dump(dumper, database_url, tmp_path / "database.dump")

    assert await backups.tables(empty_database_url) == 0
    backups.restore(backups.find_tool("pg_restore", dumper.major), empty_database_url, tmp_path / "database.dump")
    assert await backups.runs_by_status(empty_database_url) == await backups.runs_by_status(database_url)
    conn = await asyncpg.connect(empty_database_url)
    try:
        restored = await conn.fetchrow("SELECT input::text, resource_name FROM executions WHERE id = $1::uuid", run_id)
    finally:
        await conn.close()
    assert restored is not None and restored["resource_name"] == "nightly" and "monday" in restored["input"]

    # A migrated database is not a fresh one.
    assert await backups.tables(database_url) > 0


async def test_restored_workflow_runs_are_written_again_by_the_status_mirror(pool: Pool, database_url: str) -> None:
    await define_task(pool, "step")
    await define_workflow(pool, "wf", STEP)
    mirrored = await start_for_workflow_run(pool, "nightly")
    await settle(pool)
    async with pool.acquire() as conn:
        await conn.execute("UPDATE executions SET mirrored_seq = mirror_seq")  # as after the mirror wrote it
        assert await mirroring.pending(conn, 10) == []
    assert await backups.mirror_again(database_url, [str(mirrored)]) == 1
    async with pool.acquire() as conn:
        assert [p.id for p in await mirroring.pending(conn, 10)] == [str(mirrored)]


def test_no_tool_new_enough_is_refused_naming_the_way_out(tmp_path: Path) -> None:
    with pytest.raises(backups.BackupError, match="--pg-bin"):
        backups.find_tool("pg_dump", 99)
    with pytest.raises(backups.BackupError, match="unusable"):
        backups.find_tool("pg_dump", 10, tmp_path)
