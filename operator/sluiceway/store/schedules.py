"""Schedules: their rows (reconciled from Schedule objects), the scheduler's
pass, triggers and backfills.

Exactly once per fire: a fire is a row of `schedule_fires` keyed by
(namespace, schedule, fire time), inserted in the same transaction as the run
it starts, and that run's id is derived from the schedule's uid and the fire
time. Two replicas, a retry after a crash or a backfill over a fired range
meet the key and start nothing more; a crash before the commit leaves no row,
and the next pass fires it.

Every replica runs the scheduler: due schedules are locked with
`FOR UPDATE SKIP LOCKED`, so each is handled by one replica at a time and
another replica takes over the moment one dies, with no election to wait for.
Times are the database's."""

from __future__ import annotations

import datetime
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import asyncpg
from pydantic import ValidationError

from sluiceway.controls.calendar import Calendar, CalendarError
from sluiceway.controls.payloads import PayloadLimit, oversized_value
from sluiceway.controls.schedules import (
    Action,
    calendar_of,
    due_fires,
    jitter,
    overlap_action,
    run_id,
)
from sluiceway.model.schedule import MAX_BACKFILL_FIRES, OverlapPolicy, ScheduleSpec
from sluiceway.store import executions
from sluiceway.store.sql import claim

log = logging.getLogger(__name__)
WAITED = "waited for the schedule's running runs to end"  # the reason of a buffered fire once it starts

# The payload limit of a namespace, which a fire's input must fit like any start's.
LimitOf = Callable[[str], Awaitable[PayloadLimit]]

# A fire started more than this after it was due counts as a catch-up (an Event says so), and so does
# every fire of a pass that found fires missed or several due.
CATCHUP_LATENESS = datetime.timedelta(seconds=5)
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"


@dataclass(frozen=True)
class ScheduleQuotaExceeded:
    """A new Schedule would pass the namespace's maxSchedules."""

    quota: str
    limit: int
    current: int

    code: ClassVar[str] = "QUOTA_EXCEEDED"
    retry_after_seconds: ClassVar[int] = 0  # a slot frees only when a Schedule is deleted

    @property
    def message(self) -> str:
        return f"quota {self.quota}: maxSchedules {self.limit} reached ({self.current} defined)"

    def details(self) -> dict[str, Any]:
        return {
            "quota": self.quota,
            "field": "maxSchedules",
            "limit": self.limit,
            "current": self.current,
            "retryAfterSeconds": self.retry_after_seconds,
        }


_EXISTING = "SELECT uid, generation, spec FROM schedules WHERE namespace = $1 AND name = $2"
_LIMIT = """
SELECT resource_name, max_schedules FROM quotas
 WHERE namespace = $1 AND max_schedules IS NOT NULL ORDER BY max_schedules, resource_name LIMIT 1
"""
_COUNT = "SELECT count(*) FROM schedules WHERE namespace = $1"
_INSERT = """
INSERT INTO schedules (namespace, name, uid, generation, spec, next_fire_at, due_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
"""
_REPLACE = """
UPDATE schedules SET uid = $3, generation = $4, spec = $5, next_fire_at = $6, due_at = $7, updated_at = now()
 WHERE namespace = $1 AND name = $2
"""
_TOUCH = "UPDATE schedules SET generation = $3 WHERE namespace = $1 AND name = $2 AND generation <> $3"
_DELETE_FIRES = "DELETE FROM schedule_fires WHERE namespace = $1 AND schedule = $2"
_DELETE = "DELETE FROM schedules WHERE namespace = $1 AND name = $2"
_NOW = "SELECT now()"


def _first_fire(spec: ScheduleSpec, uid: str, now: datetime.datetime) -> tuple[datetime.datetime | None, ...]:
    """(next fire, when it is due) from now on; none while suspended."""
    if spec.suspend:
        return None, None
    fire = next(calendar_of(spec).fires_after(now), None)
    return fire, _due(uid, fire, spec.jitter_seconds)


def _due(uid: str, fire: datetime.datetime | None, jitter_seconds: int) -> datetime.datetime | None:
    return None if fire is None else fire + jitter(uid, fire, jitter_seconds)


