"""The decider's transaction: take runs from the decide queue, load their
snapshots, call the pure decider, apply its commands, consume the events.

Several replicas run this at once: a run is decided by whoever locks its
`executions` row (`FOR UPDATE SKIP LOCKED`); results and timers only ever
insert into the decide queue, so they never wait on the decider's locks.
Commands of a whole batch are applied with a few bulk statements; if the bulk
apply fails, each run is retried alone so one bad run cannot wedge the queue.

No run can stop the loop or the other runs of its batch. A run whose spec or
rows cannot be read, whose decision is a Quarantine, or whose decision cannot
be applied even alone, is quarantined: marked on its row, its decide events
consumed, and passed over from then on (terminating it still works; forcing an
evaluation releases it). Only a lost database connection leaves this module,
for the loop to wait out.
"""

from __future__ import annotations

import datetime
import functools
import json
import logging
import random
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping
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
    Quarantine,
    RecordTask,
    ScheduleTask,
    StartChild,
    UpdateTask,
)
from sluiceway.engine.decider import Event, decide
from sluiceway.engine.snapshot import RunSnapshot, TaskRow
from sluiceway.model.execution import RunStatus, TaskStatus
from sluiceway.model.taskdefinition import TaskDefinitionSpec
from sluiceway.model.workflow import TaskType, WorkflowSpec, WorkflowTask, iter_tasks
from sluiceway.store import admission, executions
from sluiceway.store.definitions import DefinitionCache

SYSTEM_WAKE = ("@system", "@http")  # what the HTTP task runner waits on

log = logging.getLogger(__name__)

_BUCKET_SECONDS = 10
_SHARDS = 8
_ERROR_BACKOFF = datetime.timedelta(seconds=30)
_REASON_CHARS = 2000  # a quarantine reason is for people; the head of an error says enough


@dataclass(frozen=True)
class Quarantined:
    """A run set aside by the decider, reported once it is committed."""

    run_id: str
    namespace: str
    workflow: str
    reason: str


@dataclass
class DeciderConfig:
    batch_size: int = 128
    defaults: OperatorDefaults = field(default_factory=OperatorDefaults)
    rng: random.Random = field(default_factory=random.Random)
    definitions: DefinitionCache = field(default_factory=DefinitionCache)
    on_decision: Callable[[str, Decision], None] | None = None  # metrics and tracing hooks
    on_quarantine: Callable[[Quarantined], None] | None = None


@functools.lru_cache(maxsize=2048)
def _workflow(namespace: str, name: str, version: int, raw: str) -> WorkflowSpec:
    # Versions are immutable: parse each once. The raw JSON is part of the key
    # only to keep the cache honest if a version row were ever rewritten.
    return WorkflowSpec.model_validate(json.loads(raw))


