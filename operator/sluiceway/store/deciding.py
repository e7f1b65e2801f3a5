"""The decider's transaction: take runs from the decide queue, load their
snapshots, call the pure decider, apply its commands, consume the events.

Several replicas run this at once: a run is decided by whoever locks its
`executions` row (`FOR UPDATE SKIP LOCKED`); results and timers only ever
insert into the decide queue, so they never wait on the decider's locks.
Starts and results may also decide the runs they queued in their own
transaction (`decide_inline`): only runs whose decision touches no other run
or gate, never waiting for a lock; whatever they leave stays queued here.
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
import json
import logging
import random
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import asyncpg
from pydantic import ValidationError

from sluiceway.controls.budget import WINDOW_SECONDS, BudgetWindow
from sluiceway.controls.policy import TaskPolicy
from sluiceway.engine.commands import (
    AdmitNext,
    ArmChainDeadline,
    ArmRunTimeout,
    Consequence,
    ContinueAsNew,
    DecideAgain,
    Decision,
    FinishRun,
    NotifyParent,
    PruneIterations,
    Quarantine,
    RecordTask,
    ScheduleTask,
    StartChild,
    StartFailureWorkflow,
    UpdateTask,
)
from sluiceway.engine.decider import Event, consequences, decide
from sluiceway.engine.snapshot import RunLinks, RunSnapshot, TaskRow
from sluiceway.model.execution import DelaySource, RunStatus, TaskOverride, TaskStatus
from sluiceway.model.taskdefinition import RetryKind
from sluiceway.model.workflow import Executor, TaskType, WorkflowSpec
from sluiceway.observability import tracing
from sluiceway.observability.logs import about
from sluiceway.store import admission, diagnostics, executions, matching, messages, wakeups, workflows
from sluiceway.store.database import Pool
from sluiceway.store.policies import Policies
from sluiceway.store.sql import types_where

log = logging.getLogger(__name__)

_BUCKET_SECONDS = 10
_ERROR_BACKOFF = datetime.timedelta(seconds=30)
_REASON_CHARS = 2000  # a quarantine reason is for people; the head of an error says enough


@dataclass(frozen=True)
class Quarantined:
    """A run set aside by the decider, reported once it is committed."""

    run_id: str
    namespace: str
    workflow: str
    reason: str


# Finished runs are deleted this long after they end unless their workflow
# (spec.retention) or WorkflowRun (ttlSecondsAfterFinished) says otherwise; 0 keeps them.
DEFAULT_RETENTION_SECONDS = 30 * 86_400


@dataclass
class DeciderConfig:
    batch_size: int = 128
    retention_seconds: int = DEFAULT_RETENTION_SECONDS
    rng: random.Random = field(default_factory=random.Random)
    policies: Policies = field(default_factory=Policies)  # the process's one, with the operator defaults
    on_decision: Callable[[RunSnapshot, Decision], None] | None = None  # metrics and tracing hooks
    on_quarantine: Callable[[Quarantined], None] | None = None
    # Told, once the batch committed, which queues (namespace, task type) got
    # work: this process's long polls wake at once, without waiting for the
    # NOTIFY (which still goes out, for the other replicas) to come back.
    on_ready: Callable[[set[tuple[str, str]]], None] | None = None
    # This process's waiting polls: a pass leases the tasks it schedules to
    # them in its own transaction (store.matching). None: they wake and lease.
    offers: matching.Offers | None = None


# Lock due runs and read their events in one round trip.
_LOCK_DUE = """
SELECT now() AS now, e.id, e.namespace, e.workflow_name, e.workflow_version, e.status, e.input,
       e.correlation_id, e.evaluated, e.timeout_at, e.terminate_requested, e.awaiting_admission,
       e.admission_key, e.parent_execution_id, e.parent_task_id, e.task_overrides,
       e.resource_name IS NOT NULL AS mirrored, e.quarantined_at IS NOT NULL AS quarantined,
       v.created_at AS version_created_at,
       e.paused_at IS NOT NULL AS paused, e.superseded, e.input_overrides,
       e.chain_id, e.previous_run_id, e.chain_deadline_at,
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
# The runs a start or a result just queued, those of them an inline decision
# may take: no parent, child or admission to tell (their rows are shared with
# other runs), nothing set aside, and never one another transaction holds.
# Nor a run with tasks still in flight (a fork's other branches): each of their
# results would decide it again, where the loop decides it once for many.
_LOCK_GIVEN = _LOCK_DUE.replace(
    """e.id = ANY(ARRAY(SELECT execution_id FROM decide_queue WHERE due_at <= now() ORDER BY due_at, id
                        LIMIT $1 * 4))""",
    """e.id = ANY($1::uuid[]) AND e.parent_execution_id IS NULL AND e.admission_key IS NULL
   AND NOT e.awaiting_admission AND e.quarantined_at IS NULL AND e.terminate_requested IS NULL
   AND EXISTS (SELECT 1 FROM decide_queue q WHERE q.execution_id = e.id AND q.due_at <= now())
   AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.execution_id = e.id AND t.status IN ('SCHEDULED', 'IN_PROGRESS'))""",
).replace(" LIMIT $1\n", "\n")
_LATEST_TASKS = """
SELECT DISTINCT ON (execution_id, ref)
       id, execution_id, ref, type, name, status, attempt, input, output, reason, retry_after_seconds,
       close_deadline, first_scheduled_at, retry_kind, retry_after_source, loop_ref, iteration
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


async def decide_batch(pool: Pool, config: DeciderConfig) -> int:
    """Decide one batch of due runs; return how many runs were decided."""
    async with pool.acquire() as conn:
        matcher = _Matcher(config.offers, config.policies) if config.offers is not None else None
        try:
            async with conn.transaction():
                runs = await conn.fetch(_LOCK_DUE, config.batch_size)
                # A full pass means more runs wait to be decided: leasing to the
                # polls would lengthen every pass, and the polls lease as cheaply.
                outcome = await _decide(conn, runs, config, matcher=matcher if len(runs) < config.batch_size else None)
        except BaseException as error:  # noqa: BLE001 - a claimed poll is answered whatever happens; see below
            if matcher is not None:
                matching.settle(matcher.claimed, committed=False)
            if not isinstance(error, Exception) or _connection_lost(error, conn):
                raise
            log.warning("bulk decision failed (%s); deciding runs one by one", _describe(error))
            return await _decide_one_by_one(conn, config)
        if matcher is not None:
            matching.settle(matcher.claimed, committed=True)
        report(outcome, config)
        return outcome.decided


@dataclass
class _Matcher:
    """A decider pass's leases to this process's waiting polls (store.matching):
    the offers it claimed, which decide_batch settles however the pass ends."""

    offers: matching.Offers
    policies: Policies
    unmatched: set[matching.Queue] = field(default_factory=set)  # queues the caller leases from itself
    claimed: list[matching.Offer] = field(default_factory=list)

    async def lease(self, conn: asyncpg.Connection, tasks: dict[matching.Queue, int]) -> set[str]:
        """Lease waiting polls the new `tasks` (per queue) of ungated types; the ids of every task leased."""
        tasks = {queue: count for queue, count in tasks.items() if queue not in self.unmatched}
        ungated = await self._ungated(conn, tasks)
        claimed = self.offers.claim(ungated)
        self.claimed.extend(claimed)
        await matching.lease_to(conn, claimed, ungated)
        return {lease.task_id for offer in claimed for lease in offer.leases}

    async def _ungated(self, conn: asyncpg.Connection, tasks: dict[matching.Queue, int]) -> dict[matching.Queue, int]:
        """The queues of `tasks` whose type has no gate now: only those are leased
        to a waiting poll outside the gates' locks. A namespace whose definitions
        cannot be read is left to the polls, which report it."""
        ungated: dict[matching.Queue, int] = {}
        for namespace in {queue[0] for queue in tasks}:
            try:
                found = await self.policies.of(conn, namespace, [name for ns, name in tasks if ns == namespace])
            except ValidationError:
                continue
            ungated.update({(namespace, n): tasks[(namespace, n)] for n, p in found.items() if not p.gates.any()})
        return ungated


async def decide_inline(
    conn: asyncpg.Connection,
    run_ids: Collection[uuid.UUID],
    config: DeciderConfig,
    unmatched: Collection[matching.Queue] = (),
) -> Decided:
    """Decide the runs a start or a result just queued, in the caller's
    transaction, so that they move on at its commit: the caller reports the
    outcome (`report`) once that commit is done, makes sure the decider loop
    is told of the runs it `left`, and settles the polls it `claimed` (leased
    the tasks it scheduled, as the loop's passes do; not those of the
    `unmatched` queues, which the caller leases itself) once its transaction
    has ended, committed or not.

    Only runs whose decision is their own affair are taken (see _LOCK_GIVEN
    and _local); a run another transaction holds is skipped, never waited for.
    Everything happens under a savepoint: if it fails (a deadlock, a bad spec,
    anything but a lost connection), it is undone and logged, and every run is
    left queued for the decider loop, which isolates and quarantines. Never
    raises but for a lost connection: a start or a result does not fail for it."""
    wanted = sorted(set(run_ids))
    if not wanted:
        return Decided()
    started_ns = time.time_ns()
    matcher = _Matcher(config.offers, config.policies, set(unmatched)) if config.offers is not None else None
    try:
        async with conn.transaction():
            runs = await conn.fetch(_LOCK_GIVEN, wanted)
            outcome = await _decide(conn, runs, config, inline=True, matcher=matcher)
    except BaseException as error:  # noqa: BLE001 - whatever it was, the decider loop takes these runs
        if matcher is not None:  # undone with the savepoint: those polls lease for themselves
            matching.settle(matcher.claimed, committed=False)
        if not isinstance(error, Exception) or _connection_lost(error, conn):
            raise
        _inline_failures.note(error, len(wanted))
        return Decided(left=set(wanted))
    outcome.left |= set(wanted) - {run["id"] for run in runs}
    outcome.started_ns = started_ns
    outcome.claimed = matcher.claimed if matcher is not None else []
    return outcome


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
                log.warning(
                    "run %s: deciding failed (%s); retrying it in %s",
                    execution_id,
                    error,
                    _ERROR_BACKOFF,
                    extra=about(run_id=execution_id),
                )
                await conn.execute(_DEFER, execution_id, _ERROR_BACKOFF)
                continue
            log.error(
                "run %s: deciding it failed, even alone", execution_id, exc_info=error, extra=about(run_id=execution_id)
            )
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
        report(outcome, config)
        decided += outcome.decided
    return decided


class _InlineFailures:
    """Logs inline decisions that failed: the first at once, then at most one
    line a minute with how many failed since, so that a cause every start or
    result meets (a deadlock storm, a bad trigger) does not flood the log."""

    INTERVAL = 60.0

    def __init__(self) -> None:
        self.logged_at: float | None = None
        self.since = 0

    def note(self, error: BaseException, runs: int) -> None:
        self.since += 1
        now = time.monotonic()
        if self.logged_at is not None and now - self.logged_at < self.INTERVAL:
            return
        log.warning(
            "deciding %d runs inline failed (%s); the decider loop takes them (%d inline decisions failed since "
            "the last such line)",
            runs,
            _describe(error),
            self.since,
        )
        self.logged_at, self.since = now, 0


_inline_failures = _InlineFailures()


@dataclass
class Decided:
    """What a decision pass did, to report once its transaction committed."""

    decided: int = 0
    quarantined: list[Quarantined] = field(default_factory=list)
    ended: list[tuple[str, FinishRun]] = field(default_factory=list)
    ready: set[tuple[str, str]] = field(default_factory=set)
    decisions: list[tuple[RunSnapshot, Decision]] = field(default_factory=list)
    left: set[uuid.UUID] = field(default_factory=set)  # inline: runs left queued for the decider loop
    started_ns: int = 0  # inline: when it began, for its trace
    # inline: the waiting polls leased tasks in the caller's transaction, to settle once it ended
    claimed: list[matching.Offer] = field(default_factory=list)

    def traced(self) -> list[tuple[RunSnapshot, str | None]]:
        """The runs decided, with the status each ended in (None: still running), for trace_pass."""
        return [(run, None if (end := d.finish()) is None else end.status.value) for run, d in self.decisions]


async def trace_pass(pool: Pool, started_ns: int, runs: list[tuple[RunSnapshot, str | None]]) -> None:
    """A decision pass's span, and the span of each run it ended (written now,
    from the run's start): `runs` are those it decided, with the status each
    ended in (None: still running)."""
    if not tracing.enabled():
        return
    tracing.record_decider_pass(started_ns, [run.id for run, _ in runs])
    ended = {run.id: (run, status) for run, status in runs if status is not None}
    if not ended:
        return
    async with pool.acquire() as conn:
        times = await diagnostics.run_times(conn, list(ended))
    for run_id, (created_at, ended_at) in times.items():
        run, status = ended[run_id]
        tracing.record_run(run_id, run.namespace, run.workflow_name, status or "", created_at, ended_at)


def report(outcome: Decided, config: DeciderConfig) -> None:
    """Logs and hooks, once the transaction that did it has committed (a
    decision rolled back is neither counted nor told)."""
    if config.on_decision is not None:
        for snapshot, decision in outcome.decisions:
            config.on_decision(snapshot, decision)
    if outcome.ready and config.on_ready is not None:
        config.on_ready(outcome.ready)
    for run_id, finish in outcome.ended:
        if finish.status is not RunStatus.COMPLETED:
            failed = f" (task {finish.failed_task_id})" if finish.failed_task_id else ""
            log.info(
                "run %s %s%s: %s",
                run_id,
                finish.status.value,
                failed,
                finish.reason[:300],
                extra=about(run_id=run_id, task_id=finish.failed_task_id or None),
            )
    for quarantined in outcome.quarantined:
        log.error(
            "run %s (%s/%s) is quarantined: %s",
            quarantined.run_id,
            quarantined.namespace,
            quarantined.workflow,
            quarantined.reason,
            extra=about(namespace=quarantined.namespace, run_id=quarantined.run_id, workflow=quarantined.workflow),
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


async def _quarantine_alone(conn: asyncpg.Connection, execution_id: uuid.UUID, reason: str) -> Decided:
    async with conn.transaction():
        return Decided(quarantined=await quarantine_runs(conn, [(execution_id, reason)]))


async def _decide(
    conn: asyncpg.Connection,
    runs: list[asyncpg.Record],
    config: DeciderConfig,
    inline: bool = False,
    matcher: _Matcher | None = None,
) -> Decided:
    """Decide and apply; `inline` leaves (unapplied, events kept) every run the
    loop would quarantine and every run whose decision is not _local. With a
    `matcher`, the tasks scheduled are leased to waiting polls where it can."""
    if not runs:
        return Decided()
    now: datetime.datetime = runs[0]["now"]
    applier = _Applier(now, config.retention_seconds, inline=inline)
    rows_by_run, unreadable = await _task_rows(conn, [r["id"] for r in runs if not r["quarantined"]])
    keys = [_spec_key(run) for run in runs]
    specs = await workflows.stored_specs(conn, set(keys))
    live: list[tuple[asyncpg.Record, WorkflowSpec]] = []
    for run, key in zip(runs, keys, strict=True):
        raw_spec = specs.get(key)  # None: the version row is missing
        if run["quarantined"]:
            applier.set_aside(run, raw_spec)
        elif run["id"] in unreadable:
            applier.quarantine(run["id"], unreadable[run["id"]])
        else:
            try:
                name, version = run["workflow_name"], run["workflow_version"]
                live.append((run, workflows.parsed_spec(run["namespace"], name, version, raw_spec)))
            except Exception as error:  # noqa: BLE001 - a version row missing or nothing can parse: that run alone
                applier.quarantine(
                    run["id"],
                    f"workflow {run['workflow_name']} version "
                    f"{run['workflow_version']} cannot be read: {_describe(error)}",
                )
    decisions: list[tuple[RunSnapshot, Decision]] = []
    for run, snapshot in await _snapshots(conn, live, rows_by_run, config, applier):
        decision = await _decision(conn, config, snapshot, _event_of(set(run["events"])), now)
        quarantine = decision.quarantine()
        if quarantine is not None:
            applier.quarantine(run["id"], quarantine.reason)
            continue
        if inline and not _local(snapshot, decision):
            applier.left.add(run["id"])
            continue
        applier.add(snapshot, decision, mirrored=run["mirrored"])
        decisions.append((snapshot, decision))
    consumed = [event for run in runs if run["id"] not in applier.left for event in run["event_ids"]]
    outcome = await applier.apply(conn, consumed, matcher)
    outcome.decisions = decisions
    outcome.left = applier.left
    outcome.decided = len(runs) - len(outcome.quarantined) - len(applier.left)
    return outcome


def _spec_key(run: asyncpg.Record) -> workflows.SpecKey:
    return (run["namespace"], run["workflow_name"], run["workflow_version"], run["version_created_at"])


# What a decision may do and still be decided inline: none of these touch
# another run's rows, an admission or a run's messages, nor ask for another pass.
_NOT_LOCAL = (StartChild, NotifyParent, AdmitNext, StartFailureWorkflow, ContinueAsNew, DecideAgain)


def _local(snapshot: RunSnapshot, decision: Decision) -> bool:
    """Whether applying this decision touches only its own run's rows (and the
    shared counters every decision writes): ending a run with a child cancels
    the child too, and scheduling PULL_WORKFLOW_MESSAGES locks the run's
    messages first, so those are left to the loop."""
    if any(isinstance(command, _NOT_LOCAL) for command in decision.commands):
        return False
    if any(row.type is TaskType.SUB_WORKFLOW for row in snapshot.tasks.values()):
        return False
    return not any(
        isinstance(command, ScheduleTask) and command.type is TaskType.PULL_WORKFLOW_MESSAGES
        for command in decision.commands
    )


async def _decision(
    conn: asyncpg.Connection, config: DeciderConfig, snapshot: RunSnapshot, event: Event, now: datetime.datetime
) -> Decision:
    """decide(), once more with the policies it found missing (the task types
    a dynamic fork named in this very pass): its tasks must start on their
    TaskDefinition's policy, never on the operator's defaults by mistake."""
    for _ in range(3):
        try:
            decision = decide(snapshot, event, now, config.rng)
        except Exception as error:  # noqa: BLE001 - decide() is total; this guards that promise
            return Decision([Quarantine(f"the decider failed: {_describe(error)}")])
        missing = decision.needs - set(snapshot.policies)
        if not missing:
            return decision
        found = await _policies(conn, config, snapshot.namespace, set(missing))
        if isinstance(found, str):
            return Decision([Quarantine(found)])
        snapshot = replace(snapshot, policies={**snapshot.policies, **found})
    return decision


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
        retry_kind=RetryKind(row["retry_kind"]) if row["retry_kind"] else None,
        delay_source=DelaySource(row["retry_after_source"] or DelaySource.HINT.value),
        loop=row["loop_ref"],
        iteration=row["iteration"],
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
class Finishing:
    """A run the decision ends, and what follows from its end: applied only if it does end."""

    run_id: str
    namespace: str
    finish: FinishRun
    consequences: list[Consequence] = field(default_factory=list)


async def _policies(
    conn: asyncpg.Connection, config: DeciderConfig, namespace: str, names: set[str]
) -> dict[str, TaskPolicy] | str:
    """The namespace's policies by task type, or why a definition cannot be read."""
    try:
        return await config.policies.of(conn, namespace, names)
    except ValidationError as error:
        return f"a task definition of namespace {namespace} cannot be read: {_describe(error)}"


