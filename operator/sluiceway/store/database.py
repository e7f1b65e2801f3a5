"""The connection pool and its start-up: connect, then migrate."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from sluiceway.store.migrating import migrate


async def _init_connection(conn: asyncpg.Connection) -> None:
    # jsonb columns travel as Python objects; orjson-grade speed is not needed here.
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    await conn.set_type_codec("json", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def open_pool(dsn: str, *, min_size: int = 2, max_size: int = 10, **kwargs: Any) -> asyncpg.Pool:
    """A pool against `dsn` with the schema migrated to the latest version."""
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    pool: asyncpg.Pool = await asyncpg.create_pool(
        dsn, min_size=min_size, max_size=max_size, init=_init_connection, **kwargs
    )
    return pool
