"""Archive before purge on a real PostgreSQL and a real directory: the purger
writes a finished run's whole history to the archive before it deletes it,
and the API, the UI and the CLI read it back by id, in the run's namespace
only. A delete that fails after the write leaves the run in the database and
the archive readable; the next purge writes it again, and the copy the index
names wins."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from prometheus_client import REGISTRY
from typer.testing import CliRunner

from sluiceway.devenv.processes import free_port
from sluiceway.model.execution import LogLine, ResultStatus
from sluiceway.runtime import loops, operator
from sluiceway.runtime.main import app
from sluiceway.runtime.settings import Settings
from sluiceway.store import logs, retention
from sluiceway.store.archives import Archive, ArchiveError
from sluiceway.store.errors import StoreError
from tests.support.plane import Plane, execution_plane, get, post
from tests.support.store import NS, define_task, define_workflow, fetchval, lease, report, settle, start
from tests.support.ui import Browser
from tests.support.waiting import eventually_async

API = f"/v1/ns/{NS}"
ATTRIBUTES = [{"name": "tenant", "type": "keyword", "source": "${workflow.input.tenant}"}]


@pytest.fixture
def archive(tmp_path: Path) -> Archive:
    return Archive.open(str(tmp_path), "replica-0")


@pytest.fixture
async def plane(pool: asyncpg.Pool, database_url: str, archive: Archive) -> AsyncIterator[Plane]:
    # No decider loop: the test settles runs itself, step by step.
    async with execution_plane(pool, database_url, ui=True, decider_loop=False, archive=archive) as running:
        yield running


async def finished_run(plane: Plane) -> str:
    """A run with two attempts of one task (the first failed), log lines from
    each, a search attribute and audit entries (started, then a message)."""
    await define_task(plane.pool, "pack", retryCount=1, retryDelaySeconds=0)
    await define_workflow(
        plane.pool, "orders", [{"name": "pack", "taskReferenceName": "pack"}], searchAttributes=ATTRIBUTES
    )
    status, started = await post(plane, f"{API}/executions", {"name": "orders", "input": {"tenant": "acme"}})
    assert status == 201, started
    run_id: str = started["id"]
    assert (await post(plane, f"{API}/executions/{run_id}/messages", {"note": "rush"}))[0] == 202
    await settle(plane.pool)
    [first] = await lease(plane.pool, "pack", count=1)
    await log(plane.pool, first.task_id, "box too small")
    await report(plane.pool, first, ResultStatus.FAILED, reason="no box")
    await settle(plane.pool)
    [second] = await lease(plane.pool, "pack", count=1)
    await log(plane.pool, second.task_id, "packed in two boxes")
    await report(plane.pool, second, output={"boxes": 2})
    await settle(plane.pool)
    return run_id


async def log(pool: asyncpg.Pool, task_id: str, message: str) -> None:
    async with pool.acquire() as conn:
        await logs.append(conn, NS, [(str(task_id), [LogLine(message=message)])])


async def expire(pool: asyncpg.Pool, run_id: str) -> None:
    expired = "UPDATE executions SET expires_at = now() - interval '1 second' WHERE id = $1"
    await fetchval(pool, expired, uuid.UUID(run_id))


async def purge(pool: asyncpg.Pool, archive: Archive) -> retention.Purged:
    async with pool.acquire() as conn:
        return await retention.purge(conn, 100, 86_400, archive=archive)


def lines_in(root: Path) -> list[dict[str, Any]]:
    """Every run in every archive file, read as any gzip reader reads them (zcat)."""
    found = []
    for path in sorted(root.glob("*/*.jsonl.gz")):
        with gzip.open(path, "rt") as text:
            found += [json.loads(line) for line in text]
    return found


async def test_a_purged_run_is_read_back_by_id_with_its_tasks_attempts_logs_and_audit(
    plane: Plane, archive: Archive
) -> None:
    run_id = await finished_run(plane)
    await expire(plane.pool, run_id)
    status, before = await get(plane, f"{API}/executions/{run_id}")
    assert status == 200 and before["status"] == "COMPLETED" and before["archived"] is False
    _, logs_before = await get(plane, f"{API}/executions/{run_id}/logs")
    _, audit_before = await get(plane, f"{API}/executions/{run_id}/audit")

    purged = await purge(plane.pool, archive)

    assert purged.runs == 1 and purged.archived == 1 and purged.tasks == 2
    gone = await fetchval(plane.pool, "SELECT count(*) FROM executions WHERE id = $1", uuid.UUID(run_id))
    assert gone == 0, "purged from the database"
    status, after = await get(plane, f"{API}/executions/{run_id}")
    assert status == 200, after
    assert after["archived"] is True
    assert {**after, "archived": False} == before, "the same answer, marked archived"
    assert [(t["attempt"], t["status"]) for t in after["tasks"]] == [(1, "FAILED"), (2, "COMPLETED")]
    assert after["searchAttributes"] == {"tenant": "acme"}
    status, logs_after = await get(plane, f"{API}/executions/{run_id}/logs")
    assert status == 200 and logs_after == logs_before
    assert [(e["attempt"], e["message"]) for e in logs_after["lines"]] == [
        (1, "box too small"),
        (2, "packed in two boxes"),
    ]
    status, audit_after = await get(plane, f"{API}/executions/{run_id}/audit")
    assert status == 200 and audit_after == audit_before
    assert [e["operation"] for e in audit_after["entries"]] == ["start", "message"]

    # One file for the namespace and the run's end day, named by its writer.
    [path] = list(Path(archive.root).glob("*/*.jsonl.gz"))
    day = after["endTime"][:10]
    assert re.fullmatch(rf"{NS}/{day}\.replica-0-[0-9a-f]{{6}}\.0\.jsonl\.gz", str(path.relative_to(archive.root)))
    [line] = lines_in(Path(archive.root))
    assert line["id"] == run_id and len(line["tasks"]) == 2 and len(line["taskLogs"]) == 2
    assert [a["keyword"] for a in line["runAttributes"]] == ["acme"] and len(line["audit"]) == 2


async def test_a_failed_delete_keeps_the_run_and_a_readable_archive_and_the_next_purge_wins(
    plane: Plane, archive: Archive
) -> None:
    run_id = await finished_run(plane)
    await expire(plane.pool, run_id)
    # The delete fails after the archive was written and synced: as a crash would end it.
    await fetchval(
        plane.pool,
        """CREATE FUNCTION refuse_delete() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN RAISE EXCEPTION 'the disk under the database failed'; END $$""",
    )
    await fetchval(
        plane.pool, "CREATE TRIGGER no_delete BEFORE DELETE ON executions FOR EACH ROW EXECUTE FUNCTION refuse_delete()"
    )
    with pytest.raises(StoreError, match="the disk under the database failed"):
        await purge(plane.pool, archive)

    status, body = await get(plane, f"{API}/executions/{run_id}")
    assert status == 200 and body["archived"] is False and body["status"] == "COMPLETED", "still in the database"
    assert await fetchval(plane.pool, "SELECT count(*) FROM archived_runs") == 0, "the index rolled back with it"
    [copy] = lines_in(Path(archive.root))
    assert copy["id"] == run_id, "the archive was written and reads whole"

    await fetchval(plane.pool, "DROP TRIGGER no_delete ON executions")
    assert (await purge(plane.pool, archive)).runs == 1
    first, second = lines_in(Path(archive.root))
    assert first["id"] == second["id"] == run_id, "written twice: readers take the last copy"
    assert second["archivedAt"] > first["archivedAt"]
    status, body = await get(plane, f"{API}/executions/{run_id}")
    assert status == 200 and body["archived"] is True and len(body["tasks"]) == 2


async def test_two_replicas_purging_at_once_write_their_own_files_and_lose_no_run(
    plane: Plane, archive: Archive
) -> None:
    await define_task(plane.pool, "pack")
    await define_workflow(plane.pool, "orders", [{"name": "pack", "taskReferenceName": "pack"}])
    run_ids = [await start(plane.pool, "orders", {"n": n}) for n in range(40)]
    await settle(plane.pool)
    for leased in await lease(plane.pool, "pack", count=40):
        await report(plane.pool, leased)
    await settle(plane.pool)
    await fetchval(plane.pool, "UPDATE executions SET expires_at = now() - interval '1 second'")
    other = Archive.open(str(archive.root), "replica-1")  # the same volume, another process

    async def replica(writer: Archive) -> int:
        total = 0
        async with plane.pool.acquire() as conn:
            while (purged := await retention.purge(conn, 3, 86_400, archive=writer)).runs:
                total += purged.archived
        return total

    # Overlapping batches, for certain: replica 0's stays open (its rows
    # locked, its file written) while replica 1 takes the next rows.
    async with plane.pool.acquire() as first, plane.pool.acquire() as second, first.transaction():
        assert (await retention.purge(first, 3, 86_400, archive=archive)).archived == 3
        assert (await retention.purge(second, 3, 86_400, archive=other)).archived == 3
    counts = await asyncio.gather(replica(archive), replica(other))  # then both drain the rest at once
    assert sum(counts) == 34, counts
    files = sorted(Path(archive.root).glob(f"{NS}/*.jsonl.gz"))
    assert {f.name.split(".")[1].rsplit("-", 1)[0] for f in files} == {"replica-0", "replica-1"}
    assert sorted(line["id"] for line in lines_in(Path(archive.root))) == sorted(run_ids), "each once, whole"
    for run_id in run_ids:
        status, body = await get(plane, f"{API}/executions/{run_id}")
        assert status == 200 and body["archived"] is True, body


async def test_the_purger_loop_archives_what_it_purges_and_counts_it(plane: Plane, archive: Archive) -> None:
    run_id = await finished_run(plane)
    await expire(plane.pool, run_id)
    before = REGISTRY.get_sample_value("sluiceway_runs_archived_total") or 0.0
    stop = asyncio.Event()
    purger = asyncio.create_task(
        loops.run_purger(plane.pool, stop, batch=100, interval=0.1, idempotency_window=86_400, archive=archive)
    )
    try:
        await eventually_async(
            lambda: fetchval(plane.pool, "SELECT 1 FROM archived_runs WHERE id = $1", uuid.UUID(run_id)),
            what="the purger loop to archive the run",
        )
    finally:
        stop.set()
        await purger
    assert REGISTRY.get_sample_value("sluiceway_runs_archived_total") == before + 1
    status, body = await get(plane, f"{API}/executions/{run_id}")
    assert status == 200 and body["archived"] is True


async def test_an_archived_run_is_read_only_in_its_own_namespace(plane: Plane, archive: Archive) -> None:
    run_id = await finished_run(plane)
    await expire(plane.pool, run_id)
    await purge(plane.pool, archive)
    assert (await get(plane, f"{API}/executions/{run_id}"))[0] == 200
    for path in ("", "/logs", "/audit"):
        status, body = await get(plane, f"/v1/ns/elsewhere/executions/{run_id}{path}")
        assert status == 404 and body["error"] == "NOT_FOUND", body
    browser = Browser(plane.url)
    try:
        assert (await browser.get(f"/ui/ns/elsewhere/runs/{run_id}")).status == 404
    finally:
        await browser.close()


async def test_an_unreadable_archive_file_is_a_404_that_names_it(plane: Plane, archive: Archive) -> None:
    run_id = await finished_run(plane)
    await expire(plane.pool, run_id)
    await purge(plane.pool, archive)
    [path] = list(Path(archive.root).glob("*/*.jsonl.gz"))
    path.unlink()
    status, body = await get(plane, f"{API}/executions/{run_id}")
    assert status == 404 and path.name in body["message"], body


async def test_the_ui_shows_an_archived_run_marked_with_its_attempts_and_logs(plane: Plane, archive: Archive) -> None:
    run_id = await finished_run(plane)
    await expire(plane.pool, run_id)
    await purge(plane.pool, archive)
    browser = Browser(plane.url)
    try:
        page = await browser.get(f"/ui/ns/{NS}/runs/{run_id}?task=pack")
        panel = await browser.get(f"/ui/ns/{NS}/runs/{run_id}/tasks/pack", **{"HX-Request": "true"})
    finally:
        await browser.close()
    assert page.status == 200, page.text
    assert "data-archived" in page.text and "Retention deleted this run" in page.text
    assert 'data-ref="pack" data-status="COMPLETED"' in page.text
    assert "packed in two boxes" in page.text and "box too small" in page.text
    assert "Retry from failed" not in page.text and "Rerun from" not in page.text, "read only"
    assert panel.status == 200 and "packed in two boxes" in panel.text


async def test_runs_get_reads_an_archived_run_back(plane: Plane, archive: Archive) -> None:
    run_id = await finished_run(plane)
    await expire(plane.pool, run_id)
    await purge(plane.pool, archive)

    async def cli(*argv: str) -> tuple[int, str]:
        result = await asyncio.to_thread(CliRunner().invoke, app(), [*argv, "-n", NS, "--server", plane.url])
        return result.exit_code, result.stdout + result.stderr

    code, said = await cli("runs", "get", run_id)
    assert code == 0, said
    assert re.search(r"^Archived +yes", said, re.MULTILINE) and "COMPLETED" in said, said
    code, said = await cli("runs", "get", run_id, "-o", "json")
    assert code == 0 and json.loads(said)["archived"] is True, said


def test_bad_archive_directories_are_refused_with_the_reason(tmp_path: Path) -> None:
    file = tmp_path / "a-file"
    file.write_text("")
    for root, reason in (
        ("archive", "is not an absolute path"),
        (str(tmp_path / "missing"), "is not an existing directory"),
        (str(file), "is not an existing directory"),
    ):
        with pytest.raises(ArchiveError, match=f"SLUICEWAY_ARCHIVE_DIR: .* {reason}"):
            Archive.open(root, "replica-0")
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(ArchiveError, match="is not writable"):
            Archive.open(str(locked), "replica-0")


def test_the_operator_stops_at_startup_on_a_bad_archive_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nobody = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"  # never reached: the archive is checked first
    settings = Settings.from_env({"SLUICEWAY_DATABASE_URL": nobody, "SLUICEWAY_ARCHIVE_DIR": str(tmp_path / "missing")})
    assert operator.main(settings) == 2
    assert "SLUICEWAY_ARCHIVE_DIR" in capsys.readouterr().err