# Lock due runs and read their events in one round trip.
_LOCK_DUE = """
SELECT now() AS now, e.id, e.namespace, e.workflow_name, e.workflow_version, e.status, e.input,
       e.correlation_id, e.evaluated, e.timeout_at, e.terminate_requested, e.awaiting_admission,
       e.resource_name IS NOT NULL AS mirrored, e.quarantined_at IS NOT NULL AS quarantined, v.spec::text AS spec,
       ARRAY(SELECT q.id FROM decide_queue q WHERE q.execution_id = e.id AND q.due_at <= now()) AS event_ids,
       ARRAY(SELECT DISTINCT q.event FROM decide_queue q WHERE q.execution_id = e.id AND q.due_at <= now())
           AS events
  FROM executions e
  -- LEFT: a run whose version row is missing is quarantined, not left to block the queue's head
  LEFT JOIN workflow_versions v ON v.namespace = e.namespace AND v.name = e.workflow_name
                               AND v.version = e.workflow_version
 WHERE e.id = ANY(ARRAY(SELECT execution_id FROM decide_queue WHERE due_at <= now() ORDER BY due_at, id
                        LIMIT $1 * 4))
 ORDER BY e.id
 LIMIT $1
   FOR UPDATE OF e SKIP LOCKED
"""
_LOCK_ONE = _LOCK_DUE.replace(
    """e.id = ANY(ARRAY(SELECT execution_id FROM decide_queue WHERE due_at <= now() ORDER BY due_at, id
                        LIMIT $1 * 4))""",
    "e.id = $1",
).replace(" LIMIT $1\n", "\n")
_LATEST_TASKS = """
SELECT DISTINCT ON (execution_id, ref)
       id, execution_id, ref, type, name, status, attempt, input, output, reason, retry_after_seconds,
       close_deadline, first_scheduled_at
  FROM tasks WHERE execution_id = ANY($1)
 ORDER BY execution_id, ref, attempt DESC
"""
_BUDGETS = """
SELECT name, sum(executions)::int AS executions, sum(retries)::int AS retries FROM execution_counts
 WHERE namespace = $1 AND name = ANY($2) AND bucket > now() - make_interval(secs => $3)
 GROUP BY name
"""
_HEAD_EVENTS = "SELECT execution_id FROM decide_queue WHERE due_at <= now() ORDER BY due_at, id LIMIT $1"
_DEFER = """
WITH consumed AS (DELETE FROM decide_queue WHERE execution_id = $1 AND due_at <= now())
INSERT INTO decide_queue (execution_id, event, due_at) VALUES ($1, 'retry_after_error', now() + $2)
"""


async def decide_batch(pool: asyncpg.Pool, config: DeciderConfig) -> int:
    """Decide one batch of due runs; return how many runs were decided."""
    async with pool.acquire() as conn:
        try:
            async with conn.transaction():
                outcome = await _decide(conn, await conn.fetch(_LOCK_DUE, config.batch_size), config)
        except Exception as error:  # noqa: BLE001 - whatever one run did, the others are decided one by one
            if _connection_lost(error, conn):
                raise
            log.warning("bulk decision failed (%s); deciding runs one by one", _describe(error))
            return await _decide_one_by_one(conn, config)
        _report(outcome, config)
        return outcome.decided


async def _decide_one_by_one(conn: asyncpg.Connection, config: DeciderConfig) -> int:
    """Isolate a run whose decision cannot be applied, so it cannot wedge the queue."""
    decided = 0
    candidates = list(dict.fromkeys(r["execution_id"] for r in await conn.fetch(_HEAD_EVENTS, config.batch_size)))
    for execution_id in candidates:
        try:
            async with conn.transaction():
                outcome = await _decide(conn, await conn.fetch(_LOCK_ONE, execution_id), config)
        except Exception as error:  # noqa: BLE001 - this run alone; see _connection_lost and _transient
            if _connection_lost(error, conn):
                raise
            if _transient(error):
                log.warning("run %s: deciding failed (%s); retrying it in %s", execution_id, error, _ERROR_BACKOFF)
                await conn.execute(_DEFER, execution_id, _ERROR_BACKOFF)
                continue
            log.error("run %s: deciding it failed, even alone", execution_id, exc_info=error)
            try:
                outcome = await _quarantine_alone(
                    conn, execution_id, f"deciding it failed, even alone: {_describe(error)}"
                )
            except Exception as failure:  # noqa: BLE001 - the others of the batch still go on
                if _connection_lost(failure, conn):
                    raise
                log.error(
                    "run %s: cannot be quarantined either (%s); retrying it in %s",
                    execution_id,
                    failure,
                    _ERROR_BACKOFF,
                )
                await conn.execute(_DEFER, execution_id, _ERROR_BACKOFF)
                continue
        _report(outcome, config)
        decided += outcome.decided
    return decided


@dataclass
class _Outcome:
    decided: int = 0
    quarantined: list[Quarantined] = field(default_factory=list)
    ended: list[tuple[str, FinishRun]] = field(default_factory=list)


