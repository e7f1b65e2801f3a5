"""The numbers behind "why is my task not running?" and the gauges that move
first when something is wrong."""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass, field

import asyncpg

from sluiceway.controls.gates import SemaphoreState
from sluiceway.controls.policy import Gates
from sluiceway.controls.why import AHEAD_COUNTED, RunFacts, TaskFacts
from sluiceway.model.workflow import Executor, TaskType, WorkflowTask, iter_tasks
from sluiceway.store import workflows
from sluiceway.store.policies import Policies

_DECIDE_LAG = """
SELECT coalesce(extract(epoch FROM now() - min(due_at)), 0) FROM decide_queue WHERE due_at <= now()
"""
# Every executor's queues (worker, system, ...), with the workers polling
# each in the last minute: a queue with depth and no pollers is the alert
# "nobody is running this queue".
_QUEUE_DEPTHS = """
WITH depth AS (
    SELECT namespace, name, executor,
           count(*) FILTER (WHERE status = 'SCHEDULED' AND available_at <= now())::int AS ready,
           count(*) FILTER (WHERE status = 'SCHEDULED' AND available_at > now())::int AS delayed,
           count(*) FILTER (WHERE status = 'IN_PROGRESS')::int AS in_flight
      FROM tasks WHERE status IN ('SCHEDULED', 'IN_PROGRESS')
     GROUP BY namespace, name, executor
), polled AS (
    SELECT namespace, name, count(*)::int AS pollers FROM pollers
     WHERE last_poll > now() - interval '60 seconds' GROUP BY namespace, name
)
SELECT coalesce(d.namespace, p.namespace) AS namespace, coalesce(d.name, p.name) AS name,
       coalesce(d.executor, 'worker') AS executor, coalesce(d.ready, 0) AS ready,
       coalesce(d.delayed, 0) AS delayed, coalesce(d.in_flight, 0) AS in_flight,
       CASE WHEN coalesce(d.executor, 'worker') = 'worker' THEN coalesce(p.pollers, 0) END AS pollers
  FROM depth d FULL OUTER JOIN polled p
    ON p.namespace = d.namespace AND p.name = d.name AND d.executor = 'worker'
"""
_OVERDUE = """
SELECT (SELECT count(*) FROM tasks WHERE status IN ('SCHEDULED', 'IN_PROGRESS') AND next_deadline IS NOT NULL
          AND next_deadline < now() - interval '2 seconds')
     + (SELECT count(*) FROM executions WHERE status = 'RUNNING' AND timeout_at IS NOT NULL
          AND timeout_at < now() - interval '2 seconds' AND quarantined_at IS NULL)
"""


@dataclass(frozen=True)
class QueueDepth:
    namespace: str
    name: str
    executor: str
    ready: int
    delayed: int
    in_flight: int = 0
    pollers: int | None = None  # workers seen polling in the last minute; None for queues no worker polls


_IN_QUARANTINE = """
SELECT namespace, count(*)::int AS n FROM executions WHERE quarantined_at IS NOT NULL AND status = 'RUNNING'
 GROUP BY namespace
"""
_DEAD_LETTERS = "SELECT namespace, count(*)::int AS n FROM dead_letters GROUP BY namespace"


@dataclass(frozen=True)
class Health:
    decide_lag_seconds: float
    queues: list[QueueDepth]
    timers_overdue: int
    in_quarantine: dict[str, int] = field(default_factory=dict)  # by namespace
    dead_letters: dict[str, int] = field(default_factory=dict)  # by namespace, since the database was created


async def health(conn: asyncpg.Connection) -> Health:
    lag = float(await conn.fetchval(_DECIDE_LAG))
    queues = [
        QueueDepth(r["namespace"], r["name"], r["executor"], r["ready"], r["delayed"], r["in_flight"], r["pollers"])
        for r in await conn.fetch(_QUEUE_DEPTHS)
    ]
    overdue = int(await conn.fetchval(_OVERDUE))
    quarantined = {r["namespace"]: r["n"] for r in await conn.fetch(_IN_QUARANTINE)}
    dead = {r["namespace"]: r["n"] for r in await conn.fetch(_DEAD_LETTERS)}
    return Health(lag, queues, overdue, quarantined, dead)