async def upsert_schedule(
    conn: asyncpg.Connection, namespace: str, name: str, uid: str, generation: int, spec: ScheduleSpec
) -> ScheduleQuotaExceeded | None:
    """Store a Schedule (valid: `calendar_of` reads it). A changed spec, or a
    resume, takes effect from now: fires before it are not caught up. A new
    Schedule past maxSchedules is refused, counted under a lock so two new
    ones cannot both take the last slot."""
    wire = spec.to_wire()
    async with conn.transaction():
        await conn.execute(_LOCK, f"schedules:{namespace}")
        existing = await conn.fetchrow(_EXISTING, namespace, name)
        if existing is not None and existing["uid"] == uid and existing["spec"] == wire:
            await conn.execute(_TOUCH, namespace, name, generation)
            return None
        now: datetime.datetime = await conn.fetchval(_NOW)
        fire, due = _first_fire(spec, uid, now)
        if existing is not None:
            if existing["uid"] != uid:  # the object was deleted and created again under this name
                await conn.execute(_DELETE_FIRES, namespace, name)
            await conn.execute(_REPLACE, namespace, name, uid, generation, wire, fire, due)
            return None
        limit = await conn.fetchrow(_LIMIT, namespace)
        defined = int(await conn.fetchval(_COUNT, namespace))
        if limit is not None and defined >= limit["max_schedules"]:
            return ScheduleQuotaExceeded(limit["resource_name"], int(limit["max_schedules"]), defined)
        await conn.execute(_INSERT, namespace, name, uid, generation, wire, fire, due)
        return None


async def delete_schedule(conn: asyncpg.Connection, namespace: str, name: str) -> None:
    """Stop firing; the runs it started go on, and keep their links to it."""
    async with conn.transaction():
        await conn.execute(_DELETE_FIRES, namespace, name)
        await conn.execute(_DELETE, namespace, name)


async def count_schedules(conn: asyncpg.Connection, namespace: str) -> int:
    return int(await conn.fetchval(_COUNT, namespace))


# -- firing ----------------------------------------------------------------------


@dataclass(frozen=True)
class Fire:
    """One fire handled: what it did, for the caller, the metrics and Events."""

    namespace: str
    schedule: str
    uid: str
    fire_at: datetime.datetime
    kind: str  # scheduled, catchup, trigger, backfill
    outcome: str  # started, buffered, skipped, refused, duplicate (fired before: nothing done)
    run_id: str | None = None
    reason: str | None = None
    lag_seconds: float | None = None  # started this long after it was due
    stopped: tuple[str, ...] = ()  # the schedule's runs this fire asked to end (its overlap policy)


@dataclass(frozen=True)
class Missed:
    namespace: str
    schedule: str
    uid: str
    count: int
    since: datetime.datetime
    until: datetime.datetime


@dataclass
class PassReport:
    fires: list[Fire] = field(default_factory=list)
    missed: list[Missed] = field(default_factory=list)


_LOCK_DUE = claim(
    "namespace, name, uid, spec, next_fire_at, due_at, buffered, runs_started",
    "schedules",
    """(due_at IS NOT NULL AND due_at <= now())
    OR (buffered > 0 AND NOT coalesce((spec->>'suspend')::boolean, false))""",
    order_by="due_at NULLS LAST",
    limit="$1",
)
_LOCK_ONE = """
SELECT namespace, name, uid, spec, next_fire_at, due_at, buffered, runs_started FROM schedules
 WHERE namespace = $1 AND name = $2
   FOR UPDATE
"""
_ACTIVE = """
SELECT id FROM executions WHERE namespace = $1 AND schedule_name = $2 AND status = 'RUNNING' ORDER BY created_at
"""
_RECORD = """
INSERT INTO schedule_fires (namespace, schedule, fire_at, kind, outcome, run_id, reason)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (namespace, schedule, fire_at) DO NOTHING
RETURNING fire_at
"""
_SETTLE = "UPDATE schedule_fires SET outcome = $4, reason = $5 WHERE namespace = $1 AND schedule = $2 AND fire_at = $3"
_OLDEST_BUFFERED = """
SELECT fire_at, kind, run_id FROM schedule_fires
 WHERE namespace = $1 AND schedule = $2 AND outcome = 'buffered' ORDER BY fire_at LIMIT 1
"""
_ADVANCE = """
UPDATE schedules
   SET next_fire_at = $3, due_at = $4, buffered = $5, runs_started = $6, missed = missed + $7,
       skipped = skipped + $8, last_fire_at = coalesce($9, last_fire_at), last_run_id = coalesce($10, last_run_id)
 WHERE namespace = $1 AND name = $2
"""
# Triggers, backfills and drains leave the next scheduled fire where it is.
_SAVE = """
UPDATE schedules
   SET buffered = $3, runs_started = $4, missed = missed + $5, skipped = skipped + $6,
       last_fire_at = coalesce($7, last_fire_at), last_run_id = coalesce($8, last_run_id)
 WHERE namespace = $1 AND name = $2
"""