def _report(outcome: _Outcome, config: DeciderConfig) -> None:
    """Logs and hooks, once the transaction that did it has committed."""
    for run_id, finish in outcome.ended:
        if finish.status is not RunStatus.COMPLETED:
            failed = f" (task {finish.failed_task_id})" if finish.failed_task_id else ""
            log.info("run %s %s%s: %s", run_id, finish.status.value, failed, finish.reason[:300])
    for quarantined in outcome.quarantined:
        log.error(
            "run %s (%s/%s) is quarantined: %s",
            quarantined.run_id,
            quarantined.namespace,
            quarantined.workflow,
            quarantined.reason,
        )
        if config.on_quarantine is not None:
            config.on_quarantine(quarantined)


# Connection trouble is the loop's to wait out; these classes of SQLSTATE pass
# by themselves (serialization failures and deadlocks, resources, locks,
# cancelled statements, system errors): the run is tried again later. Anything
# else a run's decision meets would meet it again: the run is quarantined.
_CONNECTION_STATES = ("08", "57P")
_TRANSIENT_STATES = ("40", "53", "55", "57", "58")


def _sqlstate(error: BaseException) -> str:
    return str(getattr(error, "sqlstate", "") or "") if isinstance(error, asyncpg.PostgresError) else ""


def _connection_lost(error: BaseException, conn: asyncpg.Connection) -> bool:
    # Not every InterfaceError: asyncpg's client-side DataError (a value that
    # does not fit its column) is one, and would meet the run again.
    if isinstance(error, OSError) or conn.is_closed():
        return True
    return _sqlstate(error).startswith(_CONNECTION_STATES)


def _transient(error: BaseException) -> bool:
    return _sqlstate(error).startswith(_TRANSIENT_STATES)


def _describe(error: BaseException) -> str:
    """The error for a reason or a log line: its type and the head of its
    message, never a payload (pydantic's input values are left out)."""
    if isinstance(error, ValidationError):
        text = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors())
    else:
        text = str(error)
    return f"{type(error).__name__}: {text}"[:_REASON_CHARS]


_QUARANTINE = """
WITH consumed AS (DELETE FROM decide_queue WHERE execution_id = ANY($1))
UPDATE executions e SET quarantined_at = now(), quarantine_reason = q.reason, mirror_seq = e.mirror_seq + 1
  FROM unnest($1::uuid[], $2::text[]) AS q(id, reason)
 WHERE e.id = q.id AND e.status = 'RUNNING' AND e.quarantined_at IS NULL
RETURNING e.id, e.namespace, e.workflow_name, q.reason
"""


async def quarantine_runs(conn: asyncpg.Connection, runs: list[tuple[uuid.UUID, str]]) -> list[Quarantined]:
    """Set runs aside with their reasons, consuming their decide events."""
    if not runs:
        return []
    # A text column holds no NUL; a reason quoting one must still be written.
    reasons = [r[1][:_REASON_CHARS].replace("\x00", "\\0") for r in runs]
    rows = await conn.fetch(_QUARANTINE, [r[0] for r in runs], reasons)
    return [Quarantined(str(r["id"]), r["namespace"], r["workflow_name"], r["reason"]) for r in rows]


async def _quarantine_alone(conn: asyncpg.Connection, execution_id: uuid.UUID, reason: str) -> _Outcome:
    async with conn.transaction():
        return _Outcome(quarantined=await quarantine_runs(conn, [(execution_id, reason)]))