def _literal(value: object) -> str:
    """A parameter that is a plain string, not an expression ("" otherwise)."""
    return value if isinstance(value, str) and "${" not in value else ""


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
        for task in spec.all_tasks:
            names.add(task.name)
            if task.type is TaskType.FORK_JOIN_DYNAMIC:
                fork = rows_by_run[run["id"]].get(task.task_reference_name)
                if fork is not None:
                    names.add(str(fork.output.get("forkTaskName", "")))
                elif literal := _literal(task.input_parameters.get("forkTaskName")):
                    names.add(literal)  # forked in this very pass: knowing its type saves deciding the run twice
        for row in rows_by_run[run["id"]].values():
            if row.status.is_failure():
                failing_by_ns[run["namespace"]].add(row.name)
    policies: dict[uuid.UUID, dict[str, TaskPolicy] | str] = {}
    for namespace in {run["namespace"] for run, _ in live}:
        of_namespace = [run for run, _ in live if run["namespace"] == namespace]
        found = await _policies(conn, config, namespace, set().union(*(names_by_run[r["id"]] for r in of_namespace)))
        for run in of_namespace:  # one unreadable definition costs only the runs that use it
            policies[run["id"]] = (
                found
                if not isinstance(found, str)
                else await _policies(conn, config, namespace, names_by_run[run["id"]])
            )
    budgets: dict[str, dict[str, BudgetWindow]] = defaultdict(dict)
    for namespace, names in failing_by_ns.items():
        for row in await conn.fetch(_BUDGETS, namespace, list(names), WINDOW_SECONDS):
            budgets[namespace][row["name"]] = BudgetWindow(row["executions"], row["retries"])
    built: list[tuple[asyncpg.Record, RunSnapshot]] = []
    for run, spec in live:
        found = policies[run["id"]]
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
                admission_key=run["admission_key"],
                parent_run_id=_str_or_none(run["parent_execution_id"]),
                parent_task_id=_str_or_none(run["parent_task_id"]),
                chain_id=_str_or_none(run["chain_id"]),
                previous_run_id=_str_or_none(run["previous_run_id"]),
                chain_deadline_at=run["chain_deadline_at"],
                policies=found,
                defaults=config.policies.defaults,
                budgets=budgets[run["namespace"]],
                paused=run["paused"],
                superseded=run["superseded"],
                input_overrides=run["input_overrides"],
                task_overrides={
                    ref: TaskOverride.model_validate(value) for ref, value in (run["task_overrides"] or {}).items()
                },
            )
        except Exception as error:  # noqa: BLE001 - a run row nothing wrote this way: that run alone
            applier.quarantine(run["id"], f"the run cannot be read: {_describe(error)}")
            continue
        built.append((run, snapshot))
    return built


