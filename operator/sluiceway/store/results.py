"""Worker results: the transitions a worker may cause, each fenced by the
lease epoch and applied exactly once.

COMPLETED, FAILED and FAILED_WITH_TERMINAL_ERROR end the attempt and wake the
decider, which owns what happens next (retry, next task, run end). IN_PROGRESS
with `callbackAfterSeconds` snoozes: the task goes back to the queue for later
without spending an attempt (its snoozeCount goes up). IN_PROGRESS without it
is progress: the output is kept and the lease renewed. INTERRUPTED is a
graceful shutdown's hand-back: the attempt is spent, the task is queued again
at once as the next attempt number, and its interruptCount goes up. A
snooze or a hand-back that would land past the task's deadline fails it with
DeadlineExceeded instead."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from enum import Enum

import asyncpg

from sluiceway.model.execution import ResultStatus, TaskResult
from sluiceway.model.workflow import TaskType
from sluiceway.store import executions, operations, wakeups
from sluiceway.store.sql import STILL_LEASED, types_where

_CLEAR_TIMERS = """
       schedule_to_start_at = NULL, start_to_close_at = NULL, total_at = NULL, heartbeat_at = NULL,
       lease_expires_at = NULL, schedule_to_close_at = NULL, wait_until = NULL"""

# One statement, one round trip: end the attempts, queue their runs for the
# decider and wake it. A caller that decides the runs inline ($11 false)
# queues and wakes the decider only for the runs with other tasks still in
# flight (`busy`: a fork's other branches), which it leaves to the loop; the
# others it decides itself, and queues those it leaves (store.deciding).
_FINISH_ATTEMPTS = f"""
WITH done AS (
    UPDATE tasks t
       SET status = r.status, output = r.output, reason = r.reason, retry_after_seconds = r.retry_after,
           retry_after_source = r.source, retry_kind = r.kind, ended_at = now(), {_CLEAR_TIMERS}
      FROM unnest($2::uuid[], $3::int[], $4::text[], $5::jsonb[], $6::text[], $7::float8[], $8::text[], $9::text[])
           AS r(id, epoch, status, output, reason, retry_after, source, kind)
     WHERE t.id = r.id AND t.epoch = r.epoch AND t.status = {STILL_LEASED} AND t.namespace = $1
       AND (t.executor <> 'engine' OR t.type IN {types_where(TaskType.waits_for_signal)})
    RETURNING t.id, t.execution_id, t.namespace, t.name, t.holds
), busy AS (
    SELECT DISTINCT d.execution_id FROM done d
     WHERE NOT $11::boolean AND EXISTS (
           SELECT 1 FROM tasks o
            WHERE o.execution_id = d.execution_id AND o.status IN ('SCHEDULED', 'IN_PROGRESS')
              AND o.id NOT IN (SELECT id FROM done))
), queued AS (
    INSERT INTO decide_queue (execution_id, event)
    SELECT DISTINCT execution_id, 'task_updated' FROM done
     WHERE $11::boolean OR execution_id IN (SELECT execution_id FROM busy)
), woken AS (
    SELECT {wakeups.NOTIFY_DECIDER_SQL} WHERE $11::boolean OR EXISTS (SELECT 1 FROM busy)
), freed AS ({wakeups.released("done", "$10::text[]", "$12::text[]")}
)
SELECT done.id, done.execution_id, done.execution_id IN (SELECT execution_id FROM busy) AS busy,
       (SELECT count(*) FROM woken) + (SELECT count(*) FROM freed) AS woken
  FROM done
"""
_PROGRESS = f"""
UPDATE tasks t
   SET output = t.output || r.output, last_heartbeat_at = now(),
       heartbeat_at = CASE WHEN t.heartbeat_timeout > 0 THEN now() + make_interval(secs => t.heartbeat_timeout) END,
       lease_expires_at = now() + make_interval(secs => t.response_timeout)
  FROM unnest($2::uuid[], $3::int[], $4::jsonb[]) AS r(id, epoch, output)
 WHERE t.id = r.id AND t.epoch = r.epoch AND t.status = {STILL_LEASED} AND t.namespace = $1 AND t.executor = 'worker'
RETURNING t.id
"""
_LOCK_FOR_SNOOZE = f"""
SELECT close_deadline, now() + make_interval(secs => $4) AS due FROM tasks
 WHERE id = $2 AND epoch = $3 AND status = 'IN_PROGRESS' AND namespace = $1
   AND (executor = 'worker' OR type IN {types_where(TaskType.polls)})
   FOR UPDATE