_ATTEMPTS = """
SELECT id::text AS id, execution_id::text AS execution_id, name, epoch, leased_at FROM tasks
 WHERE namespace = $1 AND id = ANY($2::uuid[])
"""


@dataclass(frozen=True)
class Attempt:
    """What a task attempt's span needs: its run, type, lease and epoch."""

    execution_id: str
    task_type: str
    epoch: int
    leased_at: datetime.datetime | None


async def attempts(conn: asyncpg.Connection, namespace: str, task_ids: list[str]) -> dict[str, Attempt]:
    ids = []
    for task_id in task_ids:
        try:
            ids.append(uuid.UUID(task_id))
        except ValueError:
            continue  # not a task id: the store answers 404 for it
    rows = await conn.fetch(_ATTEMPTS, namespace, ids)
    return {r["id"]: Attempt(r["execution_id"], r["name"], r["epoch"], r["leased_at"]) for r in rows}


_RUN_TIMES = "SELECT id::text AS id, created_at, ended_at FROM executions WHERE id = ANY($1::uuid[])"


async def run_times(
    conn: asyncpg.Connection, run_ids: list[str]
) -> dict[str, tuple[datetime.datetime, datetime.datetime | None]]:
    rows = await conn.fetch(_RUN_TIMES, [uuid.UUID(r) for r in run_ids])
    return {r["id"]: (r["created_at"], r["ended_at"]) for r in rows}


# --- "why is my task not running?" ---------------------------------------------

_POLLER_WINDOW_SECONDS = 60

_QUEUES = f"""
WITH depth AS (
    SELECT name,
           count(*) FILTER (WHERE status = 'SCHEDULED' AND available_at <= now())::int AS ready,
           count(*) FILTER (WHERE status = 'SCHEDULED' AND available_at > now())::int AS delayed,
           count(*) FILTER (WHERE status = 'IN_PROGRESS')::int AS in_flight
      FROM tasks WHERE executor = 'worker' AND namespace = $1 AND status IN ('SCHEDULED', 'IN_PROGRESS')
     GROUP BY name
), polled AS (
    SELECT name, count(*) FILTER (WHERE last_poll > now() - interval '{_POLLER_WINDOW_SECONDS} seconds')::int
           AS pollers, max(last_poll) AS last_poll
      FROM pollers WHERE namespace = $1 GROUP BY name
)
SELECT coalesce(d.name, p.name) AS name, coalesce(d.ready, 0) AS ready, coalesce(d.delayed, 0) AS delayed,
       coalesce(d.in_flight, 0) AS in_flight, coalesce(p.pollers, 0) AS pollers, p.last_poll
  FROM depth d FULL OUTER JOIN polled p ON p.name = d.name
 WHERE $2::text IS NULL OR coalesce(d.name, p.name) = $2
 ORDER BY 1
"""
_WORKERS = """
SELECT name, worker_id, last_poll FROM pollers WHERE namespace = $1 ORDER BY name, last_poll DESC LIMIT 1000
"""
_SEMAPHORES_HELD = """
SELECT s.name, s.permits,
       (SELECT count(*) FROM tasks t
         WHERE t.namespace = s.namespace AND t.status = 'IN_PROGRESS' AND t.holds @> ARRAY[s.name])::int AS held
  FROM semaphores s WHERE s.namespace = $1 AND ($2::text IS NULL OR s.name = $2)
 ORDER BY s.name
"""
_HOLDERS = """
SELECT id, execution_id, name, leased_at FROM tasks
 WHERE namespace = $1 AND status = 'IN_PROGRESS' AND holds @> ARRAY[$2]::text[]
 ORDER BY leased_at LIMIT $3
"""
_USAGE = """
SELECT (SELECT count(*) FROM executions WHERE namespace = $1 AND status = 'RUNNING')::int AS running,
       (SELECT count(*) FROM executions WHERE namespace = $1
          AND created_at >= date_trunc('minute', now()))::int AS this_minute,
       (SELECT count(*) FROM workflows WHERE namespace = $1)::int AS definitions,
       (SELECT count(*) FROM schedules WHERE namespace = $1)::int AS schedules
"""
_QUOTA_ROWS = """
SELECT resource_name, max_concurrent_executions, max_executions_per_minute, max_workflow_definitions, max_schedules
  FROM quotas WHERE namespace = $1 ORDER BY resource_name
"""