# An indefinite task's first attempt carries its time budget: its deadline is
# the insert's now() plus the budget, if earlier than the one it has.
_INSERT_TASKS = f"""
WITH inserted AS (
INSERT INTO tasks (id, execution_id, namespace, ref, type, name, attempt, status, input, output, reason,
                   first_scheduled_at, available_at, ended_at, close_deadline,
                   schedule_to_start_timeout, start_to_close_timeout, timeout_seconds, heartbeat_timeout,
                   response_timeout, timeout_policy,
                   schedule_to_start_at, total_at, schedule_to_close_at, wait_until, executor, loop_ref, iteration)
SELECT u.id, u.execution_id, u.namespace, u.ref, u.type, u.name, u.attempt, u.status, u.input, u.output, u.reason,
       u.first_scheduled_at, u.available_at, u.ended_at,
       CASE WHEN u.budget > 0 THEN least(u.close_deadline, now() + make_interval(secs => u.budget))
            ELSE u.close_deadline END,
       u.schedule_to_start_timeout, u.start_to_close_timeout, u.timeout_seconds, u.heartbeat_timeout,
       u.response_timeout, u.timeout_policy, u.schedule_to_start_at, u.total_at,
       CASE WHEN u.budget > 0 THEN least(u.schedule_to_close_at, now() + make_interval(secs => u.budget))
            ELSE u.schedule_to_close_at END,
       u.wait_until, u.executor, u.loop_ref, u.iteration
  FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[],
              $8::text[], $9::jsonb[], $10::jsonb[], $11::text[], $12::timestamptz[], $13::timestamptz[],
              $14::timestamptz[], $15::timestamptz[], $16::int[], $17::int[], $18::int[], $19::int[],
              $20::int[], $21::text[], $22::timestamptz[], $23::timestamptz[], $24::timestamptz[],
              $25::timestamptz[], $26::text[], $27::text[], $28::int[], $29::int[])
       AS u(id, execution_id, namespace, ref, type, name, attempt, status, input, output, reason,
            first_scheduled_at, available_at, ended_at, close_deadline,
            schedule_to_start_timeout, start_to_close_timeout, timeout_seconds, heartbeat_timeout,
            response_timeout, timeout_policy, schedule_to_start_at, total_at, schedule_to_close_at, wait_until,
            executor, loop_ref, iteration, budget)
ON CONFLICT (execution_id, ref, attempt) DO NOTHING
RETURNING namespace, name, attempt, type
)
-- The retry budget's window counts every attempt of a task type that runs work,
-- sharded by connection: every start and result transaction that decides inline
-- writes these counters, and no two transactions open at once share a shard
-- (with a few random shards they queued on one another's rows until commit).
INSERT INTO execution_counts AS c (namespace, name, bucket, shard, executions, retries)
SELECT namespace, name, $30, pg_backend_pid() % 32767, count(*), count(*) FILTER (WHERE attempt > 1)
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
WITH consumed AS (DELETE FROM decide_queue WHERE id = ANY($3)),
     notified AS (SELECT {wakeups.notify_ready_sql("queue")} FROM unnest($4::text[]) AS queue)
UPDATE executions e SET evaluated = true, mirror_seq = e.mirror_seq + (e.resource_name IS NOT NULL)::int,
       timeout_at = coalesce(t.timeout_at, e.timeout_at),
       chain_deadline_at = coalesce(e.chain_deadline_at, t.chain_deadline_at)
  FROM unnest($1::uuid[], $2::timestamptz[], $5::timestamptz[]) AS t(id, timeout_at, chain_deadline_at)
 WHERE e.id = t.id AND (SELECT count(*) FROM notified) >= 0
"""