"""
# A snooze keeps the attempt (refunded: the next lease is the same attempt
# number) and counts itself; a hand-back ($4) spends it: the next lease is
# the next attempt number.
_SNOOZE = f"""
WITH snoozed AS (
    UPDATE tasks
       SET status = 'SCHEDULED', available_at = $2::timestamptz, worker_id = NULL, output = output || $3,
           start_to_close_at = NULL, heartbeat_at = NULL, lease_expires_at = NULL, wait_until = NULL,
           schedule_to_start_at = CASE WHEN schedule_to_start_timeout > 0
                                       THEN $2::timestamptz + make_interval(secs => schedule_to_start_timeout) END,
           schedule_to_close_at = close_deadline,
           snooze_count = snooze_count + CASE WHEN $4 THEN 0 ELSE 1 END,
           interrupt_count = interrupt_count + CASE WHEN $4 THEN 1 ELSE 0 END,
           attempt = attempt + CASE WHEN $4 THEN 1 ELSE 0 END
     WHERE id = $1
    RETURNING namespace, name, holds
), freed AS ({wakeups.released("snoozed")}
)
SELECT name, (SELECT count(*) FROM freed) FROM snoozed
"""
_DEADLINE_EXCEEDED = f"""
WITH ended AS (
    UPDATE tasks SET status = 'FAILED_WITH_TERMINAL_ERROR', ended_at = now(),
           reason = 'DeadlineExceeded: handing it back would land past scheduleToCloseTimeout', {_CLEAR_TIMERS}
     WHERE id = $1
    RETURNING execution_id, namespace, name, holds
), freed AS ({wakeups.released("ended")}
)
SELECT execution_id, (SELECT count(*) FROM freed) FROM ended
"""
_NOTIFY_READY = f"SELECT {wakeups.notify_ready_sql('$1')}"


class Verdict(Enum):
    """What became of one reported result."""

    APPLIED = "applied"
    NO_SUCH_TASK = "no such task"  # not a task id, or no such task in this namespace
    NOT_LEASED = "not leased"  # a stale epoch, or the task is no longer leased: it changed nothing


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    error: str | None = None  # why it was refused, for the worker

    @property
    def applied(self) -> bool:
        return self.verdict is Verdict.APPLIED


_APPLIED = Outcome(Verdict.APPLIED)


@dataclass
class Queued:
    """The runs a result batch queued for the decider, for a caller that decides them inline."""

    alone: set[uuid.UUID] = field(default_factory=set)  # queued, for the caller to decide inline (or tell the decider)
    quiet: set[uuid.UUID] = field(default_factory=set)  # not queued: the caller decides them, or queues them
    busy: set[uuid.UUID] = field(default_factory=set)  # with other tasks in flight: queued, the decider was told


async def apply_results(
    conn: asyncpg.Connection,
    namespace: str,
    results: list[TaskResult],
    refilled: Collection[str] = (),
    *,
    queued: Queued | None = None,
    handing: Collection[str] = (),
) -> dict[str, Outcome]:
    """Apply a batch of results; one outcome per task id. Each transition is
    atomic on its own, so no transaction spans the batch. `refilled`: task
    types whose freed slots the caller leases again itself (nobody is woken for them);
    `handing`: those whose semaphore permits it hands over too (leasing.hand_over wakes for the rest).
    `queued`: the caller decides inline the runs these results queue for the
    decider: they are added to it, queued and the decider woken only for
    the `busy` ones; the caller decides the others (`quiet` are not queued:
    it queues those it leaves, and tells the decider, executions.notify_decider)."""
    outcomes: dict[str, Outcome] = {}
    for result in results:
        if not _is_uuid(result.task_id):
            outcomes[result.task_id] = Outcome(Verdict.NO_SUCH_TASK, "not a task id")
    results = [r for r in results if r.task_id not in outcomes]
    finishing = [r for r in results if r.status not in (ResultStatus.IN_PROGRESS, ResultStatus.INTERRUPTED)]
    snoozing = [
        r
        for r in results
        if r.status is ResultStatus.INTERRUPTED
        or (r.status is ResultStatus.IN_PROGRESS and r.callback_after_seconds is not None)
    ]
    progress = [r for r in results if r.status is ResultStatus.IN_PROGRESS and r.callback_after_seconds is None]
    woken: set[uuid.UUID] = set()
    if finishing:
        rows = await conn.fetch(
            _FINISH_ATTEMPTS,
            namespace,
            [uuid.UUID(r.task_id) for r in finishing],
            [r.epoch for r in finishing],
            [r.status.value for r in finishing],
            [r.output for r in finishing],
            [r.reason for r in finishing],
            [r.retry_after_seconds if r.status is ResultStatus.FAILED else None for r in finishing],
            [r.retry_after_source.value if r.retry_after_seconds is not None else None for r in finishing],
            [r.retry_kind.value if r.retry_kind and r.status is ResultStatus.FAILED else None for r in finishing],
            list(refilled),
            queued is None,
            list(handing),
        )
        outcomes.update({str(row["id"]): _APPLIED for row in rows})
        if queued is not None:
            for row in rows:
                (queued.busy if row["busy"] else queued.quiet).add(row["execution_id"])
    if progress:
        rows = await conn.fetch(
            _PROGRESS,
            namespace,
            [uuid.UUID(r.task_id) for r in progress],
            [r.epoch for r in progress],
            [r.output for r in progress],
        )
        outcomes.update({str(row["id"]): _APPLIED for row in rows})
    for result in snoozing:
        async with conn.transaction():
            execution = await _snooze(conn, namespace, result)
        if execution is not False:
            outcomes[result.task_id] = _APPLIED
            if isinstance(execution, uuid.UUID):
                woken.add(execution)
    await executions.enqueue_decides(conn, sorted(woken), "task_updated", notify=queued is None)
    if queued is not None:
        queued.alone.update(woken)
    refused = [r.task_id for r in results if r.task_id not in outcomes]
    if refused:
        outcomes.update(await explain(conn, namespace, refused, {r.task_id: r.epoch for r in results}))
    return outcomes


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


# The run's row first, then the task's: the order a pause takes them in, so a
# task handed back while its run is being paused is parked by one or the other.
_LOCK_RUN_OF_TASK = """
SELECT e.id, e.paused_at FROM tasks t JOIN executions e ON e.id = t.execution_id
 WHERE t.id = $1 AND t.namespace = $2
   FOR SHARE OF e