@dataclass(frozen=True)
class Queue:
    name: str
    ready: int
    delayed: int
    in_flight: int
    pollers: int
    last_poll: datetime.datetime | None


async def queues(conn: asyncpg.Connection, namespace: str, name: str | None = None) -> list[Queue]:
    return [
        Queue(r["name"], r["ready"], r["delayed"], r["in_flight"], r["pollers"], r["last_poll"])
        for r in await conn.fetch(_QUEUES, namespace, name)
    ]


async def workers(conn: asyncpg.Connection, namespace: str) -> list[tuple[str, str, datetime.datetime]]:
    return [(r["name"], r["worker_id"], r["last_poll"]) for r in await conn.fetch(_WORKERS, namespace)]


async def semaphores(conn: asyncpg.Connection, namespace: str, name: str | None = None) -> list[SemaphoreState]:
    return [
        SemaphoreState(r["name"], r["permits"], r["held"]) for r in await conn.fetch(_SEMAPHORES_HELD, namespace, name)
    ]


@dataclass(frozen=True)
class Holder:
    task_id: str
    execution_id: str
    task_type: str
    since: datetime.datetime


async def holders(conn: asyncpg.Connection, namespace: str, semaphore: str, limit: int = 20) -> list[Holder]:
    return [
        Holder(str(r["id"]), str(r["execution_id"]), r["name"], r["leased_at"])
        for r in await conn.fetch(_HOLDERS, namespace, semaphore, limit)
    ]


@dataclass(frozen=True)
class QuotaRow:
    name: str
    max_concurrent_executions: int | None
    max_executions_per_minute: int | None
    max_workflow_definitions: int | None
    max_schedules: int | None


@dataclass(frozen=True)
class Usage:
    concurrent_executions: int
    executions_this_minute: int
    workflow_definitions: int
    schedules: int = 0


async def quota_rows(conn: asyncpg.Connection, namespace: str) -> list[QuotaRow]:
    return [
        QuotaRow(
            r["resource_name"],
            r["max_concurrent_executions"],
            r["max_executions_per_minute"],
            r["max_workflow_definitions"],
            r["max_schedules"],
        )
        for r in await conn.fetch(_QUOTA_ROWS, namespace)
    ]


async def usage(conn: asyncpg.Connection, namespace: str) -> Usage:
    row = await conn.fetchrow(_USAGE, namespace)
    return Usage(row["running"], row["this_minute"], row["definitions"], row["schedules"])


