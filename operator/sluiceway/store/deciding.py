"""The decider's transaction: take runs from the decide queue, load their
snapshots, call the pure decider, apply its commands, consume the events.

Several replicas run this at once: a run is decided by whoever locks its
`executions` row (`FOR UPDATE SKIP LOCKED`); results and timers only ever
insert into the decide queue, so they never wait on the decider's locks.
Commands of a whole batch are applied with a few bulk statements; if the bulk
apply fails, each run is retried alone so one bad run cannot wedge the queue.
"""

from __future__ import annotations

import datetime
import functools
import json
import logging
import random
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from pydantic import ValidationError

from sluiceway.controls.budget import WINDOW_SECONDS, BudgetWindow
from sluiceway.controls.policy import OperatorDefaults, resolve
from sluiceway.engine.commands import (
    ArmRunTimeout,
    Decision,
    FinishRun,
    RecordTask,
    ScheduleTask,
    StartChild,
    UpdateTask,
)
from sluiceway.engine.decider import Event, decide
from sluiceway.engine.snapshot import RunSnapshot, TaskRow
from sluiceway.model.execution import RunStatus, TaskStatus
from sluiceway.model.taskdefinition import TaskDefinitionSpec
from sluiceway.model.workflow import TaskType, WorkflowSpec, iter_tasks
from sluiceway.store import executions

log = logging.getLogger(__name__)

_BUCKET_SECONDS = 10
_SHARDS = 8
_ERROR_BACKOFF = datetime.timedelta(seconds=30)


@dataclass
class DeciderConfig:
    batch_size: int = 64
    defaults: OperatorDefaults = field(default_factory=OperatorDefaults)
    rng: random.Random = field(default_factory=random.Random)
    on_decision: Callable[[str, Decision], None] | None = None  # metrics and tracing hooks


@functools.lru_cache(maxsize=2048)
def _workflow(namespace: str, name: str, version: int, raw: str) -> WorkflowSpec:
    # Versions are immutable: parse each once. The raw JSON is part of the key
    # only to keep the cache honest if a version row were ever rewritten.
    return WorkflowSpec.model_validate(json.loads(raw))


_CANDIDATES = """
SELECT DISTINCT execution_id FROM (
    SELECT execution_id FROM decide_queue WHERE due_at <= now() ORDER BY due_at, id LIMIT $1
) due
"""
_LOCK_RUNS = """
SELECT e.id, e.namespace, e.workflow_name, e.workflow_version, e.status, e.input, e.correlation_id,
       e.evaluated, e.timeout_at, e.terminate_requested, e.awaiting_admission, v.spec::text AS spec
  FROM executions e
  JOIN workflow_versions v ON v.namespace = e.namespace AND v.name = e.workflow_name
                          AND v.version = e.workflow_version
 WHERE e.id = ANY($1)
 ORDER BY e.id
   FOR UPDATE OF e SKIP LOCKED
"""
_EVENTS = "SELECT id, execution_id, event FROM decide_queue WHERE execution_id = ANY($1) AND due_at <= now()"
_LATEST_TASKS = """
SELECT DISTINCT ON (execution_id, ref)
       id, execution_id, ref, type, name, status, attempt, input, output, reason, retry_after_seconds,
       close_deadline, first_scheduled_at
  FROM tasks WHERE execution_id = ANY($1)
 ORDER BY execution_id, ref, attempt DESC
"""
_DEFINITIONS = "SELECT name, spec FROM task_definitions WHERE namespace = $1 AND name = ANY($2)"
_BUDGETS = """
SELECT name, sum(executions)::int AS executions, sum(retries)::int AS retries FROM execution_counts
 WHERE namespace = $1 AND name = ANY($2) AND bucket > now() - make_interval(secs => $3)
 GROUP BY name
"""
_CONSUME = "DELETE FROM decide_queue WHERE id = ANY($1)"
_DEFER = "INSERT INTO decide_queue (execution_id, event, due_at) VALUES ($1, 'retry_after_error', now() + $2)"


