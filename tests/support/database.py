"""PostgreSQL for the tests: one real server per session, and a fresh database
per test so tests never see each other's rows.

A template database is migrated once per session, and each test gets
`CREATE DATABASE ... TEMPLATE` of it: a copy of its files (FILE_COPY, which
on a test server without fsync beats writing every block to the WAL), with no
migration to run. The copy for the next test is made while this one runs, so
a test waits milliseconds for its database, not the copy's quarter second. A
test of the migrations themselves asks for an empty database instead."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg

from sluiceway.devenv.postgres import LocalPostgres
from sluiceway.store.database import Pool, open_pool
from sluiceway.store.migrating import migrate


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """DSN of a PostgreSQL server: $SLUICEWAY_TEST_DATABASE_URL, or an embedded one."""
    configured = os.environ.get("SLUICEWAY_TEST_DATABASE_URL")
    if configured:
        yield configured
        return
    with LocalPostgres() as server:
        yield server.dsn


class Databases:
    """Databases created on one server, migrated ones copied from a template."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.template = f"template_{uuid.uuid4().hex[:8]}"
        self._strategy = ""
        self._spare: asyncio.Future[str] | None = None  # the next test's copy, being made

    def url(self, name: str) -> str:
        return self.server.rsplit("/", 1)[0] + f"/{name}"

    async def create_template(self) -> None:
        conn = await asyncpg.connect(self.server)
        try:
            if conn.get_server_version() >= (15, 0):  # the strategies came with PostgreSQL 15
                self._strategy = " STRATEGY FILE_COPY"
        finally:
            await conn.close()
        await self._admin(f'CREATE DATABASE "{self.template}"')
        conn = await asyncpg.connect(self.url(self.template))
        try:
            await migrate(conn)
        finally:
            await conn.close()  # a template with a session open cannot be copied

    async def drop_template(self) -> None:
        if self._spare is not None:
            await self.drop(await self._spare)
        await self._admin(f'DROP DATABASE IF EXISTS "{self.template}" WITH (FORCE)')

    async def create(self, prefix: str = "t", *, migrated: bool = True) -> str:
        """A new database's URL: a copy of the migrated template, or empty."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        template = f' TEMPLATE "{self.template}"{self._strategy}' if migrated else ""
        await self._admin(f'CREATE DATABASE "{name}"{template}')
        return self.url(name)

    async def drop(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        await self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    @contextlib.asynccontextmanager
    async def fresh(self, *, migrated: bool = True) -> AsyncIterator[str]:
        """A database for one test, dropped after it. Only on the session's
        event loop: the next copy is a task on it."""
        url = await self._copy() if migrated else await self.create(migrated=False)
        try:
            yield url
        finally:
            await self.drop(url)

    async def _copy(self) -> str:
        spare, self._spare = self._spare, asyncio.ensure_future(self.create())
        return await spare if spare is not None else await self.create()

    async def _admin(self, statement: str) -> None:
        conn = await asyncpg.connect(self.server)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()


@contextlib.asynccontextmanager
async def databases_on(server: str) -> AsyncIterator[Databases]:
    databases = Databases(server)
    await databases.create_template()
    try:
        yield databases
    finally:
        await databases.drop_template()


@contextlib.asynccontextmanager
async def pool_on(database_url: str) -> AsyncIterator[Pool]:
    pool = await open_pool(database_url, min_size=1, max_size=20)
    try:
        yield pool
    finally:
        await pool.close()


def fetch(database_url: str, query: str, *args: object) -> list[dict[str, object]]:
    """Run one query from blocking code (e2e), for what only the database can
    show or do: an internal invariant, or garbage no API could write."""

    async def go() -> list[dict[str, object]]:
        conn = await asyncpg.connect(database_url)
        await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
        try:
            return [dict(r) for r in await conn.fetch(query, *args)]
        finally:
            await conn.close()

    return asyncio.run(go())