class _Firing:
    """One schedule, locked for the rest of the transaction: its runs still
    running, its waiting fires, and what this transaction has done to it."""

    def __init__(
        self, row: asyncpg.Record, spec: ScheduleSpec, active: list[uuid.UUID], limit_of: LimitOf | None
    ) -> None:
        self.limit_of = limit_of
        self.namespace: str = row["namespace"]
        self.name: str = row["name"]
        self.uid: str = row["uid"]
        self.spec = spec
        self.active = active
        self.buffered: int = row["buffered"]
        self.runs_started: int = row["runs_started"]
        self.skipped = 0
        self.last_fire: datetime.datetime | None = None
        self.last_run: uuid.UUID | None = None

    async def fire(
        self,
        conn: asyncpg.Connection,
        fire_at: datetime.datetime,
        kind: str,
        policy: OverlapPolicy,
        now: datetime.datetime,
    ) -> Fire:
        """Handle one fire under the overlap policy, once: a fire already
        recorded (by another replica, an earlier pass, a backfill) does nothing."""
        action = overlap_action(policy, len(self.active), self.buffered)
        rid = uuid.UUID(run_id(self.uid, fire_at))
        if action is Action.SKIP:
            recorded = await conn.fetchval(
                _RECORD, self.namespace, self.name, fire_at, kind, "skipped", None, f"overlapPolicy {policy.value}"
            )
            if recorded is None:
                return self._handled(fire_at, kind, "duplicate")
            self.skipped += 1
            return self._handled(fire_at, kind, "skipped", reason=f"an earlier run still runs ({policy.value})")
        if action in (Action.BUFFER, Action.CANCEL_OTHERS_AND_BUFFER):
            recorded = await conn.fetchval(_RECORD, self.namespace, self.name, fire_at, kind, "buffered", rid, None)
            if recorded is None:
                return self._handled(fire_at, kind, "duplicate")
            self.buffered += 1
            stopped = await self._stop_active(conn, policy) if action is Action.CANCEL_OTHERS_AND_BUFFER else ()
            return replace(self._handled(fire_at, kind, "buffered", str(rid)), stopped=stopped)
        recorded = await conn.fetchval(_RECORD, self.namespace, self.name, fire_at, kind, "started", rid, None)
        if recorded is None:
            return self._handled(fire_at, kind, "duplicate")
        stopped = await self._stop_active(conn, policy) if action is Action.TERMINATE_OTHERS_AND_START else ()
        return replace(await self._start(conn, fire_at, kind, rid, now), stopped=stopped)

    async def drain(self, conn: asyncpg.Connection, now: datetime.datetime) -> Fire | None:
        """Start the oldest waiting fire once no run of the schedule runs."""
        if self.buffered <= 0 or self.active:
            return None
        oldest = await conn.fetchrow(_OLDEST_BUFFERED, self.namespace, self.name)
        self.buffered -= 1
        if oldest is None:  # the counter was ahead of the rows: nothing waits
            self.buffered = 0
            return None
        await conn.execute(_SETTLE, self.namespace, self.name, oldest["fire_at"], "started", WAITED)
        return await self._start(conn, oldest["fire_at"], oldest["kind"], oldest["run_id"], now)

    async def _start(
        self, conn: asyncpg.Connection, fire_at: datetime.datetime, kind: str, rid: uuid.UUID, now: datetime.datetime
    ) -> Fire:
        spec = self.spec
        limit = await self.limit_of(self.namespace) if self.limit_of is not None else None
        too_large = oversized_value("spec.input", spec.input, limit) if limit is not None else None
        if too_large is not None:
            await conn.execute(_SETTLE, self.namespace, self.name, fire_at, "refused", too_large.message)
            return self._handled(fire_at, kind, "refused", str(rid), too_large.message)
        outcome = await executions.start_run(
            conn,
            self.namespace,
            spec.workflow,
            spec.version,
            spec.input,
            correlation_id=spec.correlation_id,
            run_id=str(rid),
            schedule=self.name,
            search_attributes=spec.search_attributes,
            priority=spec.priority,
        )
        if not isinstance(outcome, executions.Started):
            await conn.execute(_SETTLE, self.namespace, self.name, fire_at, "refused", outcome.message)
            return self._handled(fire_at, kind, "refused", str(rid), outcome.message)
        self.active.append(rid)
        if kind in ("scheduled", "catchup"):
            self.runs_started += 1
        if self.last_fire is None or fire_at >= self.last_fire:
            self.last_fire, self.last_run = fire_at, rid
        due = fire_at + jitter(self.uid, fire_at, spec.jitter_seconds)
        return self._handled(fire_at, kind, "started", str(rid), lag=(now - due).total_seconds())

    async def _stop_active(self, conn: asyncpg.Connection, policy: OverlapPolicy) -> tuple[str, ...]:
        """Ask the schedule's running runs to end; those asked."""
        reason = f"schedule {self.name}: a newer fire replaces it (overlapPolicy {policy.value})"
        stopped = [
            str(running)
            for running in self.active
            if await executions.request_termination(conn, self.namespace, str(running), reason)
        ]
        self.active = []
        return tuple(stopped)

    def _handled(
        self,
        fire_at: datetime.datetime,
        kind: str,
        outcome: str,
        rid: str | None = None,
        reason: str | None = None,
        lag: float | None = None,
    ) -> Fire:
        return Fire(self.namespace, self.name, self.uid, fire_at, kind, outcome, rid, reason, lag)

    async def save(
        self, conn: asyncpg.Connection, next_fire: datetime.datetime | None = None, missed: int = 0, *, advance: bool
    ) -> None:
        """Write what this transaction did; with `advance`, the next fire too."""
        counts = (self.buffered, self.runs_started, missed, self.skipped, self.last_fire, self.last_run)
        if advance:
            due = _due(self.uid, next_fire, self.spec.jitter_seconds)
            await conn.execute(_ADVANCE, self.namespace, self.name, next_fire, due, *counts)
        else:
            await conn.execute(_SAVE, self.namespace, self.name, *counts)