async def decide_batch(pool: asyncpg.Pool, config: DeciderConfig) -> int:
    """Decide one batch of due runs; return how many runs were decided."""
    async with pool.acquire() as conn:
        candidates = [r["execution_id"] for r in await conn.fetch(_CANDIDATES, config.batch_size * 4)]
        if not candidates:
            return 0
        try:
            async with conn.transaction():
                return await _decide(conn, candidates[: config.batch_size], config)
        except (asyncpg.PostgresError, ValidationError) as error:
            log.warning("bulk decision failed (%s); deciding runs one by one", error)
        decided = 0
        for execution_id in candidates[: config.batch_size]:
            try:
                async with conn.transaction():
                    decided += await _decide(conn, [execution_id], config)
            except (asyncpg.PostgresError, ValidationError) as error:
                log.error("deciding run %s failed: %s; retrying it in %s", execution_id, error, _ERROR_BACKOFF)
                async with conn.transaction():
                    events = await conn.fetch(_EVENTS, [execution_id])
                    await conn.execute(_CONSUME, [e["id"] for e in events])
                    await conn.execute(_DEFER, execution_id, _ERROR_BACKOFF)
        return decided


async def _decide(conn: asyncpg.Connection, candidates: list[uuid.UUID], config: DeciderConfig) -> int:
    now: datetime.datetime = await conn.fetchval("SELECT now()")
    runs = await conn.fetch(_LOCK_RUNS, candidates)
    if not runs:
        # Events for runs that no longer exist are dropped here.
        await _drop_orphans(conn, candidates)
        return 0
    ids = [r["id"] for r in runs]
    events = await conn.fetch(_EVENTS, ids)
    rows_by_run: dict[uuid.UUID, dict[str, TaskRow]] = defaultdict(dict)
    for row in await conn.fetch(_LATEST_TASKS, ids):
        rows_by_run[row["execution_id"]][row["ref"]] = _task_row(row)
    snapshots = await _snapshots(conn, runs, rows_by_run, events, config.defaults)
    applier = _Applier(now)
    for snapshot in snapshots:
        event = _event_of(events, snapshot.id)
        decision = decide(snapshot, event, now, config.rng)
        applier.add(snapshot, decision)
        if config.on_decision is not None:
            config.on_decision(snapshot.id, decision)
    await applier.apply(conn, config)
    await conn.execute(_CONSUME, [e["id"] for e in events])
    await _drop_orphans(conn, [c for c in candidates if c not in set(ids)])
    return len(snapshots)


async def _drop_orphans(conn: asyncpg.Connection, candidates: list[uuid.UUID]) -> None:
    if candidates:
        await conn.execute(
            "DELETE FROM decide_queue q WHERE q.execution_id = ANY($1)"
            " AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.id = q.execution_id)", candidates)


def _event_of(events: Iterable[asyncpg.Record], execution_id: str) -> Event:
    names = {e["event"] for e in events if str(e["execution_id"]) == execution_id}
    for candidate in (Event.TERMINATE, Event.STARTED, Event.TIMER, Event.CHILD_FINISHED, Event.ADMITTED):
        if candidate.value in names:
            return candidate
    return Event.FORCED if "forced" in names else Event.TASK_UPDATED


def _task_row(row: asyncpg.Record) -> TaskRow:
    return TaskRow(
        id=str(row["id"]), ref=row["ref"], type=TaskType(row["type"]), name=row["name"],
        status=TaskStatus(row["status"]), attempt=row["attempt"], input=row["input"], output=row["output"],
        reason=row["reason"], retry_after_seconds=row["retry_after_seconds"],
        schedule_to_close_at=row["close_deadline"], first_scheduled_at=row["first_scheduled_at"],
    )


