"""Fixtures shared by every suite: a real PostgreSQL for the whole session, and
a fresh database per test (tests/support/database.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from sluiceway.store.database import Pool
from tests.support.database import Databases, databases_on, pool_on, postgres_server


@pytest.fixture(scope="session", name="postgres_server")
def _postgres_server() -> Iterator[str]:
    with postgres_server() as dsn:
        yield dsn


@pytest.fixture(scope="session")
async def databases(postgres_server: str) -> AsyncIterator[Databases]:
    async with databases_on(postgres_server) as created:
        yield created


@pytest.fixture
async def database_url(databases: Databases) -> AsyncIterator[str]:
    """A migrated database of the test's own."""
    async with databases.fresh() as url:
        yield url


@pytest.fixture
async def empty_database_url(databases: Databases) -> AsyncIterator[str]:
    """A database of the test's own with no schema at all, for the migrations."""
    async with databases.fresh(migrated=False) as url:
        yield url


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[Pool]:
    async with pool_on(database_url) as opened:
        yield opened
