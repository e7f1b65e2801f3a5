"""Definitions in PostgreSQL: migrations and name ownership."""

from __future__ import annotations

import asyncio

import asyncpg

from sluiceway.store import definitions
from sluiceway.store.migrating import available, migrate


async def test_migrations_apply_once_under_concurrent_starts(empty_database_url: str) -> None:
    conns = [await asyncpg.connect(empty_database_url) for _ in range(4)]
    try:
        applied = await asyncio.gather(*(migrate(c) for c in conns))
        names = [name for batch in applied for name in batch]
        assert sorted(names) == sorted(name for _, name, _ in available())
        rows = await conns[0].fetch("SELECT version FROM schema_migrations ORDER BY version")
        assert [r["version"] for r in rows] == [v for v, _, _ in available()]
    finally:
        for c in conns:
            await c.close()


async def test_task_definition_round_trip_and_update(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        claim = await definitions.upsert_task_definition(conn, "ns", "charge", "charge", 1, {"retryCount": 5})
        assert claim.is_ours("charge")
        await definitions.upsert_task_definition(conn, "ns", "charge", "charge", 2, {"retryCount": 7})
        stored = await definitions.get_task_definition(conn, "ns", "charge")
    assert stored is not None
    assert (stored.generation, stored.spec) == (2, {"retryCount": 7})


async def test_a_second_resource_cannot_take_an_owned_name(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await definitions.upsert_task_definition(conn, "ns", "export_report", "export-report", 1, {})
        claim = await definitions.upsert_task_definition(conn, "ns", "export_report", "impostor", 1, {"x": 1})
        stored = await definitions.get_task_definition(conn, "ns", "export_report")
    assert claim.owner == "export-report" and not claim.is_ours("impostor")
    assert stored is not None and stored.spec == {}, "the owner's policy must not be overwritten"


async def test_renaming_releases_the_old_name(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await definitions.upsert_task_definition(conn, "ns", "old_name", "td", 1, {})
        await definitions.upsert_task_definition(conn, "ns", "new_name", "td", 2, {})
        assert await definitions.get_task_definition(conn, "ns", "old_name") is None
        assert await definitions.get_task_definition(conn, "ns", "new_name") is not None


async def test_namespaces_do_not_share_names(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        a = await definitions.upsert_task_definition(conn, "a", "charge", "charge", 1, {"retryCount": 1})
        b = await definitions.upsert_task_definition(conn, "b", "charge", "charge", 1, {"retryCount": 2})
        assert a.is_ours("charge") and b.is_ours("charge")
        stored_a = await definitions.get_task_definition(conn, "a", "charge")
        assert stored_a is not None and stored_a.spec == {"retryCount": 1}


async def test_delete_removes_the_row(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await definitions.upsert_task_definition(conn, "ns", "charge", "charge", 1, {})
        await definitions.delete_task_definition(conn, "ns", "charge")
        assert await definitions.get_task_definition(conn, "ns", "charge") is None
