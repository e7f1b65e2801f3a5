"""The connection pool and its start-up: connect, then migrate."""

from __future__ import annotations

from typing import Any

import asyncpg
import orjson

from sluiceway.store.migrating import migrate


def _encode_jsonb(value: Any) -> bytes:
    return b"\x01" + orjson.dumps(value)  # jsonb's binary format: a version byte, then JSON text


def _decode_jsonb(data: bytes) -> Any:
    return orjson.loads(data[1:])


async def init_connection(conn: asyncpg.Connection) -> None:
    """jsonb travels as Python objects, through orjson in jsonb's binary format."""
    await conn.set_type_codec(
        "jsonb", encoder=_encode_jsonb, decoder=_decode_jsonb, schema="pg_catalog", format="binary"
    )
    await conn.set_type_codec(
        "json", encoder=lambda v: orjson.dumps(v).decode(), decoder=orjson.loads, schema="pg_catalog"
    )


async def _no_reset(conn: asyncpg.Connection) -> None:
    """Connections keep no session state between uses (locks are
    transaction-scoped, LISTEN lives on its own connection), so the default
    reset query would be a wasted round trip on every release."""


async def open_pool(dsn: str, *, min_size: int = 2, max_size: int = 10, **kwargs: Any) -> asyncpg.Pool:
    """A pool against `dsn` with the schema migrated to the latest version."""
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    pool: asyncpg.Pool = await asyncpg.create_pool(
        dsn, min_size=min_size, max_size=max_size, init=init_connection, reset=_no_reset, **kwargs
    )
    return pool


async def ping(pool: asyncpg.Pool, timeout: float = 2.0) -> None:
    """Raise unless PostgreSQL answers within `timeout`."""
    async with pool.acquire(timeout=timeout) as conn:
        await conn.fetchval("SELECT 1", timeout=timeout)