async def _decide(conn: asyncpg.Connection, runs: list[asyncpg.Record], config: DeciderConfig) -> _Outcome:
    if not runs:
        return _Outcome()
    now: datetime.datetime = runs[0]["now"]
    applier = _Applier(now)
    rows_by_run, unreadable = await _task_rows(conn, [r["id"] for r in runs if not r["quarantined"]])
    live: list[tuple[asyncpg.Record, WorkflowSpec]] = []
    for run in runs:
        if run["quarantined"]:
            applier.set_aside(run)
        elif run["id"] in unreadable:
            applier.quarantine(run["id"], unreadable[run["id"]])
        else:
            try:
                live.append(
                    (run, _workflow(run["namespace"], run["workflow_name"], run["workflow_version"], run["spec"]))
                )
            except Exception as error:  # noqa: BLE001 - a version row missing or nothing can parse: that run alone
                applier.quarantine(
                    run["id"],
                    f"workflow {run['workflow_name']} version "
                    f"{run['workflow_version']} cannot be read: {_describe(error)}",
                )
    for run, snapshot in await _snapshots(conn, live, rows_by_run, config, applier):
        try:
            decision = decide(snapshot, _event_of(set(run["events"])), now, config.rng)
        except Exception as error:  # noqa: BLE001 - decide() is total; this guards that promise
            decision = Decision([Quarantine(f"the decider failed: {_describe(error)}")])
        quarantine = decision.quarantine()
        if quarantine is not None:
            applier.quarantine(run["id"], quarantine.reason)
            continue
        applier.add(snapshot, decision, mirrored=run["mirrored"])
        if config.on_decision is not None:
            config.on_decision(snapshot.id, decision)
    outcome = await applier.apply(conn, [event for run in runs for event in run["event_ids"]])
    outcome.decided = len(runs) - len(outcome.quarantined)
    return outcome


def _event_of(names: set[str]) -> Event:
    for candidate in (Event.TERMINATE, Event.STARTED, Event.TIMER, Event.CHILD_FINISHED, Event.ADMITTED):
        if candidate.value in names:
            return candidate
    return Event.FORCED if "forced" in names else Event.TASK_UPDATED


_TYPES = {t.value: t for t in TaskType}
_STATUSES = {s.value: s for s in TaskStatus}


def _task_row(row: asyncpg.Record) -> TaskRow:
    return TaskRow(
        id=str(row["id"]),
        ref=row["ref"],
        type=_TYPES[row["type"]],
        name=row["name"],
        status=_STATUSES[row["status"]],
        attempt=row["attempt"],
        input=row["input"],
        output=row["output"],
        reason=row["reason"],
        retry_after_seconds=row["retry_after_seconds"],
        schedule_to_close_at=row["close_deadline"],
        first_scheduled_at=row["first_scheduled_at"],
    )


async def _task_rows(
    conn: asyncpg.Connection, ids: list[uuid.UUID]
) -> tuple[dict[uuid.UUID, dict[str, TaskRow]], dict[uuid.UUID, str]]:
    """The latest rows of each run, and the runs with a row that cannot be read."""
    rows_by_run: dict[uuid.UUID, dict[str, TaskRow]] = defaultdict(dict)
    unreadable: dict[uuid.UUID, str] = {}
    if not ids:
        return rows_by_run, unreadable
    for row in await conn.fetch(_LATEST_TASKS, ids):
        try:
            rows_by_run[row["execution_id"]][row["ref"]] = _task_row(row)
        except Exception as error:  # noqa: BLE001 - a row nothing wrote this way: its run alone
            unreadable[row["execution_id"]] = (
                f"task {row['ref']} attempt {row['attempt']} ({row['id']}) cannot be read: {_describe(error)}"
            )
    return rows_by_run, unreadable


@dataclass(frozen=True)
class RunRef:
    """What ending a run needs to know of it."""

    id: str
    namespace: str
    workflow_name: str
    admission_limit: int | None = None  # rateLimitConfig.concurrentExecLimit

    @staticmethod
    def of(snapshot: RunSnapshot) -> RunRef:
        config = snapshot.workflow.rate_limit_config
        limit = config.concurrent_exec_limit if config is not None else None
        return RunRef(snapshot.id, snapshot.namespace, snapshot.workflow_name, limit)


async def _definitions(
    conn: asyncpg.Connection, config: DeciderConfig, namespace: str, names: set[str]
) -> dict[str, TaskDefinitionSpec] | str:
    """The namespace's definitions by task type, or why they cannot be read."""
    try:
        return await config.definitions.get_many(conn, namespace, names)
    except ValidationError as error:
        return f"a task definition of namespace {namespace} cannot be read: {_describe(error)}"


