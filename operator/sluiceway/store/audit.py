"""The audit trail of runs: who changed a run through the API, and how.

Written in the transaction of the operation it records, so it can neither
be lost nor claim something that was rolled back; purged with the run."""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

_RECORD = """
INSERT INTO run_audit (namespace, execution_id, actor, via, operation, detail)
SELECT $1, $2, $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM executions WHERE id = $2 AND namespace = $1)
RETURNING (SELECT resource_name FROM executions WHERE id = $2)
"""
_READ = """
SELECT id, at, actor, via, operation, detail FROM run_audit
 WHERE execution_id = $1 AND namespace = $2 AND id > $3 ORDER BY id LIMIT $4
"""


@dataclass(frozen=True)
class Actor:
    name: str  # the authenticated identity's user name
    via: str  # token, api-key, signature, anonymous


@dataclass(frozen=True)
class Entry:
    id: int
    at: datetime.datetime
    actor: str
    via: str
    operation: str
    detail: dict[str, Any]


async def record(
    conn: asyncpg.Connection,
    namespace: str,
    execution_id: str | uuid.UUID,
    actor: Actor,
    operation: str,
    detail: dict[str, Any] | None = None,
) -> str | None:
    """Record an operation on a run of `namespace`; the name of the run's
    WorkflowRun (None without one, or when there is no such run: nothing is
    recorded then)."""
    found: str | None = await conn.fetchval(
        _RECORD, namespace, uuid.UUID(str(execution_id)), actor.name, actor.via, operation, detail or {}
    )
    return found


async def read(
    conn: asyncpg.Connection, namespace: str, execution_id: uuid.UUID, after: int = 0, limit: int = 1000
) -> list[Entry]:
    return [Entry(**dict(r)) for r in await conn.fetch(_READ, execution_id, namespace, after, limit)]


_RECORD_STARTS = """
INSERT INTO run_audit (namespace, execution_id, actor, via, operation, detail)
SELECT $1, r.id, $2, $3, 'start', r.detail FROM unnest($4::uuid[], $5::jsonb[]) AS r(id, detail)
"""


async def record_starts(
    conn: asyncpg.Connection, namespace: str, started: list[tuple[uuid.UUID, dict[str, Any]]], actor: Actor
) -> None:
    """Record many runs this transaction started through the API, in one statement
    (they have no WorkflowRun, so there is nothing to announce)."""
    if started:
        await conn.execute(
            _RECORD_STARTS, namespace, actor.name, actor.via, [s[0] for s in started], [s[1] for s in started]
        )