class _Applier:
    """Collects the commands of a batch and applies them in bulk."""

    def __init__(
        self, now: datetime.datetime, retention_seconds: int = DEFAULT_RETENTION_SECONDS, inline: bool = False
    ) -> None:
        self.now = now
        self.retention_seconds = retention_seconds
        # Inline, a run the loop would quarantine or set aside is left to the loop instead.
        self.inline = inline
        self.left: set[uuid.UUID] = set()
        self.tasks: list[tuple[Any, ...]] = []
        self.updates: list[tuple[Any, ...]] = []
        self.decided: list[tuple[uuid.UUID, datetime.datetime | None, datetime.datetime | None]] = []
        self.finishes: list[Finishing] = []
        self.quarantines: list[tuple[uuid.UUID, str]] = []
        self.children: list[tuple[RunSnapshot, StartChild, uuid.UUID]] = []
        self.prunes: list[tuple[uuid.UUID, str, int]] = []
        self.again: list[uuid.UUID] = []
        self.waiting_for_messages: list[uuid.UUID] = []
        self.ready: set[tuple[str, str]] = set()
        # The worker tasks scheduled, per queue: those leasable now (by id), and the queues of those delayed.
        self.leasable: dict[tuple[str, str], list[uuid.UUID]] = defaultdict(list)
        self.delayed: set[tuple[str, str]] = set()

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
                self.updates.append((uuid.UUID(command.task_id), command.status.value, command.reason, command.output))
            elif isinstance(command, PruneIterations):
                self.prunes.append((run_id, command.loop, command.before))
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
            self.decided.append((run_id, timeout_at, chain_deadline_at))

    def quarantine(self, run_id: uuid.UUID, reason: str) -> None:
        if self.inline:
            self.left.add(run_id)
        else:
            self.quarantines.append((run_id, reason))

    def set_aside(self, run: asyncpg.Record, raw_spec: str | None) -> None:
        """A quarantined run is not decided: its events are consumed, and only
        a terminate request acts on it, without reading its spec or tasks."""
        if self.inline:
            self.left.add(run["id"])
        elif run["terminate_requested"] is not None:
            links = RunLinks(
                id=str(run["id"]),
                workflow_name=run["workflow_name"],
                parent_run_id=_str_or_none(run["parent_execution_id"]),
                parent_task_id=_str_or_none(run["parent_task_id"]),
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
                executor.value,
                command.loop,
                command.iteration,
                command.time_budget,
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
                self.now if command.status.is_terminal() else None,
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
                command.type.executor().value,
                command.loop,
                command.iteration,
                0,
            )
        )
        return task_id

    async def apply(self, conn: asyncpg.Connection, event_ids: list[int], matcher: _Matcher | None = None) -> Decided:
        await messages.lock(conn, self.waiting_for_messages)  # first: see store.messages
        outcome = Decided(quarantined=await quarantine_runs(conn, self.quarantines))
        if self.tasks:
            await conn.execute(_INSERT_TASKS, *map(list, zip(*self.tasks, strict=False)), _bucket(self.now))
        if self.updates:
            await conn.executemany(_UPDATE_TASK, self.updates)
        if self.prunes:
            await conn.executemany(_PRUNE, self.prunes)
        if self.again:
            await conn.execute(_DECIDE_AGAIN, self.again)
        if self.waiting_for_messages:
            await messages.deliver(conn, self.waiting_for_messages)
        for snapshot, child, parent_task in self.children:
            await _start_child(conn, snapshot, child, parent_task)
        if self.finishes:
            ended = set(await finish_runs(conn, self.finishes, self.retention_seconds))
            outcome.ended = [(f.run_id, f.finish) for f in self.finishes if f.run_id in ended]
        ready = self.ready
        if matcher is not None and self.leasable:
            leased = await matcher.lease(conn, {queue: len(ids) for queue, ids in self.leasable.items()})
            # A queue whose new tasks all went to waiting polls has nothing for anyone else to wake for.
            ready = ready - {
                queue
                for queue, ids in self.leasable.items()
                if queue not in self.delayed and all(str(task_id) in leased for task_id in ids)
            }
        await conn.execute(
            _MARK_DECIDED,
            [d[0] for d in self.decided],
            [d[1] for d in self.decided],
            event_ids,
            wakeups.ready_payloads(ready),
            [d[2] for d in self.decided],
        )
        outcome.ready = ready
        return outcome