async def _snapshots(
    conn: asyncpg.Connection,
    live: list[tuple[asyncpg.Record, WorkflowSpec]],
    rows_by_run: Mapping[uuid.UUID, dict[str, TaskRow]],
    config: DeciderConfig,
    applier: _Applier,
) -> list[tuple[asyncpg.Record, RunSnapshot]]:
    """Each run with its snapshot; a run whose snapshot cannot be built is
    quarantined through `applier` instead."""
    names_by_run: dict[uuid.UUID, set[str]] = defaultdict(set)
    failing_by_ns: dict[str, set[str]] = defaultdict(set)
    for run, spec in live:
        names = names_by_run[run["id"]]
        for task in iter_tasks(spec.tasks):
            names.add(task.name)
            if task.type is TaskType.FORK_JOIN_DYNAMIC:
                fork = rows_by_run[run["id"]].get(task.task_reference_name)
                if fork is not None:
                    names.add(str(fork.output.get("forkTaskName", "")))
        for row in rows_by_run[run["id"]].values():
            if row.status.is_failure():
                failing_by_ns[run["namespace"]].add(row.name)
    definitions: dict[uuid.UUID, dict[str, TaskDefinitionSpec] | str] = {}
    for namespace in {run["namespace"] for run, _ in live}:
        of_namespace = [run for run, _ in live if run["namespace"] == namespace]
        found = await _definitions(conn, config, namespace, set().union(*(names_by_run[r["id"]] for r in of_namespace)))
        for run in of_namespace:  # one unreadable definition costs only the runs that use it
            definitions[run["id"]] = (
                found
                if not isinstance(found, str)
                else await _definitions(conn, config, namespace, names_by_run[run["id"]])
            )
    budgets: dict[str, dict[str, BudgetWindow]] = defaultdict(dict)
    for namespace, names in failing_by_ns.items():
        for row in await conn.fetch(_BUDGETS, namespace, list(names), WINDOW_SECONDS):
            budgets[namespace][row["name"]] = BudgetWindow(row["executions"], row["retries"])
    built: list[tuple[asyncpg.Record, RunSnapshot]] = []
    for run, spec in live:
        found = definitions[run["id"]]
        if isinstance(found, str):
            applier.quarantine(run["id"], found)
            continue
        try:
            snapshot = RunSnapshot(
                id=str(run["id"]),
                namespace=run["namespace"],
                workflow_name=run["workflow_name"],
                version=run["workflow_version"],
                workflow=spec,
                status=RunStatus(run["status"]),
                input=run["input"],
                tasks=rows_by_run[run["id"]],
                correlation_id=run["correlation_id"],
                evaluated=run["evaluated"],
                timeout_at=run["timeout_at"],
                terminate_requested=run["terminate_requested"],
                awaiting_admission=run["awaiting_admission"],
                definitions=found,
                defaults=config.defaults,
                budgets=budgets[run["namespace"]],
            )
        except Exception as error:  # noqa: BLE001 - a run row nothing wrote this way: that run alone
            applier.quarantine(run["id"], f"the run cannot be read: {_describe(error)}")
            continue
        built.append((run, snapshot))
    return built