"""


async def _snooze(conn: asyncpg.Connection, namespace: str, result: TaskResult) -> uuid.UUID | bool:
    """True when snoozed (or handed back); the run's id when that hit the
    deadline instead; False when refused. A task handed back while its run is
    paused waits with the run's other held tasks."""
    task_id = uuid.UUID(result.task_id)
    interrupted = result.status is ResultStatus.INTERRUPTED
    delay = 0.0 if interrupted else float(result.callback_after_seconds or 0)
    run = await conn.fetchrow(_LOCK_RUN_OF_TASK, task_id, namespace)
    if run is None:
        return False
    row = await conn.fetchrow(_LOCK_FOR_SNOOZE, namespace, task_id, result.epoch, delay)
    if row is None:
        return False
    if row["close_deadline"] is not None and row["due"] > row["close_deadline"]:
        execution: uuid.UUID = await conn.fetchval(_DEADLINE_EXCEEDED, task_id)
        return execution
    name = await conn.fetchval(_SNOOZE, task_id, row["due"], result.output, interrupted)
    if run["paused_at"] is not None:
        await operations.park(conn, run["id"], task_id)
        return True
    await conn.execute(_NOTIFY_READY, wakeups.ready_payload((namespace, name)))
    return True


async def explain(
    conn: asyncpg.Connection, namespace: str, task_ids: list[str], epochs: dict[str, int]
) -> dict[str, Outcome]:
    """Why each of these updates changed nothing."""
    valid = {}
    outcomes: dict[str, Outcome] = {}
    for task_id in task_ids:
        try:
            valid[task_id] = uuid.UUID(task_id)
        except ValueError:
            outcomes[task_id] = Outcome(Verdict.NO_SUCH_TASK, "not a task id")
    rows = {
        str(r["id"]): r
        for r in await conn.fetch(
            "SELECT id, status, epoch, namespace FROM tasks WHERE id = ANY($1)", list(valid.values())
        )
    }
    for task_id in valid:
        row = rows.get(task_id)
        if row is None or row["namespace"] != namespace:
            outcomes[task_id] = Outcome(Verdict.NO_SUCH_TASK, "no such task in this namespace")
        elif row["epoch"] != epochs.get(task_id):
            stale = f"stale epoch {epochs.get(task_id)}: the task was leased again (epoch {row['epoch']})"
            outcomes[task_id] = Outcome(Verdict.NOT_LEASED, stale)
        else:
            outcomes[task_id] = Outcome(Verdict.NOT_LEASED, f"the task is {row['status']}, no longer leased")
    return outcomes