def _str_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def _admission_limit(raw_spec: str | None) -> int | None:
    """rateLimitConfig.concurrentExecLimit from a spec that may not parse; None
    leaves the admission of waiting runs to the sweeper's rebalance."""
    if raw_spec is None:  # the version row is missing
        return None
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


# A run's retention starts when it ends: its own (or its workflow's) for its
# outcome, else the operator's default ($6); 0 keeps it for ever.
_FINISH = """
UPDATE executions e
   SET status = f.status, reason = f.reason, output = f.output, failed_task_id = f.failed_task_id,
       ended_at = now(), timeout_at = NULL, mirror_seq = e.mirror_seq + 1, evaluated = true,
       expires_at = (SELECT CASE WHEN keep > 0 THEN now() + make_interval(secs => keep) END
                       FROM coalesce(CASE WHEN f.status = 'COMPLETED' THEN e.retain_seconds
                                          ELSE coalesce(e.retain_failed_seconds, e.retain_seconds) END,
                                     $6::int) AS keep)
  FROM unnest($1::uuid[], $2::text[], $3::text[], $4::jsonb[], $5::uuid[])
       AS f(id, status, reason, output, failed_task_id)
 WHERE e.id = f.id AND e.status = 'RUNNING'
RETURNING e.id
"""
_CANCEL_ACTIVE = f"""
WITH cancelled AS (
    UPDATE tasks SET status = 'CANCELED', ended_at = now(), reason = 'run ended',
           schedule_to_start_at = NULL, start_to_close_at = NULL, total_at = NULL, heartbeat_at = NULL,
           lease_expires_at = NULL, schedule_to_close_at = NULL, wait_until = NULL
     WHERE execution_id = ANY($1) AND status IN ('SCHEDULED', 'IN_PROGRESS')
    RETURNING child_execution_id, namespace, name, CASE WHEN status = 'CANCELED' THEN holds END AS holds
), freed AS ({wakeups.released("cancelled")}
)
SELECT child_execution_id, (SELECT count(*) FROM freed) FROM cancelled
"""
# A finished run takes no more messages: those nobody took go with it.
_DROP_MESSAGES = "DELETE FROM run_messages WHERE execution_id = ANY($1)"
_TERMINATE_CHILDREN = """
UPDATE executions SET terminate_requested = $2
 WHERE id = ANY($1) AND status = 'RUNNING' AND terminate_requested IS NULL
RETURNING id
"""
_NOTIFY_PARENT_TASK = """
UPDATE tasks SET status = $2, output = $3, reason = $4, ended_at = now(), total_at = NULL
 WHERE id = $1 AND status = 'IN_PROGRESS'
"""


