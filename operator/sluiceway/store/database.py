"""The connection pool and its start-up: connect, then migrate.

Callers type with `Pool` and `Connection` from here and catch the errors of
`sluiceway.store.errors`: nothing outside the store names the driver."""

from __future__ import annotations

from types import TracebackType
from typing import Any, TypeAlias

import asyncpg
import orjson

from sluiceway.store.errors import on_standby, translated
from sluiceway.store.migrating import migrate

# One connection, in a transaction or not. Re-exported so that callers can name
# the type a store function takes without importing the driver.
Connection: TypeAlias = asyncpg.Connection


def _encode_jsonb(value: Any) -> bytes:
    return b"\x01" + orjson.dumps(value)  # jsonb's binary format: a version byte, then JSON text


def _decode_jsonb(data: bytes) -> Any:
    return orjson.loads(data[1:])


async def init_connection(conn: Connection) -> None:
    """jsonb travels as Python objects, through orjson in jsonb's binary format."""
    await conn.set_type_codec(
        "jsonb", encoder=_encode_jsonb, decoder=_decode_jsonb, schema="pg_catalog", format="binary"
    )
    await conn.set_type_codec(
        "json", encoder=lambda v: orjson.dumps(v).decode(), decoder=orjson.loads, schema="pg_catalog"
    )


async def _no_reset(conn: Connection) -> None:
    """Connections keep no session state between uses (locks are
    transaction-scoped, LISTEN lives on its own connection), so the default
    reset query would be a wasted round trip on every release."""


class Pool:
    """The pool of connections to PostgreSQL. A driver error leaving an
    `acquire` block leaves it as the store's own: StoreUnavailable for an
    outage, StoreError for anything else the database refused. Inside the
    block (that is, inside the store) the driver's errors are seen as raised."""

    __slots__ = ("_pool",)

    def __init__(self, pool: Any) -> None:
        self._pool = pool

    def acquire(self, *, timeout: float | None = None) -> _Acquired:
        return _Acquired(self._pool.acquire(timeout=timeout))

    async def close(self) -> None:
        await self._pool.close()

    def usage(self) -> tuple[int, int, int]:
        """(connections in use, idle, the most it may open): the pool's metrics."""
        size, idle = self._pool.get_size(), self._pool.get_idle_size()
        return size - idle, idle, self._pool.get_max_size()


class _Acquired:
    """`async with pool.acquire() as conn`: one connection, back to the pool at the end."""

    __slots__ = ("_context", "_conn")

    def __init__(self, context: Any) -> None:
        self._context = context
        self._conn: Connection | None = None

    async def __aenter__(self) -> Connection:
        try:
            self._conn = await self._context.__aenter__()
        except Exception as error:
            store_error = translated(error, connection_lost=True)
            if store_error is None:
                raise
            raise store_error from error
        return self._conn

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        lost = isinstance(error, OSError) and _lost(self._conn)
        if on_standby(error) and self._conn is not None:
            self._conn.terminate()  # the pool opens a new session, on the new primary
        await self._context.__aexit__(kind, error, traceback)
        if error is not None:
            store_error = translated(error, connection_lost=lost)
            if store_error is not None:
                raise store_error from error


def _lost(conn: Connection | None) -> bool:
    try:
        return conn is None or bool(conn.is_closed())
    except asyncpg.InterfaceError:  # already released: the pool let it go as lost
        return True


async def open_pool(
    dsn: str, *, min_size: int = 2, max_size: int = 10, generic_plans: bool = True, **kwargs: Any
) -> Pool:
    """A pool against `dsn` with the schema migrated to the latest version.

    `generic_plans`: every statement of the store is planned once per
    connection (`plan_cache_mode = force_generic_plan`), not again on each
    call. Most of them take their rows as arrays (a batch of results, of new
    tasks, of runs to finish), whose plan PostgreSQL would otherwise redo for
    every call, the new arrays always looking cheaper than the generic plan:
    that planning was a fifth of the database's CPU per task on the hot path
    (bench/queue_cost.py; docs/performance.md). Every statement is keyed by
    columns its indexes name, never by a value a partial index's predicate
    must see, so one plan serves every call."""
    try:
        conn = await asyncpg.connect(dsn)
        try:
            await migrate(conn)
        finally:
            await conn.close()
        settings = dict(kwargs.pop("server_settings", {}))
        if generic_plans:
            settings.setdefault("plan_cache_mode", "force_generic_plan")
        pool = await asyncpg.create_pool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            init=init_connection,
            reset=_no_reset,
            server_settings=settings,
            **kwargs,
        )
    except Exception as error:
        store_error = translated(error, connection_lost=True)
        if store_error is None:
            raise
        raise store_error from error
    return Pool(pool)


async def ping(pool: Pool, timeout: float = 2.0) -> None:
    """Raise unless PostgreSQL answers within `timeout`."""
    async with pool.acquire(timeout=timeout) as conn:
        await conn.fetchval("SELECT 1", timeout=timeout)