async def _snapshots(
    conn: asyncpg.Connection, runs: list[asyncpg.Record], rows_by_run: Mapping[uuid.UUID, dict[str, TaskRow]],
    events: list[asyncpg.Record], defaults: OperatorDefaults,
) -> list[RunSnapshot]:
    specs = {r["id"]: _workflow(r["namespace"], r["workflow_name"], r["workflow_version"], r["spec"]) for r in runs}
    names_by_ns: dict[str, set[str]] = defaultdict(set)
    failing_by_ns: dict[str, set[str]] = defaultdict(set)
    for run in runs:
        for task in iter_tasks(specs[run["id"]].tasks):
            names_by_ns[run["namespace"]].add(task.name)
            if task.type is TaskType.FORK_JOIN_DYNAMIC:
                fork = rows_by_run[run["id"]].get(task.task_reference_name)
                if fork is not None:
                    names_by_ns[run["namespace"]].add(str(fork.output.get("forkTaskName", "")))
        for row in rows_by_run[run["id"]].values():
            if row.status.is_failure():
                failing_by_ns[run["namespace"]].add(row.name)
    definitions: dict[str, dict[str, TaskDefinitionSpec]] = defaultdict(dict)
    budgets: dict[str, dict[str, BudgetWindow]] = defaultdict(dict)
    for namespace, names in names_by_ns.items():
        for row in await conn.fetch(_DEFINITIONS, namespace, list(names)):
            definitions[namespace][row["name"]] = TaskDefinitionSpec.model_validate(row["spec"])
    for namespace, names in failing_by_ns.items():
        for row in await conn.fetch(_BUDGETS, namespace, list(names), WINDOW_SECONDS):
            budgets[namespace][row["name"]] = BudgetWindow(row["executions"], row["retries"])
    return [
        RunSnapshot(
            id=str(run["id"]), namespace=run["namespace"], workflow_name=run["workflow_name"],
            version=run["workflow_version"], workflow=specs[run["id"]], status=RunStatus(run["status"]),
            input=run["input"], tasks=rows_by_run[run["id"]], correlation_id=run["correlation_id"],
            evaluated=run["evaluated"], timeout_at=run["timeout_at"], terminate_requested=run["terminate_requested"],
            awaiting_admission=run["awaiting_admission"], definitions=definitions[run["namespace"]],
            defaults=defaults, budgets=budgets[run["namespace"]],
        )
        for run in runs
    ]


_INSERT_TASKS = """
INSERT INTO tasks (id, execution_id, namespace, ref, type, name, attempt, status, input, output, reason,
                   first_scheduled_at, available_at, ended_at, close_deadline,
                   schedule_to_start_timeout, start_to_close_timeout, timeout_seconds, heartbeat_timeout,
                   response_timeout, timeout_policy,
                   schedule_to_start_at, total_at, schedule_to_close_at, wait_until)
SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[],
                     $8::text[], $9::jsonb[], $10::jsonb[], $11::text[], $12::timestamptz[], $13::timestamptz[],
                     $14::timestamptz[], $15::timestamptz[], $16::int[], $17::int[], $18::int[], $19::int[],
                     $20::int[], $21::text[], $22::timestamptz[], $23::timestamptz[], $24::timestamptz[],
                     $25::timestamptz[])
ON CONFLICT (execution_id, ref, attempt) DO NOTHING
"""
_UPDATE_TASK = """
UPDATE tasks SET status = $2, reason = $3, ended_at = coalesce(ended_at, now()) WHERE id = $1
"""
_MARK_DECIDED = """
UPDATE executions e SET evaluated = true, mirror_seq = e.mirror_seq + 1,
       timeout_at = coalesce(t.timeout_at, e.timeout_at)
  FROM unnest($1::uuid[], $2::timestamptz[]) AS t(id, timeout_at)
 WHERE e.id = t.id
"""
_COUNT_EXECUTIONS = """
INSERT INTO execution_counts AS c (namespace, name, bucket, shard, executions, retries)
SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::smallint[], $5::int[], $6::int[])
ON CONFLICT (namespace, name, bucket, shard) DO UPDATE
   SET executions = c.executions + EXCLUDED.executions, retries = c.retries + EXCLUDED.retries
"""