async def _lock_firing(conn: asyncpg.Connection, row: asyncpg.Record, limit_of: LimitOf | None) -> _Firing:
    spec = ScheduleSpec.model_validate(row["spec"])
    active = [r["id"] for r in await conn.fetch(_ACTIVE, row["namespace"], row["name"])]
    return _Firing(row, spec, active, limit_of)


async def fire_due(conn: asyncpg.Connection, batch: int = 50, limit_of: LimitOf | None = None) -> PassReport:
    """One pass of the scheduler, in the caller's transaction: every due
    schedule it can lock fires what is due, and starts what waited for its
    running runs to end. A fire whose input is over its namespace's payload
    limit (`limit_of`) is refused, as any start would be."""
    report = PassReport()
    now: datetime.datetime = await conn.fetchval(_NOW)
    for row in await conn.fetch(_LOCK_DUE, batch):
        try:
            async with conn.transaction():  # a savepoint: one schedule that fails costs only its own pass
                await _handle(conn, row, now, report, limit_of)
        except (ValidationError, CalendarError, ArithmeticError, ValueError) as error:
            # Stored only once valid, so only a bug or a later release's reading gets here: set it aside
            # until its spec changes, rather than fail every pass on it.
            log.error("schedule %s/%s cannot be fired and is set aside: %s", row["namespace"], row["name"], error)
            await conn.execute(_SET_ASIDE, row["namespace"], row["name"])
    return report