async def finish_runs(
    conn: asyncpg.Connection,
    finishes: list[Finishing],
    retention_seconds: int = DEFAULT_RETENTION_SECONDS,
) -> list[str]:
    """End runs and everything hanging off them, in the decider's transaction:
    cancel their active tasks, terminate their child runs, then apply what the
    decider said follows from each end (tell the parent, admit the next run of
    the key, start the failure workflow). The common case (no parent, no
    children, no consequence) costs two statements for the whole batch.
    Returns the ids of the runs that ended (a run that had already ended is
    left alone, and so are its consequences)."""
    ended = {
        str(row["id"])
        for row in await conn.fetch(
            _FINISH,
            [uuid.UUID(f.run_id) for f in finishes],
            [f.finish.status.value for f in finishes],
            [f.finish.reason for f in finishes],
            [f.finish.output for f in finishes],
            [uuid.UUID(f.finish.failed_task_id) if f.finish.failed_task_id else None for f in finishes],
            retention_seconds,
        )
    }
    if not ended:
        return []
    cancelled = await conn.fetch(_CANCEL_ACTIVE, [uuid.UUID(run_id) for run_id in ended])
    await conn.execute(_DROP_MESSAGES, [uuid.UUID(run_id) for run_id in ended])
    children = [r["child_execution_id"] for r in cancelled if r["child_execution_id"] is not None]
    if children:
        stopped = await conn.fetch(_TERMINATE_CHILDREN, children, "the parent run ended")
        await executions.enqueue_decides(conn, [r["id"] for r in stopped], "terminate")
    admitted: list[uuid.UUID] = []
    for finishing in finishes:
        if finishing.run_id in ended:
            for command in finishing.consequences:
                admitted += await _follow(conn, finishing, command)
    await executions.enqueue_decides(conn, admitted, "admitted")
    return sorted(ended)