_INSERT_TASKS = """
WITH inserted AS (
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
RETURNING namespace, name, attempt, type
)
-- The retry budget's window counts every attempt of a task type that runs work.
INSERT INTO execution_counts AS c (namespace, name, bucket, shard, executions, retries)
SELECT namespace, name, $26, $27, count(*), count(*) FILTER (WHERE attempt > 1)
  FROM inserted WHERE type IN ('SIMPLE', 'HTTP', 'HTTP_POLL', 'SUB_WORKFLOW')
 GROUP BY namespace, name
ON CONFLICT (namespace, name, bucket, shard) DO UPDATE
   SET executions = c.executions + EXCLUDED.executions, retries = c.retries + EXCLUDED.retries
"""
_UPDATE_TASK = """
UPDATE tasks SET status = $2, reason = $3, ended_at = coalesce(ended_at, now()) WHERE id = $1
"""
# Mark the runs decided, consume their events and wake the pollers of queues
# that got work, in one round trip. `notified` is read (count) so that it runs.
_MARK_DECIDED = f"""
WITH consumed AS (DELETE FROM decide_queue WHERE id = ANY($3)),
     notified AS (SELECT pg_notify('{executions.READY_CHANNEL}', queue) FROM unnest($4::text[]) AS queue)
UPDATE executions e SET evaluated = true, mirror_seq = e.mirror_seq + 1,
       timeout_at = coalesce(t.timeout_at, e.timeout_at)
  FROM unnest($1::uuid[], $2::timestamptz[]) AS t(id, timeout_at)
 WHERE e.id = t.id AND (SELECT count(*) FROM notified) >= 0
"""


class _Applier:
    """Collects the commands of a batch and applies them in bulk."""

    def __init__(self, now: datetime.datetime) -> None:
        self.now = now
        self.tasks: list[tuple[Any, ...]] = []
        self.updates: list[tuple[Any, ...]] = []
        self.decided: list[tuple[uuid.UUID, datetime.datetime | None]] = []
        self.finishes: list[tuple[RunRef, FinishRun]] = []
        self.quarantines: list[tuple[uuid.UUID, str]] = []
        self.children: list[tuple[RunSnapshot, StartChild, uuid.UUID]] = []
        self.ready: set[tuple[str, str]] = set()
        self.shard = random.randrange(_SHARDS)
        self._task_index: dict[tuple[str, str, int], dict[str, WorkflowTask]] = {}

    def add(self, snapshot: RunSnapshot, decision: Decision, mirrored: bool = False) -> None:
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
                self.finishes.append((RunRef.of(snapshot), command))
        finishing = bool(self.finishes) and self.finishes[-1][0].id == snapshot.id
        # Write the run's row only when something about it changed: each write is a new row version.
        if not finishing and (not snapshot.evaluated or timeout_at is not None or (mirrored and decision.commands)):
            self.decided.append((run_id, timeout_at))

    def quarantine(self, run_id: uuid.UUID, reason: str) -> None:
        self.quarantines.append((run_id, reason))

    def set_aside(self, run: asyncpg.Record) -> None:
        """A quarantined run is not decided: its events are consumed, and only
        a terminate request acts on it, without reading its spec or tasks."""
        if run["terminate_requested"] is not None:
            ref = RunRef(str(run["id"]), run["namespace"], run["workflow_name"], _admission_limit(run["spec"]))
            self.finishes.append((ref, FinishRun(RunStatus.TERMINATED, run["terminate_requested"])))

    def _tasks_by_ref(self, snapshot: RunSnapshot) -> dict[str, WorkflowTask]:
        key = (snapshot.namespace, snapshot.workflow_name, snapshot.version)
        found = self._task_index.get(key)
        if found is None:
            found = self._task_index[key] = {t.task_reference_name: t for t in iter_tasks(snapshot.workflow.tasks)}
        return found

    def _schedule(self, snapshot: RunSnapshot, command: ScheduleTask) -> uuid.UUID:
        task_id = uuid.uuid4()
        timeouts = resolve(
            snapshot.definitions.get(command.name), snapshot.defaults, self._tasks_by_ref(snapshot).get(command.ref)
        ).timeouts
        d = command.deadlines
        self.tasks.append(
            (
                task_id,
                uuid.UUID(snapshot.id),
                snapshot.namespace,
                command.ref,
                command.type.value,
                command.name,
                command.attempt,
                command.status.value,
                command.input,
                {},
                "",
                command.first_scheduled_at,
                command.available_at,
                None,
                d.schedule_to_close,
                timeouts.schedule_to_start,
                timeouts.start_to_close,
                timeouts.timeout_seconds,
                timeouts.heartbeat,
                timeouts.response_timeout,
                timeouts.policy.value,
                d.schedule_to_start,
                d.total,
                d.schedule_to_close,
                d.wait_until,
            )
        )
        if command.type is TaskType.SIMPLE:
            # Delayed tasks too: a waiting poll then knows exactly how long to sleep.
            self.ready.add((snapshot.namespace, command.name))
        elif command.type in (TaskType.HTTP, TaskType.HTTP_POLL):
            self.ready.add(SYSTEM_WAKE)
        return task_id

    def _record(self, snapshot: RunSnapshot, command: RecordTask) -> uuid.UUID:
        task_id = uuid.uuid4()
        self.tasks.append(
            (
                task_id,
                uuid.UUID(snapshot.id),
                snapshot.namespace,
                command.ref,
                command.type.value,
                command.name,
                command.attempt,
                command.status.value,
                command.input,
                command.output,
                command.reason,
                self.now,
                self.now,
                self.now,
                None,
                0,
                0,
                0,
                0,
                3600,
                "TIME_OUT_WF",
                None,
                None,
                None,
                None,
            )
        )
        return task_id

    async def apply(self, conn: asyncpg.Connection, event_ids: list[int]) -> _Outcome:
        outcome = _Outcome(quarantined=await quarantine_runs(conn, self.quarantines))
        if self.tasks:
            await conn.execute(_INSERT_TASKS, *map(list, zip(*self.tasks, strict=False)), _bucket(self.now), self.shard)
        if self.updates:
            await conn.executemany(_UPDATE_TASK, self.updates)
        for snapshot, child, parent_task in self.children:
            await _start_child(conn, snapshot, child, parent_task)
        if self.finishes:
            ended = set(await finish_runs(conn, self.finishes))
            outcome.ended = [(ref.id, finish) for ref, finish in self.finishes if ref.id in ended]
        await conn.execute(
            _MARK_DECIDED,
            [d[0] for d in self.decided],
            [d[1] for d in self.decided],
            event_ids,
            [f"{namespace}/{name}" for namespace, name in sorted(self.ready)],
        )
        return outcome


