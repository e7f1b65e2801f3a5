"""The operator waits for PostgreSQL instead of exiting when it is not there
yet (a database pod starting beside the operator's), and stops waiting on a
stop."""

from __future__ import annotations

import asyncio

from sluiceway.devenv.processes import free_port
from sluiceway.runtime.operator import _open_pool_when_reachable
from sluiceway.runtime.settings import Settings


def settings(dsn: str) -> Settings:
    return Settings.from_env({"SLUICEWAY_DATABASE_URL": dsn})


async def test_an_unreachable_database_is_waited_for_until_the_operator_stops() -> None:
    nobody = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"  # a port nothing listens on
    stop = asyncio.Event()
    waiting = asyncio.create_task(_open_pool_when_reachable(settings(nobody), stop))
    await asyncio.sleep(2)  # several refused attempts
    assert not waiting.done(), "a refused connection is waited out, not fatal"
    stop.set()
    assert await asyncio.wait_for(waiting, 5) is None


async def test_a_reachable_database_gives_a_migrated_pool(database_url: str) -> None:
    pool = await _open_pool_when_reachable(settings(database_url), asyncio.Event())
    assert pool is not None
    try:
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM schema_migrations") >= 1
    finally:
        await pool.close()