async def _follow(conn: asyncpg.Connection, finishing: Finishing, command: Consequence) -> list[uuid.UUID]:
    """Apply one consequence of a run's end; return the runs it admitted."""
    if isinstance(command, AdmitNext):
        return await admission.admit_waiting(conn, finishing.namespace, command.workflow, command.key, command.limit)
    if isinstance(command, NotifyParent):
        await conn.execute(
            _NOTIFY_PARENT_TASK, uuid.UUID(command.parent_task_id), command.status.value, command.output, command.reason
        )
        await executions.enqueue_decide(conn, command.parent_run_id, "child_finished")
        return []
    if isinstance(command, ContinueAsNew):
        await _continue_as_new(conn, finishing, command)
        return []
    started = await executions.start_run(conn, finishing.namespace, command.workflow, None, command.input)
    if not isinstance(started, executions.Started):
        log.warning("run %s: failureWorkflow %s not started: %s", finishing.run_id, command.workflow, started.message)
    return []


_CONTINUED = "SELECT correlation_id, schedule_name FROM executions WHERE id = $1"


async def _continue_as_new(conn: asyncpg.Connection, finishing: Finishing, command: ContinueAsNew) -> None:
    """Start the next link of the chain, in the transaction that ended this
    one: on the latest version, with the chain's id and deadline, and the
    same correlation id and schedule (whose overlap policy sees the chain as
    one run). A start the gates refuse leaves the chain ended here, said in
    the ended run's reason."""
    previous = await conn.fetchrow(_CONTINUED, uuid.UUID(finishing.run_id))
    started = await executions.start_run(
        conn,
        finishing.namespace,
        command.workflow,
        None,
        command.input,
        correlation_id=previous["correlation_id"],
        run_id=command.run_id,
        schedule=previous["schedule_name"],
        chain=executions.ChainLink(uuid.UUID(command.chain_id), uuid.UUID(finishing.run_id), command.chain_deadline_at),
    )
    if not isinstance(started, executions.Started):
        log.warning("run %s: could not continue as new: %s", finishing.run_id, started.message)
        await conn.execute(
            "UPDATE executions SET reason = $2 WHERE id = $1",
            uuid.UUID(finishing.run_id),
            f"could not continue as new: {started.message}",
        )