def _admission_limit(raw_spec: str) -> int | None:
    """rateLimitConfig.concurrentExecLimit from a spec that may not parse; None
    leaves the admission of waiting runs to the sweeper's rebalance."""
    try:
        limit = json.loads(raw_spec)["rateLimitConfig"]["concurrentExecLimit"]
    except (ValueError, TypeError, KeyError):
        return None
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None


def _bucket(now: datetime.datetime) -> datetime.datetime:
    epoch = int(now.timestamp())
    return datetime.datetime.fromtimestamp(epoch - epoch % _BUCKET_SECONDS, tz=datetime.UTC)


async def _start_child(
    conn: asyncpg.Connection, parent: RunSnapshot, child: StartChild, parent_task: uuid.UUID
) -> None:
    outcome = await executions.start_run(
        conn,
        parent.namespace,
        child.workflow,
        child.version,
        child.input,
        parent=(uuid.UUID(parent.id), parent_task),
    )
    if isinstance(outcome, executions.Started):
        await conn.execute("UPDATE tasks SET child_execution_id = $2 WHERE id = $1", parent_task, uuid.UUID(outcome.id))
        return
    # The child could not start: the SUB_WORKFLOW task fails terminally, the decider takes it from there.
    await conn.execute(
        "UPDATE tasks SET status = 'FAILED_WITH_TERMINAL_ERROR', reason = $2, ended_at = now() WHERE id = $1",
        parent_task,
        f"SUB_WORKFLOW: {outcome.message}",
    )
    await executions.enqueue_decide(conn, parent.id, "child_finished")


