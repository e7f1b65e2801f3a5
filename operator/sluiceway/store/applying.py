"""Applying the decisions of a pass: the commands of every run it decided are
collected (`Applier.add`) and written with a few bulk statements for the
whole batch (`Applier.apply`): new task rows, changed ones, pruned loop
iterations, runs to decide again, child runs, run endings, quarantines; then
the runs are marked decided, their events consumed and the queues that got
work woken, in one round trip.

Every bulk statement takes its rows as frozen dataclasses, one field per
column (store.sql: `unnest`, `arrays`, `parameters`)."""

from __future__ import annotations

import datetime
import json
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Protocol

import asyncpg

from sluiceway.engine.commands import (
    AdmitNext,
    ArmChainDeadline,
    ArmRunTimeout,
    ContinueAsNew,
    DecideAgain,
    Decision,
    FinishRun,
    NotifyParent,
    PruneIterations,
    RecordTask,
    ScheduleTask,
    StartChild,
    StartFailureWorkflow,
    UpdateTask,
)
from sluiceway.engine.decider import consequences
from sluiceway.engine.snapshot import RunLinks, RunSnapshot
from sluiceway.model.execution import RunStatus, TaskStatus
from sluiceway.model.workflow import Executor, RateLimitConfig, TaskType
from sluiceway.store import messages, sql, wakeups
from sluiceway.store.endings import DEFAULT_RETENTION_SECONDS, Finishing, finish_runs, start_child
from sluiceway.store.quarantining import Quarantined, SetAside, quarantine_runs
from sluiceway.store.snapshots import str_or_none
from sluiceway.store.sql import types_where
from sluiceway.store.wakeups import Queue

_BUCKET_SECONDS = 10


@dataclass(frozen=True)
class NewTask:
    """A task row the decision writes (_INSERT_TASKS): one field per column,
    but `budget`, which only bounds the deadlines as the row is inserted."""

    id: sql.Uuid
    execution_id: sql.Uuid
    namespace: sql.Text
    ref: sql.Text
    type: sql.Text
    name: sql.Text
    attempt: sql.Int
    status: sql.Text
    input: sql.Json
    output: sql.Json
    reason: sql.Text
    first_scheduled_at: sql.Instant
    available_at: sql.Instant
    ended_at: sql.Instant | None
    close_deadline: sql.Instant | None
    schedule_to_start_timeout: sql.Int
    start_to_close_timeout: sql.Int
    timeout_seconds: sql.Int
    heartbeat_timeout: sql.Int
    response_timeout: sql.Int
    timeout_policy: sql.Text
    schedule_to_start_at: sql.Instant | None
    total_at: sql.Instant | None
    schedule_to_close_at: sql.Instant | None
    wait_until: sql.Instant | None
    executor: sql.Text
    loop_ref: sql.Text | None
    iteration: sql.Int | None
    priority: sql.Int
    # A first attempt of an indefinite task: its deadlines are the insert's
    # now() plus this many seconds (the database's clock), if earlier. 0: none.
    budget: sql.Int


@dataclass(frozen=True)
class _TaskChange:
    """A row of _UPDATE_TASK."""

    id: sql.Uuid
    status: sql.Text
    reason: sql.Text
    output: sql.Json | None  # replaces the output when set


@dataclass(frozen=True)
class _Prune:
    """A row of _PRUNE: a DO_WHILE's iterations before `before` go."""

    execution_id: sql.Uuid
    loop_ref: sql.Text
    before: sql.Int


@dataclass(frozen=True)
class _Marked:
    """A run decided (_MARK_DECIDED), with the deadlines its decision armed."""

    id: sql.Uuid
    timeout_at: sql.Instant | None
    chain_deadline_at: sql.Instant | None