_RUN = """
SELECT e.id, e.namespace, e.workflow_name, e.workflow_version, e.status, e.reason, e.awaiting_admission,
       e.admission_key, e.quarantine_reason, v.spec::text AS spec,
       e.paused_at IS NOT NULL AS paused, coalesce(e.pause_reason, '') AS pause_reason,
       coalesce(extract(epoch FROM now() - e.paused_at), 0)::float8 AS seconds_paused
  FROM executions e
  LEFT JOIN workflow_versions v ON v.namespace = e.namespace AND v.name = e.workflow_name
                               AND v.version = e.workflow_version
 WHERE e.id = $1 AND e.namespace = $2
"""
# The ready tasks of a task's queue the lease takes before it (controls.priority),
# counted up to a bound: an index range, so a deep backlog costs `why` little.
_AHEAD = """
SELECT count(*) FROM (SELECT 1 FROM tasks
 WHERE executor = $1 AND namespace = $2 AND name = $3 AND status = 'SCHEDULED' AND available_at <= now()
   AND (sluiceway_ready_order(available_at, priority), id) < (sluiceway_ready_order($4, $5::smallint), $6)
 LIMIT $7) AS ahead
"""
# What `why`'s estimate goes by: the leases of a type's latest tasks in the last
# minute, and how long those that ended held their lease (its listing index,
# newest first: a few hundred rows, however long the type's history).
RECENT_SAMPLE = 500
_RECENT = """
SELECT count(*) FILTER (WHERE leased_at > now() - interval '60 seconds') AS leased,
       avg(extract(epoch FROM ended_at - leased_at)) FILTER (WHERE ended_at IS NOT NULL) AS hold
  FROM (SELECT leased_at, ended_at FROM tasks WHERE namespace = $1 AND name = $2
         ORDER BY created_at DESC LIMIT $3) AS recent
"""
_ACTIVE_TASKS = """
SELECT t.id, t.ref, t.type, t.executor, t.name, t.status, t.attempt, t.worker_id, t.input, t.output, t.created_at,
       t.iteration, t.snooze_count, t.interrupt_count, t.priority, t.available_at,
       extract(epoch FROM t.available_at - now()) AS until_available,
       extract(epoch FROM now() - t.leased_at) AS leased_for,
       extract(epoch FROM now() - t.last_heartbeat_at) AS since_beat,
       extract(epoch FROM t.total_at - now()) AS until_timeout,
       (SELECT p.reason FROM tasks p WHERE p.execution_id = t.execution_id AND p.ref = t.ref
           AND p.attempt < t.attempt ORDER BY p.attempt DESC LIMIT 1) AS previous_reason,
       CASE WHEN t.type = 'WAIT_FOR_WEBHOOK'
            THEN EXISTS (SELECT 1 FROM webhooks w WHERE w.namespace = t.namespace AND w.name = t.input ->> 'webhook')
       END AS webhook_defined,
       CASE WHEN t.type = 'PULL_WORKFLOW_MESSAGES'
            THEN (SELECT count(*) FROM run_messages m WHERE m.execution_id = t.execution_id)
       END AS queued_messages
  FROM tasks t WHERE t.execution_id = $1 AND t.status IN ('SCHEDULED', 'IN_PROGRESS')
 ORDER BY t.created_at
"""
_ADMITTED = """
SELECT id FROM executions WHERE namespace = $1 AND workflow_name = $2 AND admission_key = $3
   AND status = 'RUNNING' AND NOT awaiting_admission ORDER BY created_at LIMIT 20
"""
# The window the lease would count in now, by the lease's own formula (migration 0009).
_WINDOW = """
SELECT coalesce((SELECT used FROM rate_windows WHERE namespace = $1 AND name = $2
                  AND window_start = w.start), 0) AS used,
       extract(epoch FROM w.start - now()) + $3 AS remaining
  FROM (SELECT sluiceway_window_start(now(), $3) AS start) w
"""
_IN_FLIGHT = """
SELECT count(*) FROM tasks WHERE executor = $3 AND namespace = $1 AND name = $2 AND status = 'IN_PROGRESS'
"""
_TASK_RUN = "SELECT execution_id, ref FROM tasks WHERE id = $1 AND namespace = $2"


async def run_facts(
    conn: asyncpg.Connection,
    namespace: str,
    execution_id: uuid.UUID,
    policies: Policies,
    *,
    limit: int | None = None,
    ref: str | None = None,
) -> RunFacts | None:
    """The facts `why` explains. `limit` gathers the gates of the first
    `limit` active tasks only, and `ref` of that task only: a fan-out of
    thousands costs a handful of queries per task (the UI asks on every
    refresh)."""
    run = await conn.fetchrow(_RUN, execution_id, namespace)
    if run is None:
        return None
    # None for a version that no longer parses: its run is quarantined, and why says so first.
    spec = workflows.readable_spec(run["namespace"], run["workflow_name"], run["workflow_version"], run["spec"])
    config = spec.rate_limit_config if spec else None
    admitted: list[str] = []
    if run["awaiting_admission"]:
        admitted = [
            str(r["id"]) for r in await conn.fetch(_ADMITTED, namespace, run["workflow_name"], run["admission_key"])
        ]
    rows = await conn.fetch(_ACTIVE_TASKS, execution_id)
    active_workers = sum(1 for r in rows if Executor(r["executor"]).leases())
    explained = [r for r in rows if ref is None or r["ref"] == ref][:limit]
    found = await policies.of(conn, namespace, {r["name"] for r in explained})
    loops = {t.task_reference_name: t for t in iter_tasks(spec.tasks) if t.type is TaskType.DO_WHILE} if spec else {}
    tasks = [await _task_facts(conn, namespace, row, found[row["name"]].gates, loops) for row in explained]
    return RunFacts(
        execution_id=str(run["id"]),
        workflow=run["workflow_name"],
        status=run["status"],
        reason=run["reason"],
        awaiting_admission=run["awaiting_admission"],
        admission_key=run["admission_key"],
        admission_limit=config.concurrent_exec_limit if config else 0,
        admission_holders=admitted,
        max_concurrent_tasks=spec.max_concurrent_tasks if spec else 0,
        active_worker_tasks=active_workers,
        active_tasks=len(rows),
        tasks=tasks,
        quarantine_reason=run["quarantine_reason"] if run["status"] == "RUNNING" else None,
        paused=run["paused"] and run["status"] == "RUNNING",
        pause_reason=run["pause_reason"],
        seconds_paused=run["seconds_paused"],
    )