class _Applier:
    """Collects the commands of a batch and applies them in bulk."""

    def __init__(self, now: datetime.datetime) -> None:
        self.now = now
        self.tasks: list[tuple[Any, ...]] = []
        self.updates: list[tuple[Any, ...]] = []
        self.decided: list[tuple[uuid.UUID, datetime.datetime | None]] = []
        self.finishes: list[tuple[RunSnapshot, FinishRun]] = []
        self.children: list[tuple[RunSnapshot, StartChild, uuid.UUID]] = []
        self.counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        self.ready: set[tuple[str, str]] = set()
        self.shard = random.randrange(_SHARDS)

    def add(self, snapshot: RunSnapshot, decision: Decision) -> None:
        run_id = uuid.UUID(snapshot.id)
        timeout_at: datetime.datetime | None = None
        ids_by_ref: dict[str, uuid.UUID] = {}
        for command in decision.commands:
            if isinstance(command, ScheduleTask):
                ids_by_ref[command.ref] = self._schedule(snapshot, command)
            elif isinstance(command, RecordTask):
                ids_by_ref[command.ref] = self._record(snapshot, command)
            elif isinstance(command, UpdateTask):
                self.updates.append((uuid.UUID(command.task_id), command.status.value, command.reason))
            elif isinstance(command, ArmRunTimeout):
                timeout_at = command.at
            elif isinstance(command, StartChild):
                self.children.append((snapshot, command, ids_by_ref[command.parent_ref]))
            elif isinstance(command, FinishRun):
                self.finishes.append((snapshot, command))
        self.decided.append((run_id, timeout_at))

    def _schedule(self, snapshot: RunSnapshot, command: ScheduleTask) -> uuid.UUID:
        task_id = uuid.uuid4()
        task = next((t for t in iter_tasks(snapshot.workflow.tasks) if t.task_reference_name == command.ref), None)
        timeouts = resolve(snapshot.definitions.get(command.name), snapshot.defaults, task).timeouts
        d = command.deadlines
        self.tasks.append((
            task_id, uuid.UUID(snapshot.id), snapshot.namespace, command.ref, command.type.value, command.name,
            command.attempt, command.status.value, command.input, {}, "", command.first_scheduled_at,
            command.available_at, None, d.schedule_to_close, timeouts.schedule_to_start, timeouts.start_to_close,
            timeouts.timeout_seconds, timeouts.heartbeat, timeouts.response_timeout, timeouts.policy.value,
            d.schedule_to_start, d.total, d.schedule_to_close, d.wait_until,
        ))
        counts = self.counts[(snapshot.namespace, command.name)]
        counts[0] += 1
        counts[1] += 1 if command.attempt > 1 else 0
        if command.type is TaskType.SIMPLE:
            # Delayed tasks too: a waiting poll then knows exactly how long to sleep.
            self.ready.add((snapshot.namespace, command.name))
        return task_id

    def _record(self, snapshot: RunSnapshot, command: RecordTask) -> uuid.UUID:
        task_id = uuid.uuid4()
        self.tasks.append((
            task_id, uuid.UUID(snapshot.id), snapshot.namespace, command.ref, command.type.value, command.name,
            command.attempt, command.status.value, command.input, command.output, command.reason, self.now,
            self.now, self.now, None, 0, 0, 0, 0, 3600, "TIME_OUT_WF", None, None, None, None,
        ))
        return task_id

    async def apply(self, conn: asyncpg.Connection, config: DeciderConfig) -> None:
        if self.tasks:
            await conn.execute(_INSERT_TASKS, *map(list, zip(*self.tasks)))
        if self.updates:
            await conn.executemany(_UPDATE_TASK, self.updates)
        if self.counts:
            bucket = _bucket(self.now)
            keys = list(self.counts)
            await conn.execute(
                _COUNT_EXECUTIONS, [k[0] for k in keys], [k[1] for k in keys], [bucket] * len(keys),
                [self.shard] * len(keys), [self.counts[k][0] for k in keys], [self.counts[k][1] for k in keys],
            )
        await conn.execute(_MARK_DECIDED, [d[0] for d in self.decided], [d[1] for d in self.decided])
        for snapshot, child, parent_task in self.children:
            await _start_child(conn, snapshot, child, parent_task)
        for snapshot, finish in self.finishes:
            await finish_run(conn, snapshot, finish)
        for namespace, name in sorted(self.ready):
            await conn.execute(f"SELECT pg_notify('{executions.READY_CHANNEL}', $1)", f"{namespace}/{name}")


def _bucket(now: datetime.datetime) -> datetime.datetime:
    epoch = int(now.timestamp())
    return datetime.datetime.fromtimestamp(epoch - epoch % _BUCKET_SECONDS, tz=datetime.timezone.utc)


