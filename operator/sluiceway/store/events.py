"""Published events: each kept with what every Trigger of its name did with
it, listed newest first in keyset pages, summed per Trigger for its status,
and forgotten after the operator's event retention."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import asyncpg

_RECORD = """
INSERT INTO events (id, namespace, name, event_id, source, payload, outcomes, kinds)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING received_at
"""
_COLUMNS = "id, name, event_id, source, outcomes, received_at"
# Newest first; `$3`/`$4` the last row of the previous page, `$5` an event name, `$6` an outcome.
_PAGE = f"""
SELECT {_COLUMNS} FROM events
 WHERE namespace = $1
   AND ($3::timestamptz IS NULL OR (received_at, id) < ($3, $4::uuid))
   AND ($5::text IS NULL OR name = $5)
   AND ($6::text IS NULL OR $6 = ANY(kinds))
 ORDER BY received_at DESC, id DESC
 LIMIT $2
"""
_GET = f"SELECT {_COLUMNS}, payload FROM events WHERE namespace = $1 AND id = $2"
_FORGET = """
DELETE FROM events WHERE id IN (
    SELECT id FROM events WHERE received_at < now() - make_interval(secs => $1::float8) LIMIT $2)
"""
# What every Trigger of a namespace did with the events still kept, in one
# statement for all of them: (trigger, outcome) counts, the newest judgement,
# and each Trigger's newest started run. Each Trigger reads the events of the
# name it listens to now (by `events_by_name`), and its own outcome in each.
# Outcomes name the Trigger, not its uid: a Trigger deleted and created again
# under its name counts its predecessor's events too (docs/triggers.md).
_ACTIVITY = """
WITH judged AS MATERIALIZED (
    SELECT t.name AS trigger, o->>'outcome' AS outcome, o->>'runId' AS run_id, e.received_at, e.id
      FROM triggers t
      JOIN events e ON e.namespace = t.namespace AND e.name = t.event
     CROSS JOIN LATERAL jsonb_array_elements(e.outcomes) AS o
     WHERE t.namespace = $1 AND o->>'trigger' = t.name
), newest_run AS (
    SELECT DISTINCT ON (trigger) trigger, run_id FROM judged
     WHERE outcome = 'started' ORDER BY trigger, received_at DESC, id DESC
)
SELECT j.trigger, j.outcome, count(*)::int AS events, max(j.received_at) AS last_at, n.run_id
  FROM judged j LEFT JOIN newest_run n USING (trigger)
 GROUP BY j.trigger, j.outcome, n.run_id
"""


@dataclass(frozen=True)
class EventRecord:
    id: str
    name: str
    event_id: str
    source: str
    outcomes: list[dict[str, Any]]
    received_at: datetime.datetime
    payload: Any = None  # read by `get` only: pages leave bodies out


async def record(
    conn: asyncpg.Connection,
    namespace: str,
    name: str,
    event_id: str,
    source: str,
    payload: Any,
    outcomes: list[dict[str, Any]],
) -> EventRecord:
    """Keep one published event with its outcomes (in the publish's transaction)."""
    kinds = sorted({str(o["outcome"]) for o in outcomes}) or ["unmatched"]
    event = uuid.uuid4()
    received = await conn.fetchval(_RECORD, event, namespace, name, event_id, source, payload, outcomes, kinds)
    return EventRecord(str(event), name, event_id, source, outcomes, received, payload)


async def page(
    conn: asyncpg.Connection,
    namespace: str,
    limit: int,
    after: tuple[datetime.datetime, uuid.UUID] | None = None,
    name: str | None = None,
    outcome: str | None = None,
) -> list[EventRecord]:
    """Up to `limit` events, newest first, older than `after` (the last of the previous page)."""
    at, last = after if after is not None else (None, None)
    rows = await conn.fetch(_PAGE, namespace, limit, at, last, name, outcome)
    return [_record(row) for row in rows]


async def get(conn: asyncpg.Connection, namespace: str, event: uuid.UUID) -> EventRecord | None:
    row = await conn.fetchrow(_GET, namespace, event)
    return None if row is None else _record(row, row["payload"])


async def forget(conn: asyncpg.Connection, retention_seconds: float, batch: int) -> int:
    """Delete up to `batch` events received more than `retention_seconds` ago; how many."""
    status = await conn.execute(_FORGET, retention_seconds, batch)
    return int(status.split()[-1])


@dataclass(frozen=True)
class TriggerActivity:
    """What one Trigger did with the events still kept."""

    counts: dict[str, int] = field(default_factory=dict)  # by outcome
    last_event_at: datetime.datetime | None = None
    last_run_id: str | None = None


async def activity(conn: asyncpg.Connection, namespace: str) -> dict[str, TriggerActivity]:
    """Every Trigger's activity in `namespace`, by name, in one statement."""
    rows = await conn.fetch(_ACTIVITY, namespace)
    return fold_activity((r["trigger"], r["outcome"], r["events"], r["last_at"], r["run_id"]) for r in rows)


def fold_activity(
    rows: Iterable[tuple[str, str, int, datetime.datetime, str | None]],
) -> dict[str, TriggerActivity]:
    """(trigger, outcome, count, newest event, newest started run) rows, one
    per outcome a Trigger had, into one TriggerActivity per Trigger."""
    counts: dict[str, dict[str, int]] = {}
    last_at: dict[str, datetime.datetime] = {}
    last_run: dict[str, str | None] = {}
    for trigger, outcome, count, at, run_id in rows:
        counts.setdefault(trigger, {})[outcome] = counts.get(trigger, {}).get(outcome, 0) + count
        last_at[trigger] = max(at, last_at.get(trigger, at))
        last_run[trigger] = last_run.get(trigger) or run_id
    return {name: TriggerActivity(counts[name], last_at[name], last_run[name]) for name in counts}


def _record(row: asyncpg.Record, payload: Any = None) -> EventRecord:
    return EventRecord(
        str(row["id"]), row["name"], row["event_id"], row["source"], list(row["outcomes"]), row["received_at"], payload
    )