# An indefinite task's first attempt carries its time budget: its deadline is
# the insert's now() plus the budget, if earlier than the one it has. $1: the
# counters' bucket; the tasks from $2 on.
_INSERT_TASKS = f"""
WITH inserted AS (
INSERT INTO tasks (id, execution_id, namespace, ref, type, name, attempt, status, input, output, reason,
                   first_scheduled_at, available_at, ended_at, close_deadline,
                   schedule_to_start_timeout, start_to_close_timeout, timeout_seconds, heartbeat_timeout,
                   response_timeout, timeout_policy,
                   schedule_to_start_at, total_at, schedule_to_close_at, wait_until, executor, loop_ref, iteration,
                   priority)
SELECT u.id, u.execution_id, u.namespace, u.ref, u.type, u.name, u.attempt, u.status, u.input, u.output, u.reason,
       u.first_scheduled_at, u.available_at, u.ended_at,
       CASE WHEN u.budget > 0 THEN least(u.close_deadline, now() + make_interval(secs => u.budget))
            ELSE u.close_deadline END,
       u.schedule_to_start_timeout, u.start_to_close_timeout, u.timeout_seconds, u.heartbeat_timeout,
       u.response_timeout, u.timeout_policy, u.schedule_to_start_at, u.total_at,
       CASE WHEN u.budget > 0 THEN least(u.schedule_to_close_at, now() + make_interval(secs => u.budget))
            ELSE u.schedule_to_close_at END,
       u.wait_until, u.executor, u.loop_ref, u.iteration, u.priority
  FROM {sql.unnest(NewTask, "u", first=2)}
ON CONFLICT (execution_id, ref, attempt) DO NOTHING
RETURNING namespace, name, attempt, type
)
-- The retry budget's window counts every attempt of a task type that runs work,
-- sharded by connection: every start and result transaction that decides inline
-- writes these counters, and no two transactions open at once share a shard
-- (with a few random shards they queued on one another's rows until commit).
INSERT INTO execution_counts AS c (namespace, name, bucket, shard, executions, retries)
SELECT namespace, name, $1, pg_backend_pid() % 32767, count(*), count(*) FILTER (WHERE attempt > 1)
  FROM inserted WHERE type IN {types_where(TaskType.counts_in_retry_budget)}
 GROUP BY namespace, name
 ORDER BY namespace, name
ON CONFLICT (namespace, name, bucket, shard) DO UPDATE
   SET executions = c.executions + EXCLUDED.executions, retries = c.retries + EXCLUDED.retries
"""
_UPDATE_TASK = """
UPDATE tasks SET status = $2, reason = $3, output = coalesce($4::jsonb, output),
       ended_at = CASE WHEN $2 IN ('SCHEDULED', 'IN_PROGRESS') THEN NULL ELSE coalesce(ended_at, now()) END
 WHERE id = $1
"""
_PRUNE = "DELETE FROM tasks WHERE execution_id = $1 AND loop_ref = $2 AND iteration < $3"
_DECIDE_AGAIN = "INSERT INTO decide_queue (execution_id, event) SELECT unnest($1::uuid[]), 'continue'"
# Mark the runs decided, consume their events and wake the pollers of queues
# that got work, in one round trip. `notified` is read (count) so that it runs.
_MARK_DECIDED = f"""
WITH consumed AS (DELETE FROM decide_queue WHERE id = ANY($4)),
     notified AS (SELECT {wakeups.notify_ready_sql("queue")} FROM unnest($5::text[]) AS queue)
UPDATE executions e SET evaluated = true, mirror_seq = e.mirror_seq + (e.resource_name IS NOT NULL)::int,
       timeout_at = coalesce(t.timeout_at, e.timeout_at),
       chain_deadline_at = coalesce(e.chain_deadline_at, t.chain_deadline_at)
  FROM {sql.unnest(_Marked, "t")}
 WHERE e.id = t.id AND (SELECT count(*) FROM notified) >= 0
"""


class Leaser(Protocol):
    """Leases new tasks to this process's waiting polls (store.deciding's matcher)."""

    async def lease(self, conn: asyncpg.Connection, tasks: dict[Queue, int]) -> set[str]:
        """Lease up to `tasks` (new tasks per queue); the ids of every task leased."""
        ...


@dataclass
class Applied:
    """What applying a batch did, for its report."""

    quarantined: list[Quarantined] = field(default_factory=list)
    ended: list[tuple[str, FinishRun]] = field(default_factory=list)
    ready: set[Queue] = field(default_factory=set)  # the queues woken