async def _start_child(conn: asyncpg.Connection, parent: RunSnapshot, child: StartChild,
                       parent_task: uuid.UUID) -> None:
    outcome = await executions.start_run(
        conn, parent.namespace, child.workflow, child.version, child.input,
        parent=(uuid.UUID(parent.id), parent_task),
    )
    if isinstance(outcome, executions.Started):
        await conn.execute("UPDATE tasks SET child_execution_id = $2 WHERE id = $1", parent_task,
                           uuid.UUID(outcome.id))
        return
    # The child could not start: the SUB_WORKFLOW task fails terminally, the decider takes it from there.
    await conn.execute(
        "UPDATE tasks SET status = 'FAILED_WITH_TERMINAL_ERROR', reason = $2, ended_at = now() WHERE id = $1",
        parent_task, f"SUB_WORKFLOW: {outcome.message}",
    )
    await executions.enqueue_decide(conn, parent.id, "child_finished")


_FINISH = """
UPDATE executions SET status = $2, reason = $3, output = $4, failed_task_id = $5, ended_at = now(),
                      timeout_at = NULL, mirror_seq = mirror_seq + 1
 WHERE id = $1 AND status = 'RUNNING'
RETURNING parent_execution_id, parent_task_id, workflow_name
"""
_CANCEL_ACTIVE = """
UPDATE tasks SET status = 'CANCELED', ended_at = now(), reason = $2,
       schedule_to_start_at = NULL, start_to_close_at = NULL, total_at = NULL, heartbeat_at = NULL,
       lease_expires_at = NULL, schedule_to_close_at = NULL, wait_until = NULL
 WHERE execution_id = $1 AND status IN ('SCHEDULED', 'IN_PROGRESS')
RETURNING child_execution_id
"""
_TERMINATE_CHILDREN = """
UPDATE executions SET terminate_requested = $2
 WHERE id = ANY($1) AND status = 'RUNNING' AND terminate_requested IS NULL
RETURNING id
"""
_NOTIFY_PARENT_TASK = """
UPDATE tasks SET status = $2, output = $3, reason = $4, ended_at = now(), total_at = NULL
 WHERE id = $1 AND status = 'IN_PROGRESS'
"""


async def finish_run(conn: asyncpg.Connection, snapshot: RunSnapshot, finish: FinishRun) -> None:
    """End a run and everything hanging off it, in the decider's transaction."""
    failed_task = uuid.UUID(finish.failed_task_id) if finish.failed_task_id else None
    ended = await conn.fetchrow(_FINISH, uuid.UUID(snapshot.id), finish.status.value, finish.reason,
                                finish.output, failed_task)
    if ended is None:
        return
    cancelled = await conn.fetch(_CANCEL_ACTIVE, uuid.UUID(snapshot.id), f"run {finish.status.value.lower()}")
    children = [r["child_execution_id"] for r in cancelled if r["child_execution_id"] is not None]
    if children:
        stopped = await conn.fetch(_TERMINATE_CHILDREN, children, f"parent run {snapshot.id} ended")
        await executions.enqueue_decides(conn, [r["id"] for r in stopped], "terminate")
    if ended["parent_task_id"] is not None:
        ok = finish.status is RunStatus.COMPLETED
        status = TaskStatus.COMPLETED if ok else TaskStatus.FAILED
        reason = "" if ok else f"sub-workflow {snapshot.id} {finish.status.value}: {finish.reason}"
        await conn.execute(_NOTIFY_PARENT_TASK, ended["parent_task_id"], status.value, finish.output, reason)
        await executions.enqueue_decide(conn, ended["parent_execution_id"], "child_finished")
    if finish.failure_workflow:
        started = await executions.start_run(
            conn, snapshot.namespace, finish.failure_workflow, None,
            {"workflowId": snapshot.id, "workflowName": snapshot.workflow_name, "reason": finish.reason,
             "failureStatus": finish.status.value, "failureTaskId": finish.failed_task_id},
        )
        if not isinstance(started, executions.Started):
            log.warning("run %s: failureWorkflow %s not started: %s", snapshot.id, finish.failure_workflow,
                        started.message)
