"""Fixtures shared by every suite: a real PostgreSQL for the whole session, and
a fresh database per test so tests never see each other's rows."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest

from sluiceway.devenv.postgres import LocalPostgres


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """DSN of a PostgreSQL server: $SLUICEWAY_TEST_DATABASE_URL, or an embedded one."""
    configured = os.environ.get("SLUICEWAY_TEST_DATABASE_URL")
    if configured:
        yield configured
        return
    with LocalPostgres() as server:
        yield server.dsn


@pytest.fixture
async def database_url(postgres_server: str) -> AsyncIterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(postgres_server)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    yield postgres_server.rsplit("/", 1)[0] + f"/{name}"
    admin = await asyncpg.connect(postgres_server)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    from sluiceway.store.database import open_pool

    pool = await open_pool(database_url, min_size=1, max_size=20)
    yield pool
    await pool.close()
