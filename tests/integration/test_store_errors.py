"""The store's errors, against a real PostgreSQL: what the database refuses
leaves the store as a StoreError, an outage as StoreUnavailable, each with the
driver's error as its cause, so the edges never name the driver."""

from __future__ import annotations

import socket

import pytest

from sluiceway.store.database import Pool, open_pool
from sluiceway.store.errors import StoreError, StoreUnavailable


async def test_a_statement_the_database_refuses_is_a_store_error_not_an_outage(pool: Pool) -> None:
    with pytest.raises(StoreError) as raised:
        async with pool.acquire() as conn:
            await conn.execute("SELECT 1 / 0")
    assert not isinstance(raised.value, StoreUnavailable)
    assert type(raised.value.__cause__).__name__ == "DivisionByZeroError"
    async with pool.acquire() as conn:  # the connection went back to the pool, usable
        assert await conn.fetchval("SELECT 1") == 1


async def test_a_session_the_server_ends_is_an_outage(pool: Pool) -> None:
    with pytest.raises(StoreUnavailable) as raised:
        async with pool.acquire() as victim, pool.acquire() as other:
            pid = await victim.fetchval("SELECT pg_backend_pid()")
            await other.execute("SELECT pg_terminate_backend($1)", pid)
            await victim.fetchval("SELECT 1")
    assert "unavailable" in str(raised.value)
    async with pool.acquire() as conn:  # the pool replaces the lost connection
        assert await conn.fetchval("SELECT 1") == 1


async def test_other_errors_pass_through_unchanged(pool: Pool) -> None:
    with pytest.raises(KeyError):
        async with pool.acquire():
            raise KeyError("not the database's")


async def test_no_server_listening_is_an_outage() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once the socket is closed
    with pytest.raises(StoreUnavailable) as raised:
        await open_pool(f"postgresql://nobody@127.0.0.1:{port}/none", min_size=1, max_size=1)
    assert isinstance(raised.value.__cause__, OSError)