_SET_ASIDE = "UPDATE schedules SET due_at = NULL, buffered = 0 WHERE namespace = $1 AND name = $2"


async def _handle(
    conn: asyncpg.Connection, row: asyncpg.Record, now: datetime.datetime, report: PassReport, limit_of: LimitOf | None
) -> None:
    firing = await _lock_firing(conn, row, limit_of)
    calendar = calendar_of(firing.spec)
    drained = None if firing.spec.suspend else await firing.drain(conn, now)  # a pause holds waiting fires too
    if drained is not None:
        report.fires.append(drained)
    if row["due_at"] is None or row["due_at"] > now:
        await firing.save(conn, advance=False)
        return
    await _fire_scheduled(conn, firing, calendar, row["next_fire_at"], now, report)


async def _fire_scheduled(
    conn: asyncpg.Connection,
    firing: _Firing,
    calendar: Calendar,
    next_fire: datetime.datetime | None,
    now: datetime.datetime,
    report: PassReport,
) -> None:
    spec = firing.spec
    due = due_fires(
        calendar,
        next_fire,
        now,
        spec.catchup_window_seconds,
        lambda fire: jitter(firing.uid, fire, spec.jitter_seconds),
        datetime.timedelta(seconds=spec.jitter_seconds),
    )
    if due.missed and due.missed_range is not None:
        report.missed.append(Missed(firing.namespace, firing.name, firing.uid, due.missed, *due.missed_range))
    following = due.next_fire
    behind = due.missed > 0 or len(due.fires) > 1  # the scheduler was away: this pass catches up
    for fire_at in due.fires:
        if spec.max_runs is not None and firing.runs_started >= spec.max_runs:
            following = None  # maxRuns reached: the schedule is over
            break
        late = behind or now - (fire_at + jitter(firing.uid, fire_at, spec.jitter_seconds)) > CATCHUP_LATENESS
        report.fires.append(
            await firing.fire(conn, fire_at, "catchup" if late else "scheduled", spec.overlap_policy, now)
        )
    if spec.max_runs is not None and firing.runs_started >= spec.max_runs:
        following = None
    await firing.save(conn, following, due.missed, advance=True)


class ScheduleNotFound(LookupError):
    pass


async def _locked(
    conn: asyncpg.Connection, namespace: str, name: str, limit_of: LimitOf | None
) -> tuple[_Firing, asyncpg.Record]:
    row = await conn.fetchrow(_LOCK_ONE, namespace, name)
    if row is None:
        raise ScheduleNotFound(f"no schedule {name} in namespace {namespace}")
    return await _lock_firing(conn, row, limit_of), row


async def trigger(
    conn: asyncpg.Connection,
    namespace: str,
    name: str,
    policy: OverlapPolicy | None = None,
    limit_of: LimitOf | None = None,
) -> Fire:
    """Fire now, in the caller's transaction, under the schedule's overlap
    policy unless `policy` overrides it. Does not count against maxRuns."""
    firing, row = await _locked(conn, namespace, name, limit_of)
    now: datetime.datetime = await conn.fetchval(_NOW)
    fire = await firing.fire(conn, now, "trigger", policy or firing.spec.overlap_policy, now)
    await firing.save(conn, advance=False)
    return fire


class BackfillError(ValueError):
    """A backfill range that cannot be filled; the message names the field."""


