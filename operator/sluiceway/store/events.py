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

from sluiceway.model.trigger import RECENT_EVENTS

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
# What every Trigger of a namespace did with the newest `$2` events of the
# name it listens to now, in one statement for all of them: how many events
# were read for it, its (outcome) counts, its newest judgement and its newest
# started run. Each event name is read once, newest first by `events_by_name`
# and stopped at `$2` (an index scan under a limit, never a sort of all kept
# events), and shared by the Triggers that listen to it: the read costs at
# most `RECENT_EVENTS` rows per event name, however many events the retention
# keeps (a busy tenant's volume slows no one's status). The name is matched
# as a range of one on purpose: with `=` the planner may walk `events_received`
# backwards and filter (it did, for a namespace of few names), which for a
# rarely sent name passes every newer event of every namespace; a range keeps
# `e.name` in the wanted order, which only `events_by_name` gives. Outcomes
# name the Trigger, not its uid: a Trigger deleted and created again under its
# name counts its predecessor's events too (docs/triggers.md).
_ACTIVITY = """
WITH listening AS (
    SELECT name AS trigger, event FROM triggers WHERE namespace = $1
), recent AS MATERIALIZED (
    SELECT n.event, r.received_at, r.id, r.outcomes
      FROM (SELECT DISTINCT event FROM listening) n
     CROSS JOIN LATERAL (
        SELECT e.received_at, e.id, e.outcomes FROM events e
         WHERE e.namespace = $1 AND e.name >= n.event AND e.name <= n.event
         ORDER BY e.name, e.received_at DESC, e.id DESC
         LIMIT $2
     ) r
), seen AS (
    SELECT event, count(*)::int AS events FROM recent GROUP BY event
), judged AS MATERIALIZED (
    SELECT l.trigger, o->>'outcome' AS outcome, o->>'runId' AS run_id, r.received_at, r.id
      FROM listening l
      JOIN recent r USING (event)
     CROSS JOIN LATERAL jsonb_array_elements(r.outcomes) AS o
     WHERE o->>'trigger' = l.trigger
), sums AS (
    SELECT trigger, outcome, count(*)::int AS events, max(received_at) AS last_at FROM judged GROUP BY trigger, outcome
), newest_run AS (
    SELECT DISTINCT ON (trigger) trigger, run_id FROM judged
     WHERE outcome = 'started' ORDER BY trigger, received_at DESC, id DESC
)
SELECT l.trigger, s.events AS seen, j.outcome, j.events, j.last_at, n.run_id
  FROM listening l
  JOIN seen s USING (event)
  LEFT JOIN sums j USING (trigger)
  LEFT JOIN newest_run n USING (trigger)
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
    """What one Trigger did with the newest events of the name it listens to."""

    events: int = 0  # how many of those were read (at most `RECENT_EVENTS`)
    counts: dict[str, int] = field(default_factory=dict)  # by outcome, among those
    last_event_at: datetime.datetime | None = None
    last_run_id: str | None = None  # the newest run started among those


async def activity(conn: asyncpg.Connection, namespace: str, recent: int = RECENT_EVENTS) -> dict[str, TriggerActivity]:
    """Every Trigger's activity in `namespace`, by name, among the newest
    `recent` events of its event name, in one statement. A Trigger whose
    event name has no kept event is left out."""
    rows = await conn.fetch(_ACTIVITY, namespace, recent)
    return fold_activity((r["trigger"], r["seen"], r["outcome"], r["events"], r["last_at"], r["run_id"]) for r in rows)


def fold_activity(
    rows: Iterable[tuple[str, int, str | None, int | None, datetime.datetime | None, str | None]],
) -> dict[str, TriggerActivity]:
    """(trigger, events read, outcome, count, newest event, newest started
    run) rows, one per outcome a Trigger had among the events read (one with
    no outcome when it had none), into one TriggerActivity per Trigger."""
    seen: dict[str, int] = {}
    counts: dict[str, dict[str, int]] = {}
    last_at: dict[str, datetime.datetime] = {}
    last_run: dict[str, str | None] = {}
    for trigger, events, outcome, count, at, run_id in rows:
        seen[trigger] = events
        counts.setdefault(trigger, {})
        if outcome is not None and count:
            counts[trigger][outcome] = counts[trigger].get(outcome, 0) + count
        if at is not None:
            last_at[trigger] = max(at, last_at.get(trigger, at))
        last_run[trigger] = last_run.get(trigger) or run_id
    return {name: TriggerActivity(seen[name], counts[name], last_at.get(name), last_run[name]) for name in seen}


def _record(row: asyncpg.Record, payload: Any = None) -> EventRecord:
    return EventRecord(
        str(row["id"]), row["name"], row["event_id"], row["source"], list(row["outcomes"]), row["received_at"], payload
    )
