"""Setting runs aside: a run the decider cannot decide (its spec or rows
cannot be read, its decision is a Quarantine, or the decision cannot be
applied even alone) is marked on its row with a reason, its decide events are
consumed, and it is passed over from then on (terminating it still works;
forcing an evaluation releases it). And the reason an error gives, for that
mark and for log lines."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
from pydantic import ValidationError

from sluiceway.store import sql

REASON_CHARS = 2000  # a quarantine reason is for people; the head of an error says enough


@dataclass(frozen=True)
class Quarantined:
    """A run set aside by the decider, reported once it is committed."""

    run_id: str
    namespace: str
    workflow: str
    reason: str


@dataclass(frozen=True)
class SetAside:
    """A run to quarantine, and why: a row of _QUARANTINE."""

    id: sql.Uuid
    reason: sql.Text


def describe(error: BaseException) -> str:
    """The error for a reason or a log line: its type and the head of its
    message, never a payload (pydantic's input values are left out)."""
    if isinstance(error, ValidationError):
        text = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors())
    else:
        text = str(error)
    return f"{type(error).__name__}: {text}"[:REASON_CHARS]


_QUARANTINE = f"""
WITH consumed AS (DELETE FROM decide_queue WHERE execution_id = ANY($1))
UPDATE executions e SET quarantined_at = now(), quarantine_reason = q.reason, mirror_seq = e.mirror_seq + 1
  FROM {sql.unnest(SetAside, "q")}
 WHERE e.id = q.id AND e.status = 'RUNNING' AND e.quarantined_at IS NULL
RETURNING e.id, e.namespace, e.workflow_name, q.reason
"""


async def quarantine_runs(conn: asyncpg.Connection, runs: list[SetAside]) -> list[Quarantined]:
    """Set runs aside with their reasons, consuming their decide events."""
    if not runs:
        return []
    # A text column holds no NUL; a reason quoting one must still be written.
    written = [SetAside(run.id, run.reason[:REASON_CHARS].replace("\x00", "\\0")) for run in runs]
    rows = await conn.fetch(_QUARANTINE, *sql.arrays(written, SetAside))
    return [Quarantined(str(r["id"]), r["namespace"], r["workflow_name"], r["reason"]) for r in rows]