async def backfill(
    conn: asyncpg.Connection,
    namespace: str,
    name: str,
    start: datetime.datetime,
    end: datetime.datetime,
    policy: OverlapPolicy | None = None,
    limit_of: LimitOf | None = None,
) -> list[Fire]:
    """Fire the schedule's times in [start, end] (at most MAX_BACKFILL_FIRES,
    none in the future), each once: a time fired before is left alone."""
    if end < start:
        raise BackfillError("endTime: must not be before startTime")
    firing, row = await _locked(conn, namespace, name, limit_of)
    now: datetime.datetime = await conn.fetchval(_NOW)
    if end > now:
        raise BackfillError("endTime: a backfill fills the past; it must not be after now")
    found = calendar_of(firing.spec).between(start, end, MAX_BACKFILL_FIRES + 1)
    if len(found) > MAX_BACKFILL_FIRES:
        raise BackfillError(f"startTime/endTime: the range holds more than {MAX_BACKFILL_FIRES} fires; split it")
    fires = [await firing.fire(conn, at, "backfill", policy or firing.spec.overlap_policy, now) for at in found]
    await firing.save(conn, advance=False)
    return fires


# -- reading ---------------------------------------------------------------------


@dataclass(frozen=True)
class ScheduleState:
    namespace: str
    name: str
    uid: str
    spec: ScheduleSpec | None  # None: the stored spec no longer parses
    raw_spec: dict[str, Any]
    next_fire_at: datetime.datetime | None
    buffered: int
    runs_started: int
    missed: int
    skipped: int
    last_fire_at: datetime.datetime | None
    last_run_id: str | None
    active_runs: int
    recent: list[Fire]


_STATES = """
SELECT s.namespace, s.name, s.uid, s.spec, s.next_fire_at, s.buffered, s.runs_started, s.missed, s.skipped,
       s.last_fire_at, s.last_run_id,
       (SELECT count(*) FROM executions e
         WHERE e.namespace = s.namespace AND e.schedule_name = s.name AND e.status = 'RUNNING')::int AS active
  FROM schedules s WHERE s.namespace = $1 AND ($2::text IS NULL OR s.name = $2)
 ORDER BY s.name
"""
_RECENT = """
SELECT fire_at, kind, outcome, run_id, reason FROM schedule_fires
 WHERE namespace = $1 AND schedule = $2 ORDER BY fire_at DESC LIMIT $3
"""


async def states(
    conn: asyncpg.Connection, namespace: str, name: str | None = None, recent: int | None = None
) -> list[ScheduleState]:
    """The schedules of a namespace (or one), with their latest fires
    (`recent`, else each one's keepHistory)."""
    found: list[ScheduleState] = []
    for row in await conn.fetch(_STATES, namespace, name):
        try:
            spec: ScheduleSpec | None = ScheduleSpec.model_validate(row["spec"])
        except ValidationError:
            spec = None
        keep = recent if recent is not None else (spec.keep_history if spec else 10)
        fires = [
            Fire(
                namespace,
                row["name"],
                row["uid"],
                r["fire_at"],
                r["kind"],
                r["outcome"],
                None if r["run_id"] is None else str(r["run_id"]),
                r["reason"],
            )
            for r in (await conn.fetch(_RECENT, namespace, row["name"], keep) if keep else [])
        ]
        found.append(
            ScheduleState(
                namespace=namespace,
                name=row["name"],
                uid=row["uid"],
                spec=spec,
                raw_spec=row["spec"],
                next_fire_at=row["next_fire_at"],
                buffered=row["buffered"],
                runs_started=row["runs_started"],
                missed=int(row["missed"]),
                skipped=int(row["skipped"]),
                last_fire_at=row["last_fire_at"],
                last_run_id=None if row["last_run_id"] is None else str(row["last_run_id"]),
                active_runs=row["active"],
                recent=fires,
            )
        )
    return found


def fired_runs(fires: Iterable[Fire]) -> list[str]:
    return [f.run_id for f in fires if f.outcome == "started" and f.run_id]


_NEXT_DUE = """
SELECT extract(epoch FROM least(
    (SELECT min(due_at) FROM schedules WHERE due_at IS NOT NULL),
    (SELECT clock_timestamp() FROM schedules
      WHERE buffered > 0 AND NOT coalesce((spec->>'suspend')::boolean, false) LIMIT 1)) - clock_timestamp())
"""


async def seconds_until_due(conn: asyncpg.Connection) -> float | None:
    """Seconds until the next schedule is due (database clock); None when none is."""
    value = await conn.fetchval(_NEXT_DUE)
    return None if value is None else float(value)
