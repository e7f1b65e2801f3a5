"""Numbered, append-only SQL migrations applied at start under an advisory lock,
so several operator replicas starting at once apply each file exactly once."""

from __future__ import annotations

import logging
from importlib import resources

import asyncpg

log = logging.getLogger(__name__)

# pg_advisory_lock key: any constant unique to this purpose.
_MIGRATION_LOCK = 7_311_725_001

_CREATE_LEDGER = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
)
"""
_APPLIED = "SELECT version FROM schema_migrations"
_RECORD = "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)"


def available() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every migration shipped with the package."""
    found = []
    for entry in resources.files("sluiceway.store.migrations").iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append((version, entry.name, entry.read_text()))
    return sorted(found)


async def migrate(conn: asyncpg.Connection) -> list[str]:
    """Apply the pending migrations; return the names applied."""
    applied_now: list[str] = []
    await conn.execute("SELECT pg_advisory_lock($1)", _MIGRATION_LOCK)
    try:
        await conn.execute(_CREATE_LEDGER)
        done = {row["version"] for row in await conn.fetch(_APPLIED)}
        for version, name, sql in available():
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute(_RECORD, version, name)
            log.info("applied migration %s", name)
            applied_now.append(name)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _MIGRATION_LOCK)
    return applied_now
