"""The audit trail of runs: who changed a run, through which edge, and how.

Written in the transaction of the operation it records, so it can neither
be lost nor claim something that was rolled back; purged with the run. Only
the execution plane writes it (`sluiceway.plane.units`): every command that
changes a run records itself there."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

# One row per entry, in one statement; each entry is kept only if its run is in
# its namespace, and answers with the run's WorkflowRun (NULL without one).
_RECORD = """
INSERT INTO run_audit (namespace, execution_id, actor, via, operation, detail)
SELECT e.namespace, e.id, $1, $2, r.operation, r.detail
  FROM unnest($3::text[], $4::uuid[], $5::text[], $6::jsonb[]) WITH ORDINALITY
       AS r(namespace, id, operation, detail, at)
  JOIN executions e ON e.id = r.id AND e.namespace = r.namespace
 ORDER BY r.at
RETURNING namespace, execution_id, operation, (SELECT resource_name FROM executions WHERE id = execution_id)
"""
_READ = """
SELECT id, at, actor, via, operation, detail FROM run_audit
 WHERE execution_id = $1 AND namespace = $2 AND id > $3 ORDER BY id LIMIT $4
"""


@dataclass(frozen=True)
class Actor:
    """Who makes a change, never a credential: a person or service account
    (`user`), how they were known (`via`: token, api-key, signature,
    workflowrun, schedule, operator, anonymous), and the API key's Secret
    name when one was used."""

    user: str
    via: str
    key: str | None = None

    @property
    def name(self) -> str:
        return self.user if self.key is None else f"{self.user} (API key {self.key})"


@dataclass(frozen=True)
class Entry:
    id: int
    at: datetime.datetime
    actor: str
    via: str
    operation: str
    detail: dict[str, Any]


@dataclass(frozen=True)
class Change:
    """One entry to record: `operation` done on a run of `namespace`."""

    namespace: str
    run_id: uuid.UUID
    operation: str
    detail: dict[str, Any]


@dataclass(frozen=True)
class Recorded:
    """An entry written for a run that has a WorkflowRun, to announce on it."""

    namespace: str
    run_id: uuid.UUID
    operation: str
    workflow_run: str


async def record(conn: asyncpg.Connection, actor: Actor, changes: Sequence[Change]) -> list[Recorded]:
    """Record changes made by `actor`, in order, in one statement: a change
    naming no run of its namespace is not recorded. The entries on runs with
    a WorkflowRun are returned."""
    if not changes:
        return []
    rows = await conn.fetch(
        _RECORD,
        actor.name,
        actor.via,
        [c.namespace for c in changes],
        [c.run_id for c in changes],
        [c.operation for c in changes],
        [c.detail for c in changes],
    )
    return [Recorded(r[0], r[1], r[2], r[3]) for r in rows if r[3] is not None]


async def read(
    conn: asyncpg.Connection, namespace: str, execution_id: uuid.UUID, after: int = 0, limit: int = 1000
) -> list[Entry]:
    return [Entry(**dict(r)) for r in await conn.fetch(_READ, execution_id, namespace, after, limit)]