_FINISH = """
UPDATE executions e
   SET status = f.status, reason = f.reason, output = f.output, failed_task_id = f.failed_task_id,
       ended_at = now(), timeout_at = NULL, mirror_seq = e.mirror_seq + 1, evaluated = true
  FROM unnest($1::uuid[], $2::text[], $3::text[], $4::jsonb[], $5::uuid[])
       AS f(id, status, reason, output, failed_task_id)
 WHERE e.id = f.id AND e.status = 'RUNNING'
RETURNING e.id, e.parent_execution_id, e.parent_task_id, e.admission_key, e.awaiting_admission
"""
_CANCEL_ACTIVE = f"""
WITH cancelled AS (
    UPDATE tasks SET status = 'CANCELED', ended_at = now(), reason = 'run ended',
           schedule_to_start_at = NULL, start_to_close_at = NULL, total_at = NULL, heartbeat_at = NULL,
           lease_expires_at = NULL, schedule_to_close_at = NULL, wait_until = NULL
     WHERE execution_id = ANY($1) AND status IN ('SCHEDULED', 'IN_PROGRESS')
    RETURNING child_execution_id, namespace, name, CASE WHEN status = 'CANCELED' THEN holds END AS holds
), freed AS ({executions.released("cancelled")}
)
SELECT child_execution_id, (SELECT count(*) FROM freed) FROM cancelled
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


async def finish_runs(conn: asyncpg.Connection, finishes: list[tuple[RunRef, FinishRun]]) -> list[str]:
    """End runs and everything hanging off them, in the decider's transaction:
    cancel their active tasks, terminate their child runs, tell their parents,
    start failure workflows. The common case (no parent, no children, no
    failure workflow) costs two statements for the whole batch. Returns the ids
    of the runs that ended (a run that had already ended is left alone)."""
    ended = {
        row["id"]: row
        for row in await conn.fetch(
            _FINISH,
            [uuid.UUID(r.id) for r, _ in finishes],
            [f.status.value for _, f in finishes],
            [f.reason for _, f in finishes],
            [f.output for _, f in finishes],
            [uuid.UUID(f.failed_task_id) if f.failed_task_id else None for _, f in finishes],
        )
    }
    if not ended:
        return []
    cancelled = await conn.fetch(_CANCEL_ACTIVE, list(ended))
    children = [r["child_execution_id"] for r in cancelled if r["child_execution_id"] is not None]
    if children:
        stopped = await conn.fetch(_TERMINATE_CHILDREN, children, "the parent run ended")
        await executions.enqueue_decides(conn, [r["id"] for r in stopped], "terminate")
    admitted: list[uuid.UUID] = []
    for run, finish in finishes:
        row = ended.get(uuid.UUID(run.id))
        if row is None:
            continue
        limit = run.admission_limit
        if row["admission_key"] is not None and not row["awaiting_admission"] and limit is not None:
            # A holder finished: the oldest run waiting on its key goes next.
            admitted += await admission.admit_waiting(
                conn, run.namespace, run.workflow_name, row["admission_key"], limit
            )
        if row["parent_task_id"] is not None:
            ok = finish.status is RunStatus.COMPLETED
            status = TaskStatus.COMPLETED if ok else TaskStatus.FAILED
            reason = "" if ok else f"sub-workflow {run.id} {finish.status.value}: {finish.reason}"
            await conn.execute(_NOTIFY_PARENT_TASK, row["parent_task_id"], status.value, finish.output, reason)
            await executions.enqueue_decide(conn, row["parent_execution_id"], "child_finished")
        if finish.failure_workflow:
            started = await executions.start_run(
                conn,
                run.namespace,
                finish.failure_workflow,
                None,
                {
                    "workflowId": run.id,
                    "workflowName": run.workflow_name,
                    "reason": finish.reason,
                    "failureStatus": finish.status.value,
                    "failureTaskId": finish.failed_task_id,
                },
            )
            if not isinstance(started, executions.Started):
                log.warning(
                    "run %s: failureWorkflow %s not started: %s", run.id, finish.failure_workflow, started.message
                )
    await executions.enqueue_decides(conn, admitted, "admitted")
    return [str(run_id) for run_id in ended]