class Applier:
    """Collects the commands of a batch and applies them in bulk."""

    def __init__(
        self, now: datetime.datetime, retention_seconds: int = DEFAULT_RETENTION_SECONDS, inline: bool = False
    ) -> None:
        self.now = now
        self.retention_seconds = retention_seconds
        # Inline, a run the loop would quarantine or set aside is left to the loop instead.
        self.inline = inline
        self.left: set[uuid.UUID] = set()
        self.tasks: list[NewTask] = []
        self.updates: list[_TaskChange] = []
        self.decided: list[_Marked] = []
        self.finishes: list[Finishing] = []
        self.quarantines: list[SetAside] = []
        self.children: list[tuple[RunSnapshot, StartChild, uuid.UUID]] = []
        self.prunes: list[_Prune] = []
        self.again: list[uuid.UUID] = []
        self.waiting_for_messages: list[uuid.UUID] = []
        self.ready: set[Queue] = set()
        # The worker tasks scheduled, per queue: those leasable now (by id), and the queues of those delayed.
        self.leasable: dict[Queue, list[uuid.UUID]] = defaultdict(list)
        self.delayed: set[Queue] = set()

    def add(self, snapshot: RunSnapshot, decision: Decision, mirrored: bool = False) -> None:
        run_id = uuid.UUID(snapshot.id)
        timeout_at: datetime.datetime | None = None
        chain_deadline_at: datetime.datetime | None = None
        ids_by_ref: dict[str, uuid.UUID] = {}
        ending: Finishing | None = None
        for command in decision.commands:
            if isinstance(command, ScheduleTask):
                ids_by_ref[command.ref] = self._schedule(snapshot, command)
            elif isinstance(command, RecordTask):
                ids_by_ref[command.ref] = self._record(snapshot, command)
            elif isinstance(command, UpdateTask):
                change = _TaskChange(uuid.UUID(command.task_id), command.status.value, command.reason, command.output)
                self.updates.append(change)
            elif isinstance(command, PruneIterations):
                self.prunes.append(_Prune(run_id, command.loop, command.before))
            elif isinstance(command, DecideAgain):
                self.again.append(run_id)
            elif isinstance(command, ArmRunTimeout):
                timeout_at = command.at
            elif isinstance(command, ArmChainDeadline):
                chain_deadline_at = command.at
            elif isinstance(command, StartChild):
                self.children.append((snapshot, command, ids_by_ref[command.parent_ref]))
            elif isinstance(command, FinishRun):
                ending = Finishing(snapshot.id, snapshot.namespace, command)
                self.finishes.append(ending)
            elif isinstance(command, (NotifyParent, AdmitNext, StartFailureWorkflow, ContinueAsNew)) and ending:
                ending.consequences.append(command)  # the decider emits them after its FinishRun
        # Write the run's row only when something about it changed: each write is a new row version.
        if ending is None and (not snapshot.evaluated or timeout_at is not None or (mirrored and decision.commands)):
            self.decided.append(_Marked(run_id, timeout_at, chain_deadline_at))

    def take_marks(self) -> list[_Marked]:
        """The marks of the runs decided so far, for the caller to write with
        their rows (runs not yet written: a start's first decisions); applying
        then writes none."""
        marks, self.decided = self.decided, []
        return marks

    def quarantine(self, run_id: uuid.UUID, reason: str) -> None:
        if self.inline:
            self.left.add(run_id)
        else:
            self.quarantines.append(SetAside(run_id, reason))

    def set_aside(self, run: asyncpg.Record, raw_spec: str | None) -> None:
        """A quarantined run is not decided: its events are consumed, and only
        a terminate request acts on it, without reading its spec or tasks."""
        if self.inline:
            self.left.add(run["id"])
        elif run["terminate_requested"] is not None:
            links = RunLinks(
                id=str(run["id"]),
                workflow_name=run["workflow_name"],
                parent_run_id=str_or_none(run["parent_execution_id"]),
                parent_task_id=str_or_none(run["parent_task_id"]),
                admission_key=run["admission_key"],
                awaiting_admission=run["awaiting_admission"],
                admission_limit=_admission_limit(raw_spec),
            )
            finish = FinishRun(RunStatus.TERMINATED, run["terminate_requested"])
            self.finishes.append(Finishing(links.id, run["namespace"], finish, consequences(links, finish)))

    def _schedule(self, snapshot: RunSnapshot, command: ScheduleTask) -> uuid.UUID:
        task_id = uuid.uuid4()
        timeouts = command.timeouts
        d = command.deadlines
        executor = command.type.executor()
        self.tasks.append(
            NewTask(
                id=task_id,
                execution_id=uuid.UUID(snapshot.id),
                namespace=snapshot.namespace,
                ref=command.ref,
                type=command.type.value,
                name=command.name,
                attempt=command.attempt,
                status=command.status.value,
                input=command.input,
                output={},
                reason="",
                first_scheduled_at=command.first_scheduled_at,
                available_at=command.available_at,
                ended_at=None,
                close_deadline=d.schedule_to_close,
                schedule_to_start_timeout=timeouts.schedule_to_start,
                start_to_close_timeout=timeouts.start_to_close,
                timeout_seconds=timeouts.timeout_seconds,
                heartbeat_timeout=timeouts.heartbeat,
                response_timeout=timeouts.response_timeout,
                timeout_policy=timeouts.policy.value,
                schedule_to_start_at=d.schedule_to_start,
                total_at=d.total,
                schedule_to_close_at=d.schedule_to_close,
                wait_until=d.wait_until,
                executor=executor.value,
                loop_ref=command.loop,
                iteration=command.iteration,
                priority=command.priority,
                budget=command.time_budget,
            )
        )
        if command.type is TaskType.PULL_WORKFLOW_MESSAGES:
            self.waiting_for_messages.append(uuid.UUID(snapshot.id))
        if executor is Executor.WORKER:
            # Delayed tasks too: a waiting poll then knows exactly how long to sleep.
            self.ready.add((snapshot.namespace, command.name))
            if command.status is TaskStatus.SCHEDULED and command.available_at <= self.now:
                self.leasable[(snapshot.namespace, command.name)].append(task_id)
            else:
                self.delayed.add((snapshot.namespace, command.name))
        elif executor is Executor.SYSTEM:
            self.ready.add(wakeups.SYSTEM_WAKE)
        return task_id

    def _record(self, snapshot: RunSnapshot, command: RecordTask) -> uuid.UUID:
        """A task the decider ran itself: no timers, never leased."""
        task_id = uuid.uuid4()
        self.tasks.append(
            NewTask(
                id=task_id,
                execution_id=uuid.UUID(snapshot.id),
                namespace=snapshot.namespace,
                ref=command.ref,
                type=command.type.value,
                name=command.name,
                attempt=command.attempt,
                status=command.status.value,
                input=command.input,
                output=command.output,
                reason=command.reason,
                first_scheduled_at=self.now,
                available_at=self.now,
                ended_at=self.now if command.status.is_terminal() else None,
                close_deadline=None,
                schedule_to_start_timeout=0,
                start_to_close_timeout=0,
                timeout_seconds=0,
                heartbeat_timeout=0,
                response_timeout=3600,
                timeout_policy="TIME_OUT_WF",
                schedule_to_start_at=None,
                total_at=None,
                schedule_to_close_at=None,
                wait_until=None,
                executor=command.type.executor().value,
                loop_ref=command.loop,
                iteration=command.iteration,
                priority=snapshot.priority,
                budget=0,
            )
        )
        return task_id

    async def apply(self, conn: asyncpg.Connection, event_ids: list[int], leaser: Leaser | None = None) -> Applied:
        """Write it all and consume `event_ids`; with a `leaser`, the worker
        tasks leasable now go to waiting polls where they can."""
        await messages.lock(conn, self.waiting_for_messages)  # first: see store.messages
        applied = Applied(quarantined=await quarantine_runs(conn, self.quarantines))
        if self.tasks:
            await conn.execute(_INSERT_TASKS, _bucket(self.now), *sql.arrays(self.tasks, NewTask))
        if self.updates:
            await conn.executemany(_UPDATE_TASK, [sql.parameters(change) for change in self.updates])
        if self.prunes:
            await conn.executemany(_PRUNE, [sql.parameters(prune) for prune in self.prunes])
        if self.again:
            await conn.execute(_DECIDE_AGAIN, self.again)
        if self.waiting_for_messages:
            await messages.deliver(conn, self.waiting_for_messages)
        for snapshot, child, parent_task in self.children:
            await start_child(conn, snapshot, child, parent_task)
        if self.finishes:
            ended = set(await finish_runs(conn, self.finishes, self.retention_seconds))
            applied.ended = [(f.run_id, f.finish) for f in self.finishes if f.run_id in ended]
        ready = self.ready
        if leaser is not None and self.leasable:
            leased = await leaser.lease(conn, {queue: len(ids) for queue, ids in self.leasable.items()})
            # A queue whose new tasks all went to waiting polls has nothing for anyone else to wake for.
            ready = ready - {
                queue
                for queue, ids in self.leasable.items()
                if queue not in self.delayed and all(str(task_id) in leased for task_id in ids)
            }
        await conn.execute(_MARK_DECIDED, *sql.arrays(self.decided, _Marked), event_ids, wakeups.ready_payloads(ready))
        applied.ready = ready
        return applied


def _admission_limit(raw_spec: str | None) -> int | None:
    """rateLimitConfig.concurrentExecLimit from a spec that may not parse (its
    version row may even be missing); None leaves the admission of waiting
    runs to the sweeper's rebalance."""
    try:
        stored = json.loads(raw_spec) if raw_spec is not None else None
    except ValueError:
        return None
    return RateLimitConfig.limit_in(stored.get("rateLimitConfig")) if isinstance(stored, dict) else None


def _bucket(now: datetime.datetime) -> datetime.datetime:
    epoch = int(now.timestamp())
    return datetime.datetime.fromtimestamp(epoch - epoch % _BUCKET_SECONDS, tz=datetime.UTC)
