"""What the status mirror reads: runs started by a WorkflowRun whose state
changed since their status was last written."""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg


@dataclass(frozen=True)
class PendingMirror:
    id: str
    namespace: str
    resource_name: str
    status: str
    reason: str
    awaiting_admission: bool
    workflow_version: int
    output: dict[str, Any]
    created_at: datetime.datetime
    ended_at: datetime.datetime | None
    mirror_seq: int
    counts: dict[str, int]
    quarantined_at: datetime.datetime | None = None
    quarantine_reason: str | None = None
    paused_at: datetime.datetime | None = None
    sla_breached_at: datetime.datetime | None = None
    sla_to_report: bool = False  # breached, and no Event said so yet
    iterations: dict[str, int] | None = None  # each DO_WHILE: its iteration


_PENDING = """
SELECT id, namespace, resource_name, status, reason, awaiting_admission, workflow_version, output, created_at,
       ended_at, mirror_seq, quarantined_at, quarantine_reason, paused_at, sla_breached_at,
       sla_breached_at IS NOT NULL AND NOT sla_reported AS sla_to_report
  FROM executions
 WHERE resource_name IS NOT NULL AND mirror_seq > mirrored_seq
 ORDER BY id
 LIMIT $1
"""
_COUNTS = """
SELECT execution_id, status, count(*)::int AS n FROM (
    SELECT DISTINCT ON (execution_id, ref) execution_id, status FROM tasks
     WHERE execution_id = ANY($1) ORDER BY execution_id, ref, attempt DESC
) latest GROUP BY execution_id, status
"""
_ITERATIONS = """
SELECT DISTINCT ON (execution_id, ref) execution_id, ref, output -> 'iteration' AS iteration FROM tasks
 WHERE execution_id = ANY($1) AND type = 'DO_WHILE' ORDER BY execution_id, ref, attempt DESC
"""
# An SLA breach is reported once: marked with the write that reported it.
_MARK = """
UPDATE executions e SET mirrored_seq = greatest(e.mirrored_seq, m.seq), sla_reported = e.sla_reported OR m.sla
  FROM unnest($1::uuid[], $2::bigint[], $3::bool[]) AS m(id, seq, sla)
 WHERE e.id = m.id AND (e.mirrored_seq < m.seq OR (m.sla AND NOT e.sla_reported))
"""


async def pending(conn: asyncpg.Connection, limit: int) -> list[PendingMirror]:
    rows = await conn.fetch(_PENDING, limit)
    if not rows:
        return []
    counts: dict[uuid.UUID, dict[str, int]] = {r["id"]: {} for r in rows}
    for row in await conn.fetch(_COUNTS, list(counts)):
        counts[row["execution_id"]][row["status"]] = row["n"]
    iterations: dict[uuid.UUID, dict[str, int]] = {}
    for row in await conn.fetch(_ITERATIONS, list(counts)):
        if isinstance(row["iteration"], int):
            iterations.setdefault(row["execution_id"], {})[row["ref"]] = row["iteration"]
    return [
        PendingMirror(
            id=str(r["id"]),
            namespace=r["namespace"],
            resource_name=r["resource_name"],
            status=r["status"],
            reason=r["reason"],
            awaiting_admission=r["awaiting_admission"],
            workflow_version=r["workflow_version"],
            output=r["output"],
            created_at=r["created_at"],
            ended_at=r["ended_at"],
            mirror_seq=r["mirror_seq"],
            counts=counts[r["id"]],
            quarantined_at=r["quarantined_at"],
            quarantine_reason=r["quarantine_reason"],
            paused_at=r["paused_at"],
            sla_breached_at=r["sla_breached_at"],
            sla_to_report=r["sla_to_report"],
            iterations=iterations.get(r["id"]),
        )
        for r in rows
    ]


_DEAD_LETTER = """
INSERT INTO dead_letters (execution_id, mirror_seq, namespace, resource_name)
SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[]) ON CONFLICT DO NOTHING
"""


@dataclass(frozen=True)
class DeadLetter:
    """A status the API server refused for good."""

    id: str
    mirror_seq: int
    namespace: str
    resource_name: str


async def mark_mirrored(
    conn: asyncpg.Connection, written: list[tuple[str, int, bool]], dead: list[DeadLetter] | None = None
) -> None:
    """Record what was written: each run's mirror_seq, and whether its SLA breach was reported;
    and, in the same transaction, the statuses given up for good (counted once each)."""
    async with conn.transaction():
        if dead:
            await conn.execute(
                _DEAD_LETTER,
                [uuid.UUID(d.id) for d in dead],
                [d.mirror_seq for d in dead],
                [d.namespace for d in dead],
                [d.resource_name for d in dead],
            )
        if written:
            await conn.execute(
                _MARK,
                [uuid.UUID(i) for i, _, _ in written],
                [seq for _, seq, _ in written],
                [s for _, _, s in written],
            )
