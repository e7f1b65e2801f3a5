"""The sweeper: fires due timers from the indexed `next_deadline` column.

Each due task is locked, the pure `expiry` says which deadline was missed and
what that means, and the transition is applied in the same transaction as the
decide event it causes. Run-level timers (the workflow timeout) wake the
decider, and so does a chain's deadline; a passed soft SLA is only flagged. Rows are claimed with
SKIP LOCKED, so several replicas sweep without firing a timer twice. A
quarantined run's own timeout is not fired: the decider passes it over, so the
timer would fire again on every pass; releasing the run lets it fire."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import asyncpg

from sluiceway.controls.policy import Timeouts
from sluiceway.controls.timeouts import Deadlines, Expiry, expiry
from sluiceway.model.taskdefinition import TimeoutPolicy
from sluiceway.store import admission, executions, wakeups
from sluiceway.store.database import Pool
from sluiceway.store.sql import claim

_DUE_TASKS = claim(
    """id, execution_id, name, epoch, status, schedule_to_start_at, start_to_close_at, total_at, heartbeat_at,
       lease_expires_at, schedule_to_close_at, wait_until, schedule_to_start_timeout, start_to_close_timeout,
       timeout_seconds, heartbeat_timeout, response_timeout, timeout_policy""",
    "tasks",
    "status IN ('SCHEDULED', 'IN_PROGRESS') AND next_deadline IS NOT NULL AND next_deadline <= now()",
    order_by="next_deadline",
    limit="$1",
)
_EXPIRE = f"""
WITH expired AS (
    UPDATE tasks SET status = $2, reason = $3, ended_at = now(),
           schedule_to_start_at = NULL, start_to_close_at = NULL, total_at = NULL, heartbeat_at = NULL,
           lease_expires_at = NULL, schedule_to_close_at = NULL, wait_until = NULL
     WHERE id = $1
    RETURNING namespace, name, holds
), freed AS ({wakeups.released("expired")}
)
SELECT count(*) FROM freed
"""
_REARM = """
UPDATE tasks SET schedule_to_start_at = $2, start_to_close_at = $3, total_at = $4, heartbeat_at = $5,
       lease_expires_at = $6, schedule_to_close_at = $7, wait_until = $8
 WHERE id = $1
"""
# A paused run's clocks are stopped: its deadlines wait for the resume, which
# moves the run's own deadline (and the SLA) but never the chain's.
_DUE_RUNS = claim(
    "e.id",
    "executions e",
    """e.status = 'RUNNING' AND e.quarantined_at IS NULL AND e.paused_at IS NULL
   AND ((e.timeout_at IS NOT NULL AND e.timeout_at <= now())
        OR (e.chain_deadline_at IS NOT NULL AND e.chain_deadline_at <= now()))
   AND NOT EXISTS (SELECT 1 FROM decide_queue q WHERE q.execution_id = e.id)""",
    limit="$1",
)
_SLA_DUE = claim(
    "id",
    "executions",
    """status = 'RUNNING' AND sla_at IS NOT NULL AND sla_breached_at IS NULL AND sla_at <= now()
   AND paused_at IS NULL""",
    limit="$1",
)
_SLA = f"""
UPDATE executions SET sla_breached_at = now(), mirror_seq = mirror_seq + 1
 WHERE id IN ({_SLA_DUE})
RETURNING id, namespace, workflow_name
"""
_PRUNE_COUNTS = "DELETE FROM execution_counts WHERE bucket < now() - interval '15 minutes'"
_PRUNE_WINDOWS = "DELETE FROM rate_windows WHERE window_start < now() - interval '2 days'"
_PRUNE_ORPHAN_EVENTS = """
DELETE FROM decide_queue q WHERE q.due_at < now() - interval '1 minute'
   AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.id = q.execution_id)