async def run_and_ref_of_task(
    conn: asyncpg.Connection, namespace: str, task_id: uuid.UUID
) -> tuple[uuid.UUID, str] | None:
    row = await conn.fetchrow(_TASK_RUN, task_id, namespace)
    return (row["execution_id"], row["ref"]) if row else None


async def _task_facts(
    conn: asyncpg.Connection, namespace: str, row: asyncpg.Record, gates: Gates, loops: dict[str, WorkflowTask]
) -> TaskFacts:
    name = row["name"]
    loop = loops.get(row["ref"])
    in_flight = 0
    if gates.concurrent_exec_limit:
        in_flight = int(await conn.fetchval(_IN_FLIGHT, namespace, name, row["executor"]))
    used, remaining = 0, 0.0
    if gates.rate_limit_per_frequency:
        window = await conn.fetchrow(_WINDOW, namespace, name, gates.rate_limit_frequency_seconds)
        used, remaining = int(window["used"]), float(window["remaining"])
    sems = [s for s in await semaphores(conn, namespace) if s.name in gates.semaphores]
    holding = {
        s.name: [f"{h.task_type} {h.task_id} (run {h.execution_id})" for h in await holders(conn, namespace, s.name, 5)]
        for s in sems
        if s.free == 0
    }
    queue = (await queues(conn, namespace, name)) or [Queue(name, 0, 0, 0, 0, None)]
    recent = await conn.fetchrow(_RECENT, namespace, name, RECENT_SAMPLE)
    last_poll = queue[0].last_poll
    since_poll = None
    if last_poll is not None:
        since_poll = float(await conn.fetchval("SELECT extract(epoch FROM now() - $1::timestamptz)", last_poll))
    return TaskFacts(
        task_id=str(row["id"]),
        ref=row["ref"],
        type=row["type"],
        name=name,
        status=row["status"],
        attempt=row["attempt"],
        seconds_until_available=float(row["until_available"] or 0),
        priority=row["priority"],
        ahead=await _ahead(conn, namespace, row),
        recent_lease_rate=recent["leased"] / 60 if recent["leased"] else None,
        mean_hold_seconds=_float(recent["hold"]),
        worker_id=row["worker_id"],
        seconds_leased=_float(row["leased_for"]),
        seconds_since_heartbeat=_float(row["since_beat"]),
        gates=gates,
        in_flight=in_flight,
        window_used=used,
        seconds_to_next_window=remaining,
        semaphores=sems,
        semaphore_holders=holding,
        recent_pollers=queue[0].pollers,
        seconds_since_last_poll=since_poll,
        queue_ready=queue[0].ready,
        input=row["input"] or {},
        output=row["output"] or {},
        scheduled_at=row["created_at"],
        seconds_until_timeout=_float(row["until_timeout"]),
        iteration=row["iteration"],
        max_iterations=loop.max_iterations if loop else None,
        keep_last_n=loop.keep_last_n if loop else None,
        webhook_defined=row["webhook_defined"] is not False,
        queued_messages=int(row["queued_messages"] or 0),
        snooze_count=row["snooze_count"],
        interrupt_count=row["interrupt_count"],
        previous_reason=row["previous_reason"] or "",
    )


async def _ahead(conn: asyncpg.Connection, namespace: str, row: asyncpg.Record) -> int | None:
    if row["status"] != "SCHEDULED" or (row["until_available"] or 0) > 0:
        return None
    args = (row["executor"], namespace, row["name"], row["available_at"], row["priority"], row["id"], AHEAD_COUNTED)
    return int(await conn.fetchval(_AHEAD, *args))


def _float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


_ACTIVE_RUNS = "SELECT count(*) FROM executions WHERE namespace = $1 AND workflow_name = $2 AND status = 'RUNNING'"


async def active_runs(conn: asyncpg.Connection, namespace: str, workflow: str) -> int:
    return int(await conn.fetchval(_ACTIVE_RUNS, namespace, workflow))
