"""Published events: each kept with what every Trigger of its name did with
it, listed newest first in keyset pages, and forgotten after the operator's
event retention."""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
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


def _record(row: asyncpg.Record, payload: Any = None) -> EventRecord:
    return EventRecord(
        str(row["id"]), row["name"], row["event_id"], row["source"], list(row["outcomes"]), row["received_at"], payload
    )