"""


@dataclass(frozen=True)
class Fired:
    """One task a timer ended, for the log: which run, which task, which lease."""

    execution_id: str
    task_id: str
    epoch: int
    reason: str


@dataclass
class SweepReport:
    expired: list[Expiry] = field(default_factory=list)
    fired_tasks: list[Fired] = field(default_factory=list)
    alerts: list[tuple[str, Expiry]] = field(default_factory=list)  # (task type, expiry) under ALERT_ONLY
    runs_timed_out: int = 0
    sla_breaches: list[tuple[str, str, str]] = field(default_factory=list)  # (run id, namespace, workflow)

    def fired(self) -> int:
        return len(self.expired) + len(self.alerts) + self.runs_timed_out + len(self.sla_breaches)


def _deadlines(row: asyncpg.Record) -> Deadlines:
    return Deadlines(
        schedule_to_start=row["schedule_to_start_at"],
        start_to_close=row["start_to_close_at"],
        total=row["total_at"],
        heartbeat=row["heartbeat_at"],
        lease=row["lease_expires_at"],
        schedule_to_close=row["schedule_to_close_at"],
        wait_until=row["wait_until"],
    )


def _timeouts(row: asyncpg.Record) -> Timeouts:
    return Timeouts(
        schedule_to_start=row["schedule_to_start_timeout"],
        start_to_close=row["start_to_close_timeout"],
        timeout_seconds=row["timeout_seconds"],
        heartbeat=row["heartbeat_timeout"],
        response_timeout=row["response_timeout"],
        policy=TimeoutPolicy(row["timeout_policy"]),
    )


async def sweep(pool: Pool, batch: int = 500, on_report: Callable[[SweepReport], None] | None = None) -> SweepReport:
    report = SweepReport()
    async with pool.acquire() as conn, conn.transaction():
        now: datetime.datetime = await conn.fetchval("SELECT now()")
        woken: set[uuid.UUID] = set()
        for row in await conn.fetch(_DUE_TASKS, batch):
            result = expiry(_deadlines(row), _timeouts(row), now, row["name"])
            if result is None:  # not due after all (clock granularity); leave it
                continue
            if result.status is None:
                d = result.deadlines
                await conn.execute(
                    _REARM,
                    row["id"],
                    d.schedule_to_start,
                    d.start_to_close,
                    d.total,
                    d.heartbeat,
                    d.lease,
                    d.schedule_to_close,
                    d.wait_until,
                )
                report.alerts.append((row["name"], result))
                continue
            await conn.execute(_EXPIRE, row["id"], result.status.value, result.reason)
            report.expired.append(result)
            report.fired_tasks.append(Fired(str(row["execution_id"]), str(row["id"]), row["epoch"], result.reason))
            woken.add(row["execution_id"])
        runs = [r["id"] for r in await conn.fetch(_DUE_RUNS, batch)]
        report.runs_timed_out = len(runs)
        await executions.enqueue_decides(conn, sorted(woken), "task_updated")
        await executions.enqueue_decides(conn, runs, "timer")
        report.sla_breaches = [
            (str(r["id"]), r["namespace"], r["workflow_name"]) for r in await conn.fetch(_SLA, batch)
        ]
    if on_report is not None:
        on_report(report)
    return report


async def seconds_until_due(pool: Pool) -> float | None:
    """Seconds until the earliest armed timer (database clock), so the sweeper
    can sleep until exactly then; None when nothing is armed."""
    async with pool.acquire() as conn:
        value = await conn.fetchval(
            "SELECT extract(epoch FROM least("
            " (SELECT min(next_deadline) FROM tasks WHERE status IN ('SCHEDULED', 'IN_PROGRESS')"
            "   AND next_deadline IS NOT NULL),"
            " (SELECT min(timeout_at) FROM executions WHERE status = 'RUNNING' AND timeout_at IS NOT NULL"
            "   AND quarantined_at IS NULL AND paused_at IS NULL),"
            " (SELECT min(chain_deadline_at) FROM executions WHERE status = 'RUNNING'"
            "   AND chain_deadline_at IS NOT NULL AND quarantined_at IS NULL AND paused_at IS NULL),"
            " (SELECT min(sla_at) FROM executions WHERE status = 'RUNNING' AND sla_at IS NOT NULL"
            "   AND sla_breached_at IS NULL AND paused_at IS NULL)) - clock_timestamp())"
        )
        return None if value is None else float(value)


async def housekeeping(pool: Pool) -> None:
    async with pool.acquire() as conn:
        await conn.execute(_PRUNE_COUNTS)
        await conn.execute(_PRUNE_WINDOWS)
        await conn.execute(_PRUNE_ORPHAN_EVENTS)


async def admit_waiting_runs(pool: Pool) -> int:
    """Admit runs waiting on a per-key limit wherever there is room now."""
    async with pool.acquire() as conn, conn.transaction():
        admitted = await admission.rebalance(conn)
        await executions.enqueue_decides(conn, admitted, "admitted")
    return len(admitted)


# The tables whose rows change status with the work. A burst (a million runs
# started in a minute) makes "few runs are RUNNING" false long before
# autovacuum's next ANALYZE (up to autovacuum_naptime, a minute by default);
# until then the planner picks the partial status indexes for the statements
# that update runs and tasks by id, and each scans every running run or every
# dead lease entry (bench/backlog.py: 380 ms a result batch instead of 12 ms).
_HOT_TABLES = ["tasks", "executions", "decide_queue"]
# Once analyzed, a table is left to autovacuum for `min_interval` seconds
# unless it grew past what the planner was told (`reltuples`): a drain that
# only changes statuses re-analyzed `tasks` and `executions` every few seconds
# at 300,000 tasks (bench/backlog.py: 38 ANALYZEs, 40 s of PostgreSQL's time in
# 150 s), while the plans go wrong only after a burst of new rows.
_STALE_STATISTICS = """
SELECT s.relname FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
 WHERE s.schemaname = current_schema() AND s.relname = ANY($1::text[])
   AND s.n_mod_since_analyze >= $2 AND s.n_mod_since_analyze >= $3 * s.n_live_tup
   AND (greatest(s.last_analyze, s.last_autoanalyze) IS NULL
        OR greatest(s.last_analyze, s.last_autoanalyze) < now() - make_interval(secs => $4)
        OR s.n_live_tup >= (1 + $3) * greatest(c.reltuples, 0) + $2)
"""


async def refresh_statistics(
    pool: Pool, min_changes: int = 10_000, share: float = 0.2, min_interval: float = 60.0
) -> list[str]:
    """ANALYZE the hot tables changed by at least `min_changes` rows and `share`
    of their rows since their statistics were taken, and either analyzed more
    than `min_interval` seconds ago or grown by `share` (and `min_changes`
    rows) past the planner's row count; the tables analyzed."""
    async with pool.acquire() as conn:
        found = await conn.fetch(_STALE_STATISTICS, _HOT_TABLES, min_changes, share, min_interval)
        stale = [r["relname"] for r in found]
        for table in stale:
            await conn.execute(f"ANALYZE {table}")  # a name from _HOT_TABLES, never from input
    return stale
